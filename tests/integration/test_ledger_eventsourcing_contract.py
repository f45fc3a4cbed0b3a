"""eventsourcing's own recorder contract suites, run against the ledger on every backend.

One test class per backend of :data:`~tests.integration.ledger_backends.BACKENDS`
and per suite; a backend that is not reachable here (PostgreSQL without
``PENTRACE_TEST_DATABASE_URL``) is skipped.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import ClassVar

from eventsourcing.tests.persistence import ApplicationRecorderTestCase, TrackingRecorderTestCase

from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from tests.integration.ledger_backends import BACKENDS, Backend, LedgerBackend, reach


class _Ledgers:
    """Each recorder of a test is a fresh ledger (its own file, or its own table names)."""

    backend: ClassVar[Backend]

    def setUp(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="pentrace-ledger-"))
        self._handles: list[LedgerBackend] = []
        if self.backend.url(self._folder) is None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self.skipTest(self.backend.missing)  # type: ignore[attr-defined]  # a TestCase

    def tearDown(self) -> None:
        for handle in self._handles:
            handle.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def create_recorder(self) -> RuntimeEventLedger:
        folder = self._folder / str(len(self._handles))
        folder.mkdir()
        handle = reach(self.backend, folder)
        assert handle is not None
        self._handles.append(handle)
        return RuntimeEventLedger(handle.database(), LedgerSettings().with_limits_off())


class _LedgerApplicationRecorderCase(ApplicationRecorderTestCase[RuntimeEventLedger]):
    """The ledger's streams are strings, and it supports subscriptions (optional in the suite)."""

    def new_originator_id(self) -> str:
        return f"session:{uuid.uuid4()}"

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


_SUITES = (
    ("ApplicationRecorder", _LedgerApplicationRecorderCase),
    ("TrackingRecorder", TrackingRecorderTestCase),
)

for _backend in BACKENDS:
    for _role, _suite in _SUITES:
        _name = f"Test{_backend.name.capitalize()}LedgerAs{_role}"
        _case: type = type(_name, (_Ledgers, _suite), {"backend": _backend, "__module__": __name__})
        for _mark in _backend.marks:
            _case = _mark(_case)
        globals()[_name] = _case
