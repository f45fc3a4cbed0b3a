"""The Session aggregate: its commands, events, state, trace-line encoding and identity."""
