"""What the follower counts and reports: counters, structured events, and their format.

:func:`report` logs one event on ``pentrace.ingest`` with its ``fields``,
which become keys of the JSON object, or ``key=value`` pairs after the
message (:func:`configure_logging`).  Fields carry paths, positions and
counts, never record content; a lone surrogate in a path is written as its
JSON escape.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

from pentrace.domain.json_codec import escape_surrogates

__all__ = ["IngestStats", "JsonFormatter", "TextFormatter", "configure_logging", "log", "report"]

_HANDLER_NAME = "pentrace-ingest"
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
    #: Records the ledger could not take (one finding each), left out of the ledger.
    refused_records: int = 0


def report(level: int, message: str, **fields: Any) -> None:
    """Log one structured event of the follower."""
    log.log(level, message, extra={"fields": fields})


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the fields."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            body.update({k: v for k, v in fields.items() if k not in body})
        return escape_surrogates(json.dumps(body, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """``LEVEL message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        pairs = ""
        if isinstance(fields, dict):
            pairs = "".join(f" {k}={v}" for k, v in fields.items())
        return escape_surrogates(f"{record.levelname.lower()}: {record.getMessage()}{pairs}")


def configure_logging(log_format: str, level: str = "info") -> None:
    """Send ``pentrace.ingest`` logs to stderr in ``log_format`` ("text" or "json")."""
    logger = logging.getLogger("pentrace.ingest")
    logger.setLevel(level.upper())
    for handler in list(logger.handlers):
        if handler.get_name() == _HANDLER_NAME:
            logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logger.addHandler(handler)
    logger.propagate = False
