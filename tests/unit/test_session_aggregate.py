"""The Session aggregate writes exactly the seed's trace lines and refuses illegal writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from pentrace.domain import omnimessage as om
from pentrace.domain.records import TraceRecord
from pentrace.domain.session import events as ev
from pentrace.domain.session.aggregate import Session, project_session
from pentrace.errors import (
    CompactionStateError,
    DuplicateToolOutputError,
    PartialMessageError,
    RequestAlreadyOpenError,
    RequestNotOpenError,
    SessionDeletedError,
    SessionNotStartedError,
    TraceError,
    UnknownStatusError,
    UnknownToolCallError,
    UsageError,
)
from pentrace.infrastructure.eventstore.recorder import TraceMapper

NOW = datetime(2026, 7, 18, 3, 10, 22, 531_789, tzinfo=UTC)
TS = "2026-07-18T03:10:22.531Z"
SID = "session-2026-07-18-11-10-22-3f8a1c2d"


def new_session(**overrides: Any) -> Session:
    """A fresh session whose start records are still pending."""
    arguments: dict[str, Any] = {
        "now": NOW,
        "provider": "deepseek",
        "model_id": "deepseek-v4-pro",
        "model_context_window": 1_000_000,
        "system_prompt": "be careful",
        "agent_state": "/home/u/.penguin/data/p/agents/a/agent_state",
        "workspace": "/home/u/work",
        "tools": [{"name": "exec_command", "description": "run a command"}],
    }
    arguments.update(overrides)
    return Session.start(SID, **arguments)


def started(**overrides: Any) -> Session:
    """A started session whose start records were already saved."""
    session = new_session(**overrides)
    session.collect_events()
    return session


def with_open_call() -> Session:
    """A started session with a request open and call c1 (exec) in it, not yet answered."""
    session = started()
    session.begin_request(now=NOW)
    session.record_tool_call("exec", "{}", "c1", now=NOW)
    return session


def lines(session: Session) -> list[str]:
    return [e.line.decode() for e in session.collect_events()]


def line(kind: str, payload: str, ts: str = TS) -> str:
    return f'{{"timestamp":"{ts}","type":"{kind}","payload":{payload}}}'


def model(payload: str, ts: str = TS) -> str:
    return line("model_msg", payload, ts)


def event(payload: str, ts: str = TS) -> str:
    return line("event_msg", payload, ts)


def test_start_writes_session_meta_then_tool_list_ready() -> None:
    session = Session.start(
        SID,
        now=NOW,
        provider="deepseek",
        model_id="deepseek-v4-pro",
        model_context_window=1_000_000,
        system_prompt="…",
        agent_state="/a",
        workspace="/home/u/work",
        tools=[{"name": "exec_command", "description": "run", "parameters": {"type": "object"}}],
    )
    assert lines(session) == [
        line(
            "session_meta",
            f'{{"session_id":"{SID}","provider":"deepseek","model_id":"deepseek-v4-pro",'
            '"model_context_window":1000000,"system_prompt":"…","agent_state":"/a",'
            '"workspace":"/home/u/work"}',
        ),
        event(
            '{"type":"tool_list_ready","tools":[{"name":"exec_command","description":"run",'
            '"parameters":{"type":"object"}}]}',
        ),
    ]
    assert (session.id, session.version, session.started, session.shard_index) == (SID, 2, True, 1)


def test_a_subagent_session_says_so_in_its_meta() -> None:
    session = new_session(model_context_window="128k", source="subagent")
    meta = json.loads(lines(session)[0])["payload"]
    assert (meta["source"], meta["model_context_window"]) == ("subagent", "128k")


def test_the_seed_example_request_is_written_byte_for_byte() -> None:
    session = started()
    session.record_user_input("Create hello.txt", now=NOW)
    session.begin_request(now=NOW)
    args = '{"cmd":"printf hi > hello.txt"}'
    session.record_tool_call("exec_command", args, "call_0", now=NOW, stop_reason=None)
    session.decide_approval("call_0", "allow", now=NOW)
    session.record_tool_output("call_0", "[no output]", now=NOW)
    session.end_request("completed", now=NOW)
    session.record_token_usage({"total": 10, "output": 2}, {"total": 4}, now=NOW)
    counts = '"cache_read":0,"cache_write":0,"output":{},"total":{}'
    assert lines(session) == [
        model('{"type":"text","role":"user","text":"Create hello.txt"}'),
        event('{"type":"request_begin"}'),
        model(
            '{"type":"tool_call","role":"assistant","name":"exec_command","arguments":'
            + json.dumps(args, separators=(",", ":"))
            + ',"tool_call_id":"call_0"}',
        ),
        line(
            "event_msg", '{"type":"approval_decision","decision":"allow","tool_call_id":"call_0"}'
        ),
        model(
            '{"type":"tool_call_output","role":"user","output":"[no output]",'
            '"tool_call_id":"call_0"}',
        ),
        event('{"type":"request_end","status":"completed"}'),
        event(
            '{"type":"token_usage","session":{'
            + counts.format(2, 10)
            + '},"request":{'
            + counts.format(0, 4)
            + "}}",
        ),
    ]
    assert (session.requests, session.turns, session.awaiting_output()) == (1, 1, [])


def test_user_input_with_images_writes_text_then_image_urls() -> None:
    session = started()
    session.record_user_input("look", now=NOW, images=["data:image/png;base64,AA=="])
    assert lines(session) == [
        model('{"type":"text","role":"user","text":"look"}'),
        model(
            '{"type":"image_url","role":"user","image_url":"data:image/png;base64,AA=="}',
        ),
    ]


def test_model_messages_keep_fidelity_byte_for_byte() -> None:
    session = started()
    session.begin_request(now=NOW)
    session.collect_events()
    fidelity = b'{"signature":  "abc", "n":[1 ,2]}'
    session.record_thinking("hmm", now=NOW, fidelity=fidelity)
    session.record_text("done", now=NOW, fidelity=msgspec.Raw(b'{"phase":"final"}'))
    session.record_inline_thinking("QUJD", "application/octet-stream", now=NOW)
    session.record_inline_data("AAAA", "image/png", now=NOW, role="assistant")
    session.end_request("failed", now=NOW, error_message="rate limited", attempt=2, retry_in_ms=500)
    assert lines(session) == [
        model(
            '{"type":"thinking","role":"assistant","thinking":"hmm","stop_reason":"completed",'
            '"fidelity":{"signature":  "abc", "n":[1 ,2]}}',
        ),
        model(
            '{"type":"text","role":"assistant","text":"done","stop_reason":"completed",'
            '"fidelity":{"phase":"final"}}',
        ),
        model(
            '{"type":"inline_thinking","role":"assistant","data":"QUJD",'
            '"mime_type":"application/octet-stream","stop_reason":"completed"}',
        ),
        model(
            '{"type":"inline_data","role":"assistant","data":"AAAA","mime_type":"image/png"}',
        ),
        event(
            '{"type":"request_end","status":"failed","error_message":"rate limited",'
            '"attempt":2,"retry_in_ms":500}',
        ),
    ]
    assert (session.requests, session.turns) == (1, 0)


def test_events_abort_goal_subagent_and_mcp_records() -> None:
    session = started()
    session.begin_mcp_connect(["github"], now=NOW)
    result = om.McpServerResult(server="github", transport="stdio", status="ok", duration_ms=12)
    session.end_mcp_connect("completed", [result], now=NOW)
    session.abort(now=NOW)
    session.abort(now=NOW, reason="user_interrupt")
    session.record_subagent("session-child", now=NOW)
    session.finish_goal("complete", now=NOW, rounds=3, tokens_used=900)
    assert lines(session) == [
        event('{"type":"mcp_connect_begin","servers":["github"]}'),
        event(
            '{"type":"mcp_connect_end","status":"completed","results":[{"server":"github",'
            '"transport":"stdio","status":"ok","duration_ms":12}]}',
        ),
        event('{"type":"abort","reason":null}'),
        event('{"type":"abort","reason":"user_interrupt"}'),
        event('{"type":"subagent","session_id":"session-child"}'),
        event(
            '{"type":"goal_finished","outcome":"complete","rounds":3,"tokens_used":900}',
        ),
    ]


def test_after_a_completed_compaction_the_next_write_opens_a_new_shard_with_header_copies() -> None:
    session = started()
    meta_before = session.meta_payload
    session.begin_compaction("context", "summarize", now=NOW, context=900, turns=4)
    session.begin_request(now=NOW)
    session.record_text("[summary]short[/summary]", now=NOW)
    session.end_request("completed", now=NOW)
    session.end_compaction("completed", now=NOW)
    assert (session.rotation_pending, session.turns) == (True, 0)
    session.collect_events()
    later = NOW + timedelta(seconds=5)
    session.record_user_input("next", now=later)
    written = lines(session)
    ts = "2026-07-18T03:10:27.531Z"
    assert written[0] == line("session_meta", meta_before.decode(), ts)
    assert written[1] == event(
        '{"type":"tool_list_ready","tools":[{"name":"exec_command",'
        '"description":"run a command"}]}',
        ts,
    )
    assert written[2] == model('{"type":"text","role":"user","text":"next"}', ts)
    assert (session.shard_index, session.rotation_pending, session.version) == (2, False, 10)


def test_a_failed_compaction_does_not_rotate() -> None:
    session = started()
    session.begin_compaction("manual", "discard", now=NOW)
    session.end_compaction("failed", now=NOW, error_message="model refused", attempt=1)
    session.record_user_input("again", now=NOW)
    written = lines(session)
    assert json.loads(written[1])["payload"] == {
        "type": "compaction_end",
        "reason": "manual",
        "mode": "discard",
        "status": "failed",
        "attempt": 1,
        "error_message": "model refused",
    }
    assert len(written) == 3
    assert session.shard_index == 1


def test_end_request_without_an_open_request_is_refused() -> None:
    session = started()
    with pytest.raises(RequestNotOpenError, match=rf"session {SID}: request_end at sequence 3"):
        session.end_request("completed", now=NOW)
    assert session.version == 2
    assert session.pending_events == []


@pytest.mark.parametrize("status", ["complete", "Completed", "", "cancelled"])
def test_end_request_with_a_status_outside_stop_reason_is_refused(status: str) -> None:
    session = started()
    session.begin_request(now=NOW)
    session.collect_events()
    with pytest.raises(
        UnknownStatusError,
        match=r"request_end at sequence 4: expected a status in completed\|failed\|",
    ):
        session.end_request(status, now=NOW)
    assert (session.version, session.open_request) == (3, True)
    assert session.pending_events == []
    session.end_request("timeout", now=NOW)
    assert not session.open_request


def test_begin_request_while_one_is_open_is_refused() -> None:
    session = started()
    session.begin_request(now=NOW)
    with pytest.raises(RequestAlreadyOpenError, match="sequence 4: expected no open request"):
        session.begin_request(now=NOW)


def test_a_tool_call_outside_a_request_is_refused() -> None:
    session = started()
    with pytest.raises(RequestNotOpenError, match="tool_call at sequence 3"):
        session.record_tool_call("exec", "{}", "c1", now=NOW)


def test_output_for_an_unknown_call_id_is_refused() -> None:
    session = started()
    session.begin_request(now=NOW)
    with pytest.raises(UnknownToolCallError, match="found 'nope'"):
        session.record_tool_output("nope", "x", now=NOW)


def test_a_second_output_for_the_same_call_is_refused() -> None:
    session = with_open_call()
    session.record_tool_output("c1", "first", now=NOW)
    with pytest.raises(DuplicateToolOutputError, match="call 'c1', found it already answered"):
        session.record_tool_output("c1", "second", now=NOW)


def test_a_committed_unanswered_call_may_be_answered_before_the_next_request() -> None:
    session = with_open_call()
    session.end_request("completed", now=NOW)
    assert session.awaiting_output() == ["c1"]
    session.record_tool_output("c1", "late", now=NOW)
    assert session.awaiting_output() == []


def test_calls_of_a_failed_request_and_aborted_calls_get_no_output() -> None:
    session = started()
    session.begin_request(now=NOW)
    session.record_tool_call("exec", "{}", "dropped", now=NOW)
    session.end_request("failed", now=NOW)
    session.begin_request(now=NOW)
    session.record_tool_call("exec", "{}", "cut", now=NOW, stop_reason="aborted")
    session.end_request("completed", now=NOW)
    for call_id in ("dropped", "cut"):
        with pytest.raises(UnknownToolCallError):
            session.record_tool_output(call_id, "x", now=NOW)


def test_any_write_after_delete_is_refused() -> None:
    session = started()
    session.mark_deleted()
    with pytest.raises(SessionDeletedError, match="found it deleted"):
        session.record_user_input("hello?", now=NOW)
    with pytest.raises(SessionDeletedError):
        session.begin_request(now=NOW)


def test_partial_payloads_are_refused() -> None:
    session = started()
    session.begin_request(now=NOW)
    fragment = om.PartialText(role="assistant", event_type="delta", text="he")
    with pytest.raises(PartialMessageError, match="streaming fragment 'partial_text'"):
        session.record_model_message(fragment, now=NOW)


def test_writes_to_a_trace_without_session_meta_are_refused() -> None:
    foreign = b'{"timestamp":"x","type":"event_msg","payload":{"type":"request_begin"}}'
    session = Session._create(ev.TraceOpened, id="imported", timestamp=NOW, line=foreign)
    assert (session.started, session.open_request, session.requests) == (False, True, 1)
    with pytest.raises(SessionNotStartedError, match="expected a session_meta record first"):
        session.end_request("completed", now=NOW)


def test_compaction_begin_twice_or_end_without_begin_is_refused() -> None:
    session = started()
    with pytest.raises(CompactionStateError, match="expected an open compaction"):
        session.end_compaction("completed", now=NOW)
    session.begin_compaction("turns", "discard", now=NOW)
    with pytest.raises(CompactionStateError, match="expected no open compaction"):
        session.begin_compaction("turns", "discard", now=NOW)


def test_a_naive_time_is_refused() -> None:
    session = started()
    with pytest.raises(UsageError, match="timezone-aware"):
        session.begin_request(now=datetime(2026, 7, 18))  # a naive datetime, on purpose


def test_an_abandoned_open_request_lets_the_next_request_begin() -> None:
    session = with_open_call()
    session.abandon_open_request()
    session.begin_request(now=NOW)
    with pytest.raises(UnknownToolCallError):
        session.record_tool_output("c1", "too late", now=NOW)


def test_events_round_trip_through_the_line_mapper_and_rebuild_the_same_state() -> None:
    session = new_session(tools=())
    session.record_user_input("go", now=NOW)
    session.begin_request(now=NOW)
    session.record_tool_call("exec", "{}", "c1", now=NOW)
    session.record_tool_call("exec", "{}", "c2", now=NOW)
    session.record_tool_output("c1", "ok", now=NOW)
    session.end_request("completed", now=NOW)
    session.begin_compaction("manual", "summarize", now=NOW)
    session.end_compaction("completed", now=NOW)
    session.record_user_input("after", now=NOW)
    events = session.collect_events()
    mapper = TraceMapper()
    stored = [mapper.to_stored_event(e) for e in events]
    assert [s.state for s in stored] == [e.line for e in events]
    loaded = [mapper.to_domain_event(s) for s in stored]
    assert loaded == list(events)
    rebuilt = project_session(None, loaded)
    assert rebuilt == session
    assert (rebuilt.awaiting_output(), rebuilt.shard_index, rebuilt.turns) == (["c2"], 2, 1)


def test_a_completed_compaction_drops_a_request_still_open_in_the_trace() -> None:
    # A process died inside a request; resume forgot it in memory only (nothing written).
    session = new_session()
    session.record_user_input("go", now=NOW)
    session.begin_request(now=NOW)
    session.record_tool_call("exec", "{}", "c1", now=NOW)
    trace = session.collect_events()
    session.abandon_open_request()
    session.begin_compaction("context", "discard", now=NOW)
    session.end_compaction("completed", now=NOW)
    trace += session.collect_events()
    # One fold of the trace agrees with the live session: the context is closed, the
    # request can never commit (its request_end would land in the next shard).
    rebuilt = project_session(None, trace)
    assert isinstance(rebuilt, Session)
    assert (rebuilt.open_request, rebuilt.open_calls, rebuilt.rotation_pending) == (False, {}, True)
    assert (session.open_request, session.open_calls) == (False, {})
    with pytest.raises(RequestNotOpenError):
        rebuilt.end_request("completed", now=NOW)


def test_a_failed_compaction_keeps_a_request_open_until_the_next_begin() -> None:
    session = started()
    session.begin_request(now=NOW)
    session.begin_compaction("manual", "discard", now=NOW)
    session.end_compaction("failed", now=NOW)
    assert session.open_request  # no rotation: request_begin still drops it, as replay does


def test_foreign_and_unknown_records_map_to_record_appended() -> None:
    cases = [
        b'{"type":"event_msg","payload":{"type":"from_the_future"}}',
        b'{"type":"model_msg","payload":{"type":"partial_text","text":"x"}}',
        b'{"type":"model_msg","payload":{"type":"text","role":"assistant"},"origin":["child"]}',
        b'{"type":"model_msg","payload":{"type":["odd"]}}',
        b"42",
        b'{"type":"telemetry"}',
    ]
    for raw in cases:
        assert ev.event_class_for(TraceRecord(raw), 7) is ev.RecordAppended, raw
    meta = TraceRecord(b'{"type":"session_meta","payload":{}}')
    assert ev.event_class_for(meta, 1) is ev.SessionStarted
    assert ev.event_class_for(meta, 9) is ev.ShardOpened
    assert ev.event_class_for(TraceRecord(b"42"), 1) is ev.TraceOpened


def test_a_foreign_meta_without_required_fields_is_reported_by_field() -> None:
    meta = b'{"timestamp":"x","type":"session_meta","payload":{"session_id":"imported"}}'
    session = Session._create(ev.SessionStarted, id="imported", timestamp=NOW, line=meta)
    with pytest.raises(TraceError, match=r"session imported: expected a complete session_meta"):
        session.meta()


def test_headers_built_while_recording_equal_the_headers_read_back_from_the_lines() -> None:
    session = with_open_call()
    session.record_tool_call("exec", "{}", "c2", now=NOW, stop_reason=None)
    session.record_tool_call("exec", "{}", "c3", now=NOW, stop_reason="max_tokens")
    session.record_tool_output("c1", "ok", now=NOW)
    session.record_tool_output("c2", "ok", now=NOW, stop_reason="completed", images=["u"])
    session.end_request("completed", now=NOW)
    session.begin_request(now=NOW)
    session.end_request("failed", now=NOW, error_message="boom", attempt=2, retry_in_ms=5)
    events = session.collect_events()
    carried = [e for e in events if ev.HEADER in e.__dict__]
    with_apply = (ev.ToolCallRecorded, ev.ToolCallOutputRecorded, ev.RequestEnded)
    assert [type(e) for e in carried] == [type(e) for e in events if type(e) in with_apply]
    assert len(carried) == 7
    for event in carried:
        built, read = event.header(), TraceRecord(event.line)
        assert (built.raw, built.line, built.kind, built.head, built.origin) == (
            read.raw,
            read.line,
            read.kind,
            read.head,
            read.origin,
        )
        assert built.value() == read.value()
