"""Structured logs for the follower: JSON lines or plain text on stderr.

A record's ``fields`` (see :func:`pentrace.infrastructure.ingest.follower.report`)
become keys of the JSON object, or ``key=value`` pairs after the message.
Fields carry paths, positions and counts, never record content.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["JsonFormatter", "TextFormatter", "configure_logging"]

_HANDLER_NAME = "pentrace-ingest"


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
        return json.dumps(body, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``LEVEL message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        pairs = ""
        if isinstance(fields, dict):
            pairs = "".join(f" {k}={v}" for k, v in fields.items())
        return f"{record.levelname.lower()}: {record.getMessage()}{pairs}"


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
