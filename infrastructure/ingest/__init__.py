"""Continuous ingest: follow a data root's traces into the ledger (issue #16, ADR 0027, 0028)."""

from pentrace.infrastructure.ingest.follower import Cursor, CursorStore, Follower, IngestStats
from pentrace.infrastructure.ingest.runner import EmbeddedIngest, IngestRunner

__all__ = ["Cursor", "CursorStore", "EmbeddedIngest", "Follower", "IngestRunner", "IngestStats"]
