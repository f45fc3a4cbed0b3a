"""Records of unexpected shapes never crash a command: huge numbers, odd types, deep nesting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pentrace.domain import omnimessage as om
from pentrace.domain.records import TraceRecord
from pentrace.errors import EnvelopeFormatError
from pentrace.projections.session_summary import summarize_session, token_count
from tests.integration.cli_sessions_corpus import SID_A, SID_B, build_corpus
from tests.support import cli_ok

pytestmark = pytest.mark.usefixtures("own_stores")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Session A's last running token total is ``1e400``; session B's failed status an object."""
    data = tmp_path / "data"
    shards = build_corpus(data)
    a = shards[SID_A][0]
    lines = a.read_bytes().splitlines()
    assert b'"session":{"cache_read":0,"cache_write":0,"output":50,"total":500}' in lines[-1]
    lines[-1] = lines[-1].replace(b'"output":50,"total":500}', b'"output":2e400,"total":1e400}', 1)
    a.write_bytes(b"\n".join(lines) + b"\n")
    b = shards[SID_B][0]
    text = b.read_bytes()
    assert b'"status":"failed"' in text
    b.write_bytes(text.replace(b'"status":"failed"', b'"status":{"nested":["failed"]}'))
    return data


def ok(root: Path, *args: str) -> str:
    return cli_ok(root, *args).output


def test_sessions_list_counts_an_infinite_token_total_as_nothing(root: Path) -> None:
    listed = json.loads(ok(root, "sessions", "list", "--json"))
    by_id = {row["session_id"]: row for row in listed["sessions"]}
    # The list's tokens sum every request's counts (300 + 500, session_numbers, #13); the
    # infinite running total is resume's carry-over, and it reads as nothing.
    assert by_id[SID_A]["tokens"] == 800
    ok(root, "sessions", "list")
    shown = json.loads(ok(root, "show", SID_A, "--json"))
    assert shown["summary"]["tokens"]["total"] == 0


def test_show_and_list_read_an_object_status_as_another_status(root: Path) -> None:
    shown = json.loads(ok(root, "show", SID_B, "--json"))
    assert shown["summary"]["requests"]["other"] == 1
    ok(root, "show", SID_B)
    ok(root, "sessions", "list")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(12, 12), (2.5, 2.5), (float("inf"), 0), (float("nan"), 0), (-5, 0), (True, 0), ("9", 0)],
)
def test_a_token_count_is_a_finite_number_at_least_zero(value: object, expected: object) -> None:
    assert token_count(value) == expected


def test_the_summary_survives_odd_values_in_every_field_it_reads() -> None:
    odd: list[object] = [{"a": 1}, [1], 1e400, 2**70, None, True, -1]
    records = [TraceRecord.from_value({"type": "session_meta", "payload": {"session_id": 5}})]
    for value in odd:
        for ptype in ("request_end", "approval_decision", "goal_finished", "compaction_end"):
            payload = {"type": ptype, "status": value, "decision": value, "outcome": value}
            records.append(TraceRecord.from_value({"type": "event_msg", "payload": payload}))
        call = {"type": "tool_call", "name": value, "tool_call_id": value}
        records.append(TraceRecord.from_value({"type": "model_msg", "payload": call}))
        tokens = {"type": "token_usage", "session": {"total": value, "output": value}}
        records.append(TraceRecord.from_value({"type": "event_msg", "payload": tokens}))
    summary = summarize_session(records)
    assert summary.total_tokens == 0
    assert summary.requests["other"] == len(odd)


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 5000,
        b'{"timestamp":"t","type":"model_msg","payload":' + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"timestamp":"t","type":"event_msg","payload":{"type":"request_end","status":'
        + b"[" * 3000
        + b"]" * 3000
        + b"}}",
        b'{"timestamp":"t","type":"other","payload":{"type":' + b"[" * 3000 + b"]" * 3000 + b"}}",
    ],
)
def test_decode_envelope_reports_deep_nesting_as_an_envelope_format_error(line: bytes) -> None:
    with pytest.raises(EnvelopeFormatError, match="invalid OmniMessage envelope"):
        om.decode_envelope(line)
