"""The ledger's database: connections, dialect setup, schema, driver errors, formats, upgrades."""
