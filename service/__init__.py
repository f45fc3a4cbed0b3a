"""The HTTP event service: SSE with durable replay, and read-only session endpoints."""
