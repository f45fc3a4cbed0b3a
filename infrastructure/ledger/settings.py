"""Ledger settings, read from environment variables with Penguin's names.

Every limit uses one rule: ``0`` or ``off`` (also ``none``, ``false``, ``no``)
disables it.  Penguin reads ``PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS=0`` as
"keep nothing" and wipes the ledger on every write (W5); here it means "no
count limit", the same as ``0`` for the age and size limits.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger.backend.credentials import mask_url

__all__ = [
    "ENV_CLEANUP_INTERVAL_SECONDS",
    "ENV_CONNECT_TIMEOUT",
    "ENV_LOCK_TIMEOUT",
    "ENV_MAX_AGE_DAYS",
    "ENV_MAX_BYTES",
    "ENV_MAX_EVENTS",
    "ENV_PATH",
    "ENV_STATEMENT_TIMEOUT",
    "ENV_TABLE_PREFIX",
    "ENV_URL",
    "ENV_URL_ALIAS",
    "DatabaseTimeouts",
    "LedgerSettings",
    "default_ledger_path",
    "safe_url",
]

ENV_PATH: Final = "PENGUIN_RUNTIME_EVENT_LEDGER_PATH"
ENV_URL: Final = "PENTRACE_LEDGER_URL"
ENV_URL_ALIAS: Final = "PENGUIN_RUNTIME_EVENT_LEDGER_URL"
ENV_MAX_EVENTS: Final = "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS"
ENV_MAX_AGE_DAYS: Final = "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_AGE_DAYS"
ENV_MAX_BYTES: Final = "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_BYTES"
ENV_CLEANUP_INTERVAL_SECONDS: Final = "PENGUIN_RUNTIME_EVENT_LEDGER_CLEANUP_INTERVAL_SECONDS"
ENV_TABLE_PREFIX: Final = "PENTRACE_LEDGER_TABLE_PREFIX"
ENV_CONNECT_TIMEOUT: Final = "PENTRACE_DB_CONNECT_TIMEOUT"
ENV_STATEMENT_TIMEOUT: Final = "PENTRACE_DB_STATEMENT_TIMEOUT"
ENV_LOCK_TIMEOUT: Final = "PENTRACE_DB_LOCK_TIMEOUT"

_OFF: Final = frozenset({"0", "off", "none", "false", "no", "disabled"})


def default_ledger_path(data_root: Path) -> Path:
    """The SQLite ledger of a data root: ``<root>/runtime_events/runtime_events.db``."""
    return data_root / "runtime_events" / "runtime_events.db"


def safe_url(url: str) -> str:
    """The URL with every credential replaced by ``***``, fit for messages and logs
    (see :func:`~pentrace.infrastructure.ledger.backend.credentials.mask_url`)."""
    return mask_url(url)


class DatabaseTimeouts(BaseModel):
    """How long any database connection of pentrace waits, in seconds; ``None`` is no limit.

    ``connect_seconds`` bounds opening a connection (a server that accepts and
    never answers included); ``statement_seconds`` bounds one statement on
    PostgreSQL (server side, and on the client side a little later for a
    server that stopped answering); ``lock_seconds`` bounds waiting for
    another writer: PostgreSQL's ``lock_timeout`` and SQLite's busy timeout.
    """

    model_config = ConfigDict(frozen=True)

    connect_seconds: float | None = 5.0
    statement_seconds: float | None = 30.0
    lock_seconds: float | None = 5.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DatabaseTimeouts:
        """``PENTRACE_DB_CONNECT_TIMEOUT``, ``..._STATEMENT_TIMEOUT``, ``..._LOCK_TIMEOUT``."""
        env = os.environ if environ is None else environ
        defaults = cls()
        return cls(
            connect_seconds=_limit(env, ENV_CONNECT_TIMEOUT, float, defaults.connect_seconds),
            statement_seconds=_limit(env, ENV_STATEMENT_TIMEOUT, float, defaults.statement_seconds),
            lock_seconds=_limit(env, ENV_LOCK_TIMEOUT, float, defaults.lock_seconds),
        )

    def to_env(self) -> dict[str, str]:
        """The variables :meth:`from_env` reads back as these timeouts."""
        return {
            ENV_CONNECT_TIMEOUT: _number_text(self.connect_seconds),
            ENV_STATEMENT_TIMEOUT: _number_text(self.statement_seconds),
            ENV_LOCK_TIMEOUT: _number_text(self.lock_seconds),
        }

    def with_lock_wait(self, seconds: float) -> DatabaseTimeouts:
        """A copy that waits ``seconds`` for another writer's lock (``--wait``)."""
        return self.model_copy(update={"lock_seconds": seconds})


