"""The trace log store: shard reading and writing, locks, fsync policy, checkpoints."""
