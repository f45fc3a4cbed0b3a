"""eventsourcing's own recorder contract suites, run against the ledger on SQLite and PostgreSQL."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from eventsourcing.tests.persistence import ApplicationRecorderTestCase, TrackingRecorderTestCase

from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from tests.support import NO_POSTGRES, POSTGRES_URL

_PG_URL = POSTGRES_URL


class _SQLiteLedgers:
    """Each test gets a fresh ledger file in its own temporary folder."""

    def setUp(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="pentrace-ledger-"))
        self._ledgers: list[RuntimeEventLedger] = []

    def tearDown(self) -> None:
        for ledger in self._ledgers:
            ledger.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def create_recorder(self) -> RuntimeEventLedger:
        db = LedgerDatabase.for_path(self._folder / f"{len(self._ledgers)}.db")
        ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
        self._ledgers.append(ledger)
        return ledger


class _PostgresLedgers:
    """Each test gets its own uniquely prefixed tables, dropped afterwards."""

    def setUp(self) -> None:
        self._ledgers: list[RuntimeEventLedger] = []

    def tearDown(self) -> None:
        for ledger in self._ledgers:
            ledger.db.drop_all()
            ledger.close()

    def create_recorder(self) -> RuntimeEventLedger:
        assert _PG_URL is not None
        prefix = f"t{uuid.uuid4().hex[:12]}_"
        ledger = RuntimeEventLedger(
            LedgerDatabase(_PG_URL, table_prefix=prefix), LedgerSettings().with_limits_off()
        )
        self._ledgers.append(ledger)
        return ledger


class _LedgerApplicationRecorderCase(ApplicationRecorderTestCase[RuntimeEventLedger]):
    """The ledger's streams are strings, and it supports subscriptions (optional in the suite)."""

    def new_originator_id(self) -> str:
        return f"session:{uuid.uuid4()}"

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestSQLiteLedgerAsApplicationRecorder(_SQLiteLedgers, _LedgerApplicationRecorderCase):
    pass


class TestSQLiteLedgerAsTrackingRecorder(_SQLiteLedgers, TrackingRecorderTestCase):
    pass


@pytest.mark.postgres
@pytest.mark.skipif(_PG_URL is None, reason=NO_POSTGRES)
class TestPostgresLedgerAsApplicationRecorder(_PostgresLedgers, _LedgerApplicationRecorderCase):
    pass


@pytest.mark.postgres
@pytest.mark.skipif(_PG_URL is None, reason=NO_POSTGRES)
class TestPostgresLedgerAsTrackingRecorder(_PostgresLedgers, TrackingRecorderTestCase):
    pass
