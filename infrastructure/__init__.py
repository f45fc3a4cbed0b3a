"""Files and databases: the trace log store, the ledger and the application wiring."""
