"""Server-sent events: the SSE route, frames, the ledger head follower and the ledger tail."""
