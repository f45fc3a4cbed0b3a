"""The session summary fold: counts, tokens, tools, compactions and errors from trace records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings

from pentrace import testing as pt
from pentrace.domain.records import TraceRecord, decode_line
from pentrace.projections.resume import resume_trace
from pentrace.projections.session_summary import SessionSummary, SummaryFold, summarize_session
from tests.support import tool_turn


def _records(commands: Sequence[pt.Command]) -> list[TraceRecord]:
    lines = [line for shard in pt.render_shards(commands) for line in shard]
    records = [decode_line(line) for line in lines]
    return [r for r in records if r is not None]


def _event(payload: dict[str, Any], timestamp: str = "2026-07-18T03:10:30.000Z") -> TraceRecord:
    return TraceRecord.from_value({"timestamp": timestamp, "type": "event_msg", "payload": payload})


def _model(payload: dict[str, Any]) -> TraceRecord:
    return TraceRecord.from_value({"type": "model_msg", "payload": payload})


SESSION: list[pt.Command] = [
    pt.StartSession(),
    *tool_turn(
        "list the files",
        pt.ToolCall("call_1", "exec_command", '{"cmd":"ls"}'),
        "a.txt",
        approval="allow",
        status="failed",
    ),
    pt.BeginRequest(),
    pt.ToolCall("call_2", "exec_command", '{"cmd":"ls"}'),
    pt.Approval("call_2", "allow"),
    pt.ToolOutput("call_2", "a.txt"),
    pt.ToolCall("call_3", "read_file", '{"path":"a.txt"}'),
    pt.Approval("call_3", "deny"),
    pt.AssistantText("done"),
    pt.EndRequest("completed"),
    pt.TokenUsage(pt.TokenCounts(output=10, total=100), pt.TokenCounts(output=10, total=100)),
    pt.CompactionBegin(mode="summarize"),
    pt.BeginRequest(),
    pt.AssistantText("[summary]files listed[/summary]"),
    pt.EndRequest("completed"),
    pt.CompactionEnd(mode="summarize", status="completed"),
    pt.UserInput("again"),
    pt.BeginRequest(),
    pt.SubagentPointer("session-2026-07-18-11-10-30-0000beef"),
    pt.Abort(),
    pt.EndRequest("aborted"),
    pt.TokenUsage(pt.TokenCounts(output=15, total=180), pt.TokenCounts(output=5, total=80)),
]


def test_a_realistic_session_is_summarised_across_its_shards() -> None:
    summary = summarize_session(_records(SESSION))

    assert summary.session_id == "session-2026-07-18-11-10-22-3f8a1c2d"
    assert (summary.provider, summary.model_id) == ("deepseek", "deepseek-v4-pro")
    assert summary.workspace == "/home/user/work"
    assert summary.source is None
    assert summary.first_timestamp == "2026-07-18T03:10:22.531Z"
    assert summary.last_timestamp == "2026-07-18T03:10:22.557Z"
    assert summary.records == len(_records(SESSION))
    assert summary.requests["completed"] == 2
    assert summary.requests["failed"] == 1
    assert summary.requests["aborted"] == 1
    assert summary.requests["open"] == 0
    # The compaction's own request is committed but is not a turn.
    assert summary.turns == 1
    assert summary.tokens == {"cache_read": 0, "cache_write": 0, "output": 15, "total": 180}
    assert summary.total_tokens == 180
    assert summary.last_request_status == "aborted"
    assert summary.tool_calls["exec_command"].calls == 2
    assert summary.tool_calls["read_file"].unanswered == 1
    assert summary.approvals == {"allow": 2, "deny": 1}
    assert [(c.mode, c.status, c.count) for c in summary.compactions] == [
        ("summarize", "completed", 1)
    ]
    assert summary.dangling_compactions == 0
    assert summary.aborts == 1
    assert summary.subagents == ["session-2026-07-18-11-10-30-0000beef"]
    # A failed request is an error; an abort is not.
    assert summary.has_errors is True


def test_a_tool_output_that_states_a_failure_counts_against_its_tool() -> None:
    records = [
        _event({"type": "request_begin"}),
        _model({"type": "tool_call", "name": "exec", "tool_call_id": "c1"}),
        _model({"type": "tool_call_output", "tool_call_id": "c1", "stop_reason": "failed"}),
        _model({"type": "tool_call", "name": "exec", "tool_call_id": "c2"}),
        _model({"type": "tool_call_output", "tool_call_id": "c2"}),
        _event({"type": "request_end", "status": "completed"}),
    ]
    summary = summarize_session(records)

    assert summary.tool_calls["exec"].calls == 2
    assert summary.tool_calls["exec"].failures == 1
    assert summary.tool_calls["exec"].unanswered == 0
    assert summary.tool_failures == 1
    assert summary.has_errors is True


def test_a_clean_session_has_no_errors() -> None:
    commands: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput("hi"),
        pt.BeginRequest(),
        pt.AssistantText("hello"),
    ]
    summary = summarize_session(_records([*commands, pt.EndRequest("completed")]))

    assert summary.has_errors is False
    assert summary.turns == 1
    assert summary.last_request_status == "completed"


def test_a_request_without_an_end_is_open_and_a_begin_without_end_dangles() -> None:
    records = [
        _event({"type": "request_begin"}),
        _event({"type": "request_begin"}),
        _event({"type": "compaction_begin", "reason": "context", "mode": "discard"}),
    ]
    summary = summarize_session(records)

    assert summary.requests["open"] == 2
    assert summary.last_request_status == "open"
    assert summary.dangling_compactions == 1
    assert [(c.mode, c.status) for c in summary.compactions] == [("discard", "open")]
    assert summary.has_errors is True


def test_unknown_statuses_and_goals_are_counted_without_crashing() -> None:
    records = [
        TraceRecord.from_value(42),
        _event({"type": "request_begin"}),
        _event({"type": "request_end", "status": "COMPLETED"}),
        _event({"type": "goal_finished", "outcome": "complete", "rounds": 1, "tokens_used": 3}),
        _event({"type": "token_usage", "session": {}, "request": {}}),
    ]
    summary = summarize_session(records)

    assert summary.requests["other"] == 1
    assert summary.turns == 0
    assert summary.goals == {"complete": 1}
    assert summary.session_id is None
    assert summary.first_timestamp is None
    # An empty session object is truthy in JavaScript, so it counts, with zeros for its keys.
    assert summary.tokens == {"cache_read": 0, "cache_write": 0, "output": 0, "total": 0}


def test_a_fork_origin_in_session_meta_is_reported() -> None:
    meta = {"session_id": "s-2", "forked_from": {"session_id": "s-1", "position": 7}}
    summary = summarize_session([TraceRecord.from_value({"type": "session_meta", "payload": meta})])

    assert summary.forked_from == {"session_id": "s-1", "position": 7}


def _in_batches(records: list[TraceRecord], cut: int) -> SessionSummary:
    fold = SummaryFold()
    fold.feed(records[:cut])
    fold.finish()
    fold.feed(records[cut:])
    return fold.finish()


@settings(max_examples=60, deadline=None)
@given(pt.session_commands())
def test_folding_in_batches_equals_folding_at_once(commands: list[pt.Command]) -> None:
    records = _records(commands)
    whole = summarize_session(records)
    for cut in (0, len(records) // 2, len(records)):
        assert _in_batches(records, cut) == whole


@settings(max_examples=60, deadline=None)
@given(pt.session_commands())
def test_turns_agree_with_resume_on_each_shard_that_is_not_closed(
    commands: list[pt.Command],
) -> None:
    shards = pt.render_shards(commands)
    total = 0
    for lines in shards:
        records = [r for r in (decode_line(line) for line in lines) if r is not None]
        result = resume_trace(records)
        if not result.context_closed:
            assert summarize_session(records).turns == result.session_turns
        total += summarize_session(records).turns
    assert summarize_session(_records(commands)).turns == total
