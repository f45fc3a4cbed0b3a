"""eventsourcing's ProjectionRunner follows the SQLite ledger through its polling subscription."""

from __future__ import annotations

from collections import Counter
from functools import singledispatchmethod
from pathlib import Path

from eventsourcing.persistence import Tracking
from eventsourcing.popo import POPOTrackingRecorder
from eventsourcing.projection import Projection, ProjectionRunner

from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.opener import LedgerApplication, LedgerEvent
from tests.integration.test_ledger_contract import make_event


class SessionCounts(POPOTrackingRecorder):
    """An in-memory view: events per session stream."""

    def __init__(self) -> None:
        super().__init__()
        self.per_stream: Counter[str] = Counter()
        self.texts: list[str] = []

    def record(self, event: LedgerEvent, tracking: Tracking) -> None:
        with self._database_lock:
            self._assert_tracking_uniqueness(tracking)
            self.per_stream[event.originator_id] += 1
            self.texts.append(event.envelope()["payload"]["text"])
            self._insert_tracking(tracking)


class CountSessions(Projection[SessionCounts]):
    name = "count_sessions"

    @singledispatchmethod
    def process_event(self, domain_event: object, tracking: Tracking) -> None:
        assert isinstance(domain_event, LedgerEvent)
        self.view.record(domain_event, tracking)


def test_a_projection_runner_catches_up_and_then_follows_new_rows(tmp_path: Path) -> None:
    path = tmp_path / "runtime_events.db"
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings().with_limits_off())
    ledger.extend([make_event("s1", 1), make_event("s2", 1), make_event("s1", 2)])
    env = {"PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(path), "PENGUIN_HOME": str(tmp_path)}
    with ProjectionRunner(
        application_class=LedgerApplication,
        projection_class=CountSessions,
        view_class=SessionCounts,
        env=env,
    ) as runner:
        runner.wait(ledger.max_notification_id(), timeout=10)
        assert runner.view.per_stream == {"session:s1": 2, "session:s2": 1}
        ledger.append(make_event("s2", 2, {"text": "after the runner started"}))
        runner.wait(ledger.max_notification_id(), timeout=10)
        assert runner.view.per_stream == {"session:s1": 2, "session:s2": 2}
        assert runner.view.texts[-1] == "after the runner started"
    ledger.close()
