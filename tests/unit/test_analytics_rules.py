"""The pure analytics rules and the event decoding they read."""

from __future__ import annotations

import msgspec
import pytest

from pentrace.domain.records import decode_line
from pentrace.domain.runtime import runtime_event_from_record
from pentrace.projections.analytics.events import (
    day_of,
    decode_event,
    is_truncated,
    iso_of,
    request_bucket,
    token_delta,
    tool_outcome,
)


def test_fresh_input_is_what_the_total_leaves_over_and_never_negative() -> None:
    request = {"cache_read": 10, "cache_write": 5, "output": 20, "total": 100}
    assert token_delta({"request": request}) == (65, 20, 10, 5, 100)
    assert token_delta({"request": {**request, "total": 1}}) == (0, 20, 10, 5, 1)
    assert token_delta({"session": request}) is None
    assert token_delta({"request": {"total": True, "output": "7"}}) == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("stop_reason", "outcome"),
    [
        (None, None),
        ("completed", None),
        ("failed", "failures"),
        ("aborted", "aborts"),
        ("timeout", "timeouts"),
        ("auth", "failures"),
        (3, "failures"),
    ],
)
def test_a_tool_output_fails_only_when_it_states_a_stop_reason_other_than_completed(
    stop_reason: object, outcome: str | None
) -> None:
    assert tool_outcome(stop_reason) == outcome


def test_request_buckets_use_the_session_summary_statuses() -> None:
    assert request_bucket("timeout") == "timeout"
    assert request_bucket("exploded") == "other"
    assert request_bucket(None) == "other"


def test_truncation_is_the_trace_writer_note() -> None:
    assert is_truncated("head\n[output truncated: exceeded 16000 chars]\n[output archived: /x]")
    assert not is_truncated("output truncated: no")
    assert not is_truncated(None)


def test_an_envelope_decodes_with_scope_correlation_and_day() -> None:
    line = (
        b'{"timestamp":"2026-11-28T23:59:59.999Z","type":"model_msg","payload":{"type":'
        b'"tool_call","role":"assistant","name":"x","arguments":"{}","tool_call_id":"c1"}}'
    )
    record = decode_line(line)
    assert record is not None
    event = runtime_event_from_record(
        record, session_id="s", position=3, project="p", agent="a", directory=None
    )
    decoded = decode_event(msgspec.json.encode(event))
    # A session is keyed by its owner too (ADR 0023); session_id is the bare id.
    assert (decoded.type, decoded.session, decoded.sequence) == ("tool.called", "p/a/s", 3)
    assert decoded.session_id == "s"
    assert (decoded.scope.project_id, decoded.scope.agent_id) == ("p", "a")
    assert decoded.correlation == {"tool_call_id": "c1"}
    assert decoded.day == "2026-11-28"
    assert day_of(decoded.time + 1) == "2026-11-29"
    assert iso_of(decoded.time) == "2026-11-28T23:59:59.999Z"
