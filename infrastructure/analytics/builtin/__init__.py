"""The built-in analytics projections; each module is meant to be read as an example."""
