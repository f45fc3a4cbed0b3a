"""Penguin's ledger policy: its defaults, the environment variables and the default path."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.infrastructure.storage.layout import DataRoot

__all__ = [
    "DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS",
    "DEFAULT_LEDGER_MAX_AGE_DAYS",
    "DEFAULT_LEDGER_MAX_BYTES",
    "DEFAULT_LEDGER_MAX_EVENTS",
    "RuntimeEventLedgerPolicy",
    "default_ledger_path",
    "policy_from_env",
]

DEFAULT_LEDGER_MAX_EVENTS: Final = 100_000
DEFAULT_LEDGER_MAX_AGE_DAYS: Final = 14
DEFAULT_LEDGER_MAX_BYTES: Final = 256 * 1024 * 1024
DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS: Final = 60.0
_OFF: Final = frozenset({"none", "off", "disabled", "0"})


@dataclass(frozen=True)
class RuntimeEventLedgerPolicy:
    """Retention limits (``None`` or ``<= 0`` disables one) and the cleanup interval."""

    max_events: int = DEFAULT_LEDGER_MAX_EVENTS
    max_age_seconds: int | None = DEFAULT_LEDGER_MAX_AGE_DAYS * 24 * 60 * 60
    max_bytes: int | None = DEFAULT_LEDGER_MAX_BYTES
    cleanup_interval_seconds: float = DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS


def default_ledger_path() -> Path:
    """``PENGUIN_RUNTIME_EVENT_LEDGER_PATH``, else the data root's ``runtime_events.db``."""
    override = os.getenv("PENGUIN_RUNTIME_EVENT_LEDGER_PATH")
    if override:
        return Path(override).expanduser()
    return DataRoot.from_env().path / "runtime_events" / "runtime_events.db"


def _env(name: str) -> str | None:
    raw = os.getenv(name)
    return None if raw is None or raw == "" else raw


def _env_int(name: str, default: int) -> int:
    raw = _env(name)
    try:
        return default if raw is None else int(raw)
    except ValueError:
        return default


def _env_optional_int(name: str, default: int | None, scale: int = 1) -> int | None:
    raw = _env(name)
    if raw is None:
        return default
    if raw.lower() in _OFF:
        return None
    try:
        return int(raw) * scale
    except ValueError:
        return default


def _env_interval(name: str, default: float) -> float:
    raw = _env(name)
    if raw is None:
        return default
    if raw.lower() in _OFF:
        return math.inf
    try:
        parsed = float(raw)
    except ValueError:
        return default
    return parsed if parsed > 0 else math.inf


def policy_from_env() -> RuntimeEventLedgerPolicy:
    """The policy of the ``PENGUIN_RUNTIME_EVENT_LEDGER_*`` variables (defaults when malformed)."""
    day = 24 * 60 * 60
    return RuntimeEventLedgerPolicy(
        max_events=_env_int("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS", DEFAULT_LEDGER_MAX_EVENTS),
        max_age_seconds=_env_optional_int(
            "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_AGE_DAYS", DEFAULT_LEDGER_MAX_AGE_DAYS * day, day
        ),
        max_bytes=_env_optional_int(
            "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_BYTES", DEFAULT_LEDGER_MAX_BYTES
        ),
        cleanup_interval_seconds=_env_interval(
            "PENGUIN_RUNTIME_EVENT_LEDGER_CLEANUP_INTERVAL_SECONDS",
            DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS,
        ),
    )
