"""Trace records become RuntimeEvents: ids from positions, the documented mapping, redaction."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.domain.records import TraceRecord, decode_line
from pentrace.domain.redaction import is_redacted
from pentrace.domain.runtime import (
    CATEGORIES,
    SCHEMA_VERSION,
    RuntimeEvent,
    build_event,
    event_category,
    normalize_directory,
    opencode_payload,
    runtime_event_from_record,
    time_ms_of,
)

SESSION = "session-2026-07-18-03-10-22-0a1b2c3d"
STAMP = "2026-07-18T03:10:22.531Z"
STAMP_MS = 1784344222531
DOC = Path(__file__).parent.parent.parent / "docs" / "runtime-events.md"


def _record(kind: Any, payload: Any = None, **extra: Any) -> TraceRecord:
    envelope: dict[str, Any] = {"timestamp": STAMP, "type": kind, **extra}
    if payload is not None:
        envelope["payload"] = payload
    return TraceRecord.from_value(envelope)


def _event(record: TraceRecord, position: int = 3, **options: Any) -> RuntimeEvent:
    options.setdefault("directory", "/srv/app")
    return runtime_event_from_record(
        record, session_id=SESSION, position=position, project="acme", agent="coder", **options
    )


def _documented_rows() -> list[tuple[str, str, str, str]]:
    rows = []
    in_table = False
    for line in DOC.read_text("utf-8").splitlines():
        if line.startswith("| trace record |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if in_table and not line.startswith("| ---"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows.append((cells[0], cells[1], cells[2].strip("`"), cells[3].strip("`")))
    return rows


def _record_for_row(record: str, condition: str) -> tuple[TraceRecord, int]:
    names = re.findall(r"`([^`]+)`", record)
    status = re.search(r"status `(\w+)`", condition)
    position = 1 if "first record" in condition else 5
    if record == "anything else":
        return _record("surprise", {"type": "x"}), position
    kind = names[0]
    if kind == "session_meta":
        return _record(kind, {"session_id": SESSION, "provider": "p", "model_id": "m"}), position
    ptype = names[1] if len(names) > 1 else "brand_new_type"
    payload: dict[str, Any] = {"type": ptype}
    if status is not None:
        payload["status"] = status.group(1)
    elif "any other status" in condition:
        payload["status"] = "failed"
    return _record(kind, payload), position


ROWS = _documented_rows()


def test_the_documented_mapping_table_has_a_row_per_record_type() -> None:
    assert len(ROWS) >= 30
    assert {row[3] for row in ROWS} <= set(CATEGORIES)


@pytest.mark.parametrize(("record", "condition", "event_type", "category"), ROWS)
def test_every_record_type_maps_as_documented(
    record: str, condition: str, event_type: str, category: str
) -> None:
    trace_record, position = _record_for_row(record, condition)
    event = _event(trace_record, position)
    assert (event.type, event.category) == (event_type, category)


def test_the_id_and_sequence_come_from_the_records_position() -> None:
    event = _event(_record("event_msg", {"type": "request_begin"}), position=42)
    # The id names the session's owner (ADR 0023): the same id may exist under another agent.
    assert event.id == f"evt:session:acme/coder/{SESSION}:00000042"
    assert (event.sequence, event.stream_id) == (42, f"session:acme/coder/{SESSION}")
    assert event.subject == f"session_id:{SESSION}"
    assert event.schema_version == SCHEMA_VERSION


def test_scope_names_session_conversation_agent_project_and_normalised_directory() -> None:
    event = _event(_record("event_msg", {"type": "request_begin"}), directory="/srv/app/./x/../")
    assert event.scope == {
        "session_id": SESSION,
        "conversation_id": SESSION,
        "agent_id": "coder",
        "project_id": "acme",
        "directory": "/srv/app",
        "workspace": "/srv/app",
    }


def test_a_session_without_a_directory_has_no_directory_scope() -> None:
    event = _event(_record("event_msg", {"type": "abort"}), directory=None)
    assert "directory" not in event.scope
    assert "workspace" not in event.scope


def test_session_meta_adds_provider_and_model_to_scope() -> None:
    record = _record(
        "session_meta", {"session_id": SESSION, "provider": "openai", "model_id": "gpt-x"}
    )
    event = _event(record, position=1)
    assert (event.scope["provider_id"], event.scope["model_id"]) == ("openai", "gpt-x")


def test_a_tool_call_is_correlated_by_its_id_and_its_arguments_are_redacted() -> None:
    record = _record(
        "model_msg",
        {
            "type": "tool_call",
            "role": "assistant",
            "name": "http",
            "arguments": '{"url": "https://x", "api_key": "plain-key-123"}',
            "tool_call_id": "call_9",
        },
    )
    event = _event(record)
    assert event.correlation == {"tool_call_id": "call_9"}
    assert event.actor == {"type": "assistant", "id": "coder"}
    assert "plain-key-123" not in msgspec.json.encode(event).decode()
    assert event.privacy.redacted_fields == ["arguments"]
    assert event.privacy.classification == "sensitive"
    assert event.projections == {
        "opencode": {"id": f"tool.called:{SESSION}:call_9", "type": "tool.called"}
    }


def test_a_user_message_names_its_sender_as_actor() -> None:
    record = _record(
        "model_msg", {"type": "text", "role": "user", "text": "hi", "sender": "harness"}
    )
    assert _event(record).actor == {"type": "user", "id": "harness"}
    plain = _record("model_msg", {"type": "text", "role": "user", "text": "hi"})
    assert _event(plain).actor == {"type": "user", "id": "user"}


def test_a_subagent_record_correlates_the_child_but_keeps_the_parent_in_scope() -> None:
    event = _event(_record("event_msg", {"type": "subagent", "session_id": "child-1"}))
    assert event.correlation == {"child_session_id": "child-1"}
    assert event.scope["session_id"] == SESSION
    assert event.scope["conversation_id"] == SESSION


def test_a_forwarded_record_carries_its_origin_chain() -> None:
    record = _record(
        "model_msg", {"type": "text", "role": "assistant", "text": "x"}, origin=["c1", "c2"]
    )
    assert _event(record).correlation == {"origin": ["c1", "c2"]}


def test_a_line_that_is_not_an_envelope_still_becomes_an_event() -> None:
    record = decode_line(b"42")
    assert record is not None
    event = _event(record)
    assert (event.type, event.payload, event.time) == ("trace.record", {"record": 42}, 0)


def test_time_comes_from_the_envelope_timestamp_in_milliseconds() -> None:
    assert _event(_record("event_msg", {"type": "abort"})).time == STAMP_MS
    naive = TraceRecord.from_value({"timestamp": "2026-07-18T03:10:22.531", "type": "event_msg"})
    assert time_ms_of(naive) == STAMP_MS
    broken = TraceRecord.from_value({"timestamp": "yesterday", "type": "event_msg"})
    assert time_ms_of(broken, fallback_ms=77) == 77


def test_the_same_record_at_the_same_position_always_gives_the_same_bytes() -> None:
    record = _record(
        "event_msg", {"type": "token_usage", "session": {"total": 5}, "request": {"total": 5}}
    )
    first = msgspec.json.encode(_event(record, 9))
    again = msgspec.json.encode(_event(TraceRecord(record.raw), 9))
    assert first == again


def test_token_usage_telemetry_survives_into_the_event() -> None:
    usage = {"cache_read": 1, "cache_write": 2, "output": 3, "total": 6}
    event = _event(
        _record("event_msg", {"type": "token_usage", "session": usage, "request": usage})
    )
    assert event.payload["session"] == usage
    assert event.privacy.classification == "public"


def test_the_encoded_envelope_keeps_penguins_key_order_and_is_fully_redacted() -> None:
    event = _event(
        _record("model_msg", {"type": "text", "role": "assistant", "text": "ghp_" + "a1" * 20})
    )
    decoded = msgspec.json.decode(msgspec.json.encode(event))
    assert list(decoded) == list(RuntimeEvent.__struct_fields__)
    assert list(decoded["privacy"]) == ["classification", "redacted", "redacted_fields"]
    assert is_redacted(decoded)
    assert decoded["payload"]["text"] == "[redacted:github_token]"


def test_the_opencode_view_backfills_session_agent_and_directory() -> None:
    event = _event(_record("event_msg", {"type": "abort", "reason": "user"}), position=4)
    assert opencode_payload(event) == {
        "id": f"evt:session:acme/coder/{SESSION}:00000004",
        "order": 4,
        "time": STAMP_MS,
        "type": "session.aborted",
        "properties": {
            "type": "abort",
            "reason": "user",
            "sessionID": SESSION,
            "agentID": "coder",
            "directory": "/srv/app",
        },
    }


def test_build_event_takes_a_sequence_function_of_the_stream() -> None:
    seen: list[str] = []

    def number(stream: str) -> int:
        seen.append(stream)
        return 5

    event = build_event(
        event_type="todo.updated", payload={"runID": "r1"}, time_ms=1, sequence=number
    )
    assert (seen, event.id, event.category) == (
        ["run:r1"],
        "evt:run:r1:00000005",
        "tool_action_lifecycle",
    )
    assert event_category("todo.updated", {}) == event.category


@pytest.mark.parametrize(
    ("raw", "home", "cwd", "expected"),
    [
        ("/srv/a/", None, None, "/srv/a"),
        ("  /srv/a/b/../c  ", None, None, "/srv/a/c"),
        ("~/proj", "/home/ada", None, "/home/ada/proj"),
        ("~/proj", None, None, "~/proj"),
        ("~", "/home/ada", None, "/home/ada"),
        ("rel/dir", None, "/work", "/work/rel/dir"),
        ("rel/dir/", None, None, "rel/dir"),
        ("   ", None, None, None),
        (5, None, None, None),
    ],
)
def test_directory_normalisation_is_pure_and_explicit_about_home_and_cwd(
    raw: object, home: str | None, cwd: str | None, expected: str | None
) -> None:
    assert normalize_directory(raw, home=home, cwd=cwd) == expected


DOC_BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), re.DOTALL)


def test_the_runtime_events_page_has_examples() -> None:
    assert len(DOC_BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(DOC_BLOCKS)))
def test_each_example_on_the_runtime_events_page_runs(index: int) -> None:
    code = compile(DOC_BLOCKS[index], f"{DOC}:block{index}", "exec")
    exec(code, {"__name__": "docs"})  # noqa: S102  # running our own docs is the test
