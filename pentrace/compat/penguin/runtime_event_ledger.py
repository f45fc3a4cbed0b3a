"""Penguin's ``penguin.system.runtime_event_ledger`` module, name for name (see :mod:`.ledger`)."""

from __future__ import annotations

from pentrace.compat.penguin.ledger import (
    DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS,
    DEFAULT_LEDGER_MAX_AGE_DAYS,
    DEFAULT_LEDGER_MAX_BYTES,
    DEFAULT_LEDGER_MAX_EVENTS,
    ReplayResult,
    RuntimeEventLedger,
    RuntimeEventLedgerPolicy,
    default_ledger_path,
    get_runtime_event_ledger,
    policy_from_env,
)

__all__ = [
    "DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS",
    "DEFAULT_LEDGER_MAX_AGE_DAYS",
    "DEFAULT_LEDGER_MAX_BYTES",
    "DEFAULT_LEDGER_MAX_EVENTS",
    "ReplayResult",
    "RuntimeEventLedger",
    "RuntimeEventLedgerPolicy",
    "default_ledger_path",
    "get_runtime_event_ledger",
    "policy_from_env",
]
