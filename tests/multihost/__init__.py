"""Multi-host tests and benchmark parts: agent hosts in Linux network namespaces (issue #16)."""
