"""The Session aggregate holds counters and open state, never the transcript."""

from __future__ import annotations

from typing import Any

from pentrace.domain.session.aggregate import Session
from tests.unit.test_session_aggregate import NOW, started

TRANSCRIPT_WORD = "transcript-marker"


def record_requests(session: Session, count: int) -> None:
    for number in range(count):
        call_id = f"call_{session.requests}"
        session.record_user_input(f"{TRANSCRIPT_WORD} question {number} " * 200, now=NOW)
        session.begin_request(now=NOW)
        session.record_thinking(f"{TRANSCRIPT_WORD} thought " * 200, now=NOW)
        session.record_tool_call("exec_command", '{"cmd":"ls"}', call_id, now=NOW)
        session.record_tool_output(call_id, f"{TRANSCRIPT_WORD} output " * 2_000, now=NOW)
        session.record_text(f"{TRANSCRIPT_WORD} answer " * 200, now=NOW)
        session.end_request("completed", now=NOW)
    session.collect_events()


def state(session: Session) -> dict[str, Any]:
    return {name: value for name, value in vars(session).items() if name != "_pending_events"}


def test_the_state_does_not_grow_with_the_transcript() -> None:
    session = started()
    record_requests(session, 3)
    after_three = len(repr(state(session)))
    record_requests(session, 60)
    assert session.requests == 63
    # Only digits of the counters may grow (63 vs 3, call ids of two digits).
    assert len(repr(state(session))) <= after_three + 8
    assert TRANSCRIPT_WORD not in repr(state(session))


def test_open_calls_leave_the_state_once_answered_and_committed() -> None:
    session = started()
    record_requests(session, 5)
    assert (session.open_calls, session.unanswered) == ({}, {})
    assert not session.open_request
