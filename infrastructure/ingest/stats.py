"""What the follower counts and reports: counters, and structured log events."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["IngestStats", "log", "report"]

log = logging.getLogger("pentrace.ingest")


@dataclass(slots=True)
class IngestStats:
    """Counters since the follower started, and the lag after the latest pass."""

    passes: int = 0
    indexed: int = 0
    already_held: int = 0
    skipped_lines: int = 0
    healed_fragments: int = 0
    replaced: int = 0
    forgotten_sessions: int = 0
    errors: int = 0
    sessions: int = 0
    shards: int = 0
    lag_bytes: int = 0


def report(level: int, message: str, **fields: Any) -> None:
    """Log one structured event of the follower."""
    log.log(level, message, extra={"fields": fields})