class LedgerSettings(BaseModel):
    """Everything that decides how the ledger is opened; ``None`` means no limit.

    Where it lives: ``url`` (a SQLAlchemy URL) wins over ``path``; with
    neither, :func:`~pentrace.infrastructure.ledger.opener.open_ledger` uses
    :func:`default_ledger_path` under the data root.  ``table_prefix`` goes in
    front of every table name (several ledgers in one database).  How much it
    keeps: the retention limits.  How long it waits: ``timeouts`` (the lock
    wait included).
    """

    model_config = ConfigDict(frozen=True)

    path: Path | None = None
    # Never in a repr: the URL may hold a password.
    url: str | None = Field(default=None, repr=False)
    max_events: int | None = 100_000
    max_age_days: float | None = 14.0
    max_bytes: int | None = 268_435_456
    cleanup_interval_seconds: float | None = 60.0
    timeouts: DatabaseTimeouts = DatabaseTimeouts()
    table_prefix: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LedgerSettings:
        """Read every setting from ``environ`` (default ``os.environ``), defaults for the rest."""
        env = os.environ if environ is None else environ
        defaults = cls()
        url = (env.get(ENV_URL) or env.get(ENV_URL_ALIAS) or "").strip() or None
        if url is not None and "://" not in url:
            name = ENV_URL if env.get(ENV_URL) else ENV_URL_ALIAS
            raise ConfigError(
                f"{name}: expected a SQLAlchemy URL such as "
                f"postgresql+psycopg://user@host/db, found a value without '://'",
                hint=f"set {name} to a database URL or unset it to use SQLite",
            )
        raw_path = (env.get(ENV_PATH) or "").strip()
        return cls(
            path=Path(raw_path).expanduser() if raw_path else None,
            url=url,
            max_events=_limit(env, ENV_MAX_EVENTS, int, defaults.max_events),
            max_age_days=_limit(env, ENV_MAX_AGE_DAYS, float, defaults.max_age_days),
            max_bytes=_limit(env, ENV_MAX_BYTES, int, defaults.max_bytes),
            cleanup_interval_seconds=_limit(
                env, ENV_CLEANUP_INTERVAL_SECONDS, float, defaults.cleanup_interval_seconds
            ),
            timeouts=DatabaseTimeouts.from_env(env),
            table_prefix=env.get(ENV_TABLE_PREFIX) or "",
        )

    def to_env(self) -> dict[str, str]:
        """The variables :meth:`from_env` reads back as these settings; every one is set,
        so they override whatever the process environment holds."""
        return {
            ENV_PATH: str(self.path) if self.path is not None else "",
            ENV_URL: self.url or "",
            ENV_URL_ALIAS: "",
            ENV_MAX_EVENTS: _number_text(self.max_events),
            ENV_MAX_AGE_DAYS: _number_text(self.max_age_days),
            ENV_MAX_BYTES: _number_text(self.max_bytes),
            ENV_CLEANUP_INTERVAL_SECONDS: _number_text(self.cleanup_interval_seconds),
            **self.timeouts.to_env(),
            ENV_TABLE_PREFIX: self.table_prefix,
        }

    def with_lock_wait(self, seconds: float) -> LedgerSettings:
        """A copy that waits ``seconds`` for another writer's lock (``ledger --wait``)."""
        return self.model_copy(update={"timeouts": self.timeouts.with_lock_wait(seconds)})

    def with_limits_off(self) -> LedgerSettings:
        """A copy that keeps everything (tests, rebuilds, benchmarks)."""
        return self.model_copy(
            update={
                "max_events": None,
                "max_age_days": None,
                "max_bytes": None,
                "cleanup_interval_seconds": None,
            }
        )


_Number = TypeVar("_Number", int, float)


def _number_text(value: float | None) -> str:
    return "off" if value is None else repr(value)


def _limit(
    env: Mapping[str, str], name: str, kind: type[_Number], default: _Number | None
) -> _Number | None:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip().lower()
    if text in _OFF:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(
            f"{name}: expected a non-negative {kind.__name__} or 0/off, found {raw.strip()[:40]!r}",
            hint=f"set {name} to a number, or to 0 to disable this limit",
        ) from None
    if value < 0 or value != value:
        raise ConfigError(
            f"{name}: expected a non-negative {kind.__name__} or 0/off, found {raw.strip()[:40]!r}",
            hint=f"set {name} to a number, or to 0 to disable this limit",
        )
    return None if value == 0 else value
