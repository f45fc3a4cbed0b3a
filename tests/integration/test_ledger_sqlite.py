"""SQLite specifics: PRAGMAs, lock errors, size measurement."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pentrace.errors import ConfigError, LedgerError, LedgerLockedError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.retention import ledger_size
from tests.integration.test_ledger_contract import make_event


def test_the_file_uses_wal_and_incremental_auto_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "runtime_events" / "runtime_events.db"
    RuntimeEventLedger.open(settings=LedgerSettings(path=path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL


def test_a_write_blocked_by_another_process_lock_is_a_ledger_locked_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.db"
    ledger = RuntimeEventLedger(
        LedgerDatabase.for_path(path, busy_timeout_ms=50), LedgerSettings().with_limits_off()
    )
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(
            LedgerLockedError, match=r"append to the ledger on .*events\.db.*locked"
        ):
            ledger.append(make_event("s1", 1))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert ledger.append(make_event("s1", 1)) is True
    ledger.close()


def test_size_is_measured_after_a_wal_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings().with_limits_off())
    ledger.extend([make_event("s1", n, {"text": "y" * 4000}) for n in range(1, 50)])
    size = ledger_size(ledger.db)
    assert size is not None
    assert size >= 49 * 4000
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    ledger.close()


def test_an_unreachable_server_is_a_ledger_error_that_hides_the_password() -> None:
    url = "postgresql+psycopg://app:s3cret-pw@127.0.0.1:1/ledger"
    with pytest.raises(
        LedgerError, match=r"create the ledger schema on .*app:\*\*\*@127\.0\.0\.1:1"
    ) as caught:
        LedgerDatabase(url)
    assert "s3cret-pw" not in str(caught.value)
    assert caught.value.hint is not None


def test_an_in_memory_sqlite_url_is_refused_as_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs a file path"):
        LedgerDatabase("sqlite://")
