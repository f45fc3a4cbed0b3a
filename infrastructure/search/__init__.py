"""Full-text search: the derived FTS5 index, its queries and the shard bytes it has read."""
