"""A stateful check of the SQLite ledger against a plain in-memory model."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pentrace.errors import LedgerConflictError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from tests.integration.test_ledger_contract import make_event

SESSIONS = ("s1", "s2", "s3")


class LedgerAgainstModel(RuleBasedStateMachine):
    """Appends, repeats, conflicting repeats, count retention and replay, checked against lists."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="pentrace-ledger-model-"))
        self.ledger = RuntimeEventLedger(
            LedgerDatabase.for_path(self.folder / "events.db"), LedgerSettings().with_limits_off()
        )
        self.next_position = dict.fromkeys(SESSIONS, 1)
        self.retained: list[str] = []  # event ids in global order
        self.evicted: set[str] = set()
        self.content: dict[str, dict[str, Any]] = {}

    @rule(session=st.sampled_from(SESSIONS), count=st.integers(1, 4))
    def extend_new_records(self, session: str, count: int) -> None:
        first = self.next_position[session]
        events = [make_event(session, n) for n in range(first, first + count)]
        assert self.ledger.extend(events) == count
        self.next_position[session] = first + count
        for event in events:
            self.retained.append(event["id"])
            self.content[event["id"]] = event

    @precondition(lambda self: bool(self.content))
    @rule(data=st.data())
    def repeat_a_known_event(self, data: st.DataObject) -> None:
        event_id = data.draw(st.sampled_from(sorted(self.content)))
        if event_id in self.evicted:
            return  # a repeat of an evicted event would store it again; sync never sends one
        assert self.ledger.append(self.content[event_id]) is False

    @precondition(lambda self: bool(self.retained))
    @rule(data=st.data())
    def conflicting_repeat_is_refused(self, data: st.DataObject) -> None:
        event_id = data.draw(st.sampled_from(self.retained))
        changed = dict(self.content[event_id], payload={"text": "rewritten"})
        try:
            self.ledger.append(changed)
        except LedgerConflictError:
            return
        raise AssertionError(f"{event_id} accepted different content")

    @rule(keep=st.integers(1, 6))
    def prune_by_count(self, keep: int) -> None:
        self.ledger.policy = type(self.ledger.policy)(keep, None, None)
        self.ledger.cleanup()
        dropped = self.retained[:-keep]
        self.evicted.update(dropped)
        self.retained = self.retained[-keep:]

    @invariant()
    def replay_matches_the_model(self) -> None:
        assert [e.event_id for e in self.ledger.replay_after(None, limit=0).events] == self.retained

    @precondition(lambda self: bool(self.evicted))
    @invariant()
    def an_evicted_cursor_is_reported_as_evicted(self) -> None:
        cursor = max(self.evicted)
        result = self.ledger.replay_after(cursor, limit=0)
        assert result.gap is not None
        assert result.gap.reason == "evicted"
        assert [e.event_id for e in result.events] == self.retained

    def teardown(self) -> None:
        self.ledger.close()
        shutil.rmtree(self.folder, ignore_errors=True)


LedgerAgainstModel.TestCase.settings = settings(
    max_examples=15, stateful_step_count=15, deadline=None
)
TestLedgerAgainstModel = LedgerAgainstModel.TestCase
