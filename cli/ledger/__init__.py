"""``pentrace ledger ...``: the ledger commands and how they show rows."""
