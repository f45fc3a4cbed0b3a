"""The OpenTelemetry mapping: which spans a session's records become, with which fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import SpanKind, StatusCode

from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.mapping import SessionFold, span_id, trace_id
from pentrace.infrastructure.otel.spans import ParentLink, Span, TaskRef
from pentrace.infrastructure.trace.reader import read_shard
from tests.otel_support import fold_all, memory_sender
from tests.unit.resume_builders import (
    begin,
    call,
    compaction_begin,
    end,
    event,
    meta,
    output,
    records,
    say,
    usage,
    user,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "penguin_harness"
KEY = SessionKey("demo", "agent_1", "session-2026-11-29-10-00-00-0badcafe")
# A GitHub token shape the redaction policy knows; built in pieces so no whole token is here.
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6Q7r8S9t0"


def numbered(trace: list[Any]) -> list[tuple[int, TraceRecord]]:
    return list(enumerate(records(trace), 1))


def fixture(name: str) -> list[tuple[int, TraceRecord]]:
    return list(enumerate(read_shard(FIXTURES / name), 1))


def named(spans: list[Span], operation: str) -> list[Span]:
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == operation]


def stamp_ns(record: TraceRecord) -> int:
    from datetime import datetime

    moment = datetime.fromisoformat(record.value()["timestamp"])
    return int(moment.timestamp()) * 10**9 + moment.microsecond * 1000


def test_a_task_holds_its_requests_and_tool_calls_with_their_usage_and_times() -> None:
    recs = fixture("basic_session.jsonl")
    spans = fold_all(recs, KEY)
    (task,) = named(spans, "invoke_agent")
    chats, (tool,) = named(spans, "chat"), named(spans, "execute_tool")
    assert len(chats) == 2
    assert task.parent_id == 0
    assert task.trace_id == trace_id(KEY, 2)  # the prompt opens the task
    assert {s.trace_id for s in spans} == {task.trace_id}
    assert {s.parent_id for s in (*chats, tool)} == {task.span_id}
    assert task.name == "invoke_agent agent_1"
    assert [c.name for c in chats] == ["chat deepseek-v4-pro"] * 2
    first, second = chats
    # request_begin at line 4, request_end at line 9; the call at 6, its output at 8.
    assert (first.start_ns, first.end_ns) == (stamp_ns(recs[3][1]), stamp_ns(recs[8][1]))
    assert (tool.start_ns, tool.end_ns) == (stamp_ns(recs[5][1]), stamp_ns(recs[7][1]))
    usages = [r.payload()["request"] for _, r in recs if r.ptype == "token_usage"]
    for chat, counts in zip(chats, usages, strict=True):
        assert chat.attributes["gen_ai.usage.output_tokens"] == counts["output"]
        assert chat.attributes["gen_ai.usage.input_tokens"] == counts["total"] - counts["output"]
        assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == counts["cache_read"]
        assert chat.attributes["gen_ai.usage.cache_creation.input_tokens"] == counts["cache_write"]
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert tool.attributes["gen_ai.tool.call.id"] == "call_0"
    assert tool.attributes["gen_ai.tool.name"] == "exec_command"
    assert tool.events[0][0] == "approval_decision"
    assert not any(s.failed for s in spans)
    # Each span left when the record that decides its last field arrived.
    assert [(s.name.split()[0], s.finished) for s in spans] == [
        ("execute_tool", 8),
        ("chat", 10),
        ("chat", 14),
        ("invoke_agent", 14),
    ]


def test_failed_requests_retries_and_compactions_become_statuses_links_and_parents() -> None:
    spans = fold_all(fixture("retries_and_compaction.jsonl"), KEY)
    (task,) = named(spans, "invoke_agent")
    timeout, failed, summary = named(spans, "chat")
    assert timeout.failed
    assert timeout.attributes[ERROR_TYPE] == "timeout"
    assert timeout.error == "request timed out after 120000 ms"
    assert timeout.attributes["pentrace.request.retry_in_ms"] == 2000
    assert failed.attributes[ERROR_TYPE] == "failed"
    assert failed.links == [(task.trace_id, timeout.span_id, {"pentrace.link": "retry"})]
    compactions = [s for s in spans if s.name.startswith("compaction")]
    assert [c.name for c in compactions] == ["compaction summarize", "compaction discard"]
    assert summary.parent_id == compactions[0].span_id  # the compaction's own request
    assert not compactions[0].failed
    assert compactions[1].failed
    assert compactions[1].error == "summary was empty"
    assert compactions[1].attributes["pentrace.compaction.attempt"] == 3
    # An abort after the failed retries fails the task; the compaction's request does not
    # make it whole again.
    assert task.failed
    assert task.attributes[ERROR_TYPE] == "aborted"
    assert task.attributes["pentrace.session.source"] == "schedule"


def test_a_denied_call_an_abort_and_a_subagent_pointer() -> None:
    fold = SessionFold(KEY)
    spans = [s for p, r in fixture("media_mcp_subagent.jsonl") for s in fold.feed(p, r)]
    spans += fold.settle()
    (tool,) = named(spans, "execute_tool")
    (chat,) = named(spans, "chat")
    (task,) = named(spans, "invoke_agent")
    assert tool.failed
    assert tool.attributes[ERROR_TYPE] == "deny"
    assert tool.attributes["pentrace.tool.approval"] == "deny"
    assert chat.attributes[ERROR_TYPE] == "aborted"
    assert task.attributes["pentrace.goal.outcome"] == "aborted"
    # The image and the PDF open the task; the pointer hangs the child under the call.
    assert task.attributes["pentrace.task.position"] == 5
    (spawn,) = fold.spawns
    assert spawn.child_id == "session-2026-07-18-11-12-01-0b1c2d3e"
    assert spawn.link == ParentLink(task.trace_id, tool.span_id, KEY.reference, task.task_start_ns)
    assert chat.attributes["gen_ai.provider.name"] == "anthropic"


def test_ids_come_from_the_session_and_positions_only() -> None:
    recs = fixture("basic_session.jsonl")
    once, again = fold_all(recs, KEY), fold_all(fixture("basic_session.jsonl"), KEY)
    assert [(s.trace_id, s.span_id, s.parent_id) for s in once] == [
        (s.trace_id, s.span_id, s.parent_id) for s in again
    ]
    other = fold_all(recs, SessionKey("demo", "agent_2", KEY.session_id))
    assert not {s.span_id for s in once} & {s.span_id for s in other}
    assert {s.span_id for s in named(once, "chat")} == {
        span_id(KEY, 4, "chat"),
        span_id(KEY, 11, "chat"),
    }
    assert len({s.span_id for s in once}) == len(once)
    assert all(s.span_id and s.trace_id for s in once)


def test_a_prompt_written_after_request_begin_opens_its_task_at_that_begin() -> None:
    trace = [meta(), user("one"), begin(), say("a"), end(), begin(), user("two"), say("b"), end()]
    spans = fold_all(numbered(trace), KEY)
    first, second = named(spans, "invoke_agent")
    assert (first.attributes["pentrace.task.position"], first.finished) == (2, 7)
    assert second.attributes["pentrace.task.position"] == 6
    chats = named(spans, "chat")
    assert [c.parent_id for c in chats] == [first.span_id, second.span_id]
    assert first.end_ns == stamp_ns(records(trace)[4])  # its last record, the first end


def test_inputs_before_the_first_request_make_one_task_and_a_stray_end_none() -> None:
    trace = [meta(), user("a"), user("b"), begin(), say("x"), end(), end(), user("c")]
    spans = fold_all(numbered(trace), KEY)
    tasks = named(spans, "invoke_agent")
    assert [t.attributes["pentrace.task.position"] for t in tasks] == [2, 8]
    assert len(named(spans, "chat")) == 1


def test_a_request_waits_for_its_usage_until_the_next_request_rules_it_out() -> None:
    trace = [meta(), user("a"), begin(), call("c1"), end(), output("c1"), usage(request=None)]
    trace += [begin(), say("x"), end(), usage(request={"output": 5, "total": 9})]
    fold = SessionFold(KEY)
    finished = {p: [s.name for s in fold.feed(p, r)] for p, r in numbered(trace)}
    # The first request's usage record has no counts: the next begin closes it, without them.
    assert finished[6] == ["execute_tool exec_command"]
    assert finished[8] == ["chat m"]
    assert finished[11] == ["chat m"]
    spans = fold_all(numbered(trace), KEY)
    first, second = named(spans, "chat")
    assert "gen_ai.usage.input_tokens" not in first.attributes
    assert second.attributes["gen_ai.usage.input_tokens"] == 4


def test_settling_closes_open_spans_once_and_their_later_records_send_nothing() -> None:
    trace = [meta(), user("a"), begin(), call("c1"), call("c2")]
    fold = SessionFold(KEY)
    early = [s for p, r in numbered(trace) for s in fold.feed(p, r)]
    assert early == []
    assert fold.has_open()
    settled = fold.settle()
    assert not fold.has_open()
    assert sorted(s.name for s in settled) == [
        "chat m",
        "execute_tool exec_command",
        "execute_tool exec_command",
        "invoke_agent agent_1",
    ]
    assert all(s.attributes.get("pentrace.open") for s in settled if "invoke" not in s.name)
    assert not any(s.failed for s in settled)
    later = [output("c1"), end(), usage(request={"output": 1, "total": 2}), user("b"), begin()]
    start = len(trace) + 1
    after = [
        s for p, r in enumerate(records(trace + later)[start - 1 :], start) for s in fold.feed(p, r)
    ]
    assert after == []  # the new task is still open: nothing new is finished
    new_task = fold.settle()
    assert [s.name for s in new_task] == ["chat m", "invoke_agent agent_1"]
    assert {s.span_id for s in new_task}.isdisjoint({s.span_id for s in settled})


def test_unanswered_calls_are_interrupted_by_the_next_request_or_fail_with_theirs() -> None:
    trace = [meta(), user("a"), begin(), call("c1"), end(), begin(), call("c2"), end("failed")]
    spans = fold_all(numbered(trace), KEY)
    first, second = named(spans, "execute_tool")
    assert first.attributes[ERROR_TYPE] == "interrupted"
    assert second.attributes[ERROR_TYPE] == "failed"
    assert first.finished == 6
    assert second.finished == 8


def test_messages_of_a_subagent_forwarded_into_the_parent_are_left_to_its_own_trace() -> None:
    forwarded = [say("child says") | {"origin": ["child"]}, call("x") | {"origin": ["child"]}]
    trace = [meta(), user("a"), begin(), *forwarded, call("c1"), end(), output("c1")]
    spans = fold_all(numbered(trace), KEY)
    (tool,) = named(spans, "execute_tool")
    assert tool.attributes["gen_ai.tool.call.id"] == "c1"
    (chat,) = named(spans, "chat")
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)


def test_a_model_switch_links_to_the_source_task_it_left() -> None:
    source = TaskRef(7, 100, 0xABC, 0xDEF)
    asked: list[tuple[str, int]] = []

    def switch(source_id: str, at_ns: int) -> TaskRef | None:
        asked.append((source_id, at_ns))
        return source

    block = "[model_switch_from]\nsession_id: session-old\ntrace: /t\n[/model_switch_from]\n\nhi"
    trace = [meta(), user(block), begin(), say("x"), end()]
    spans = fold_all(numbered(trace), KEY, switch=switch)
    (task,) = named(spans, "invoke_agent")
    assert task.links == [(0xABC, 0xDEF, {"pentrace.link": "model_switch"})]
    assert task.attributes["pentrace.model_switch.from"] == "session-old"
    assert asked == [("session-old", task.start_ns)]


def test_a_subagent_session_lives_in_its_parents_trace_under_the_spawning_span() -> None:
    parent = ParentLink(0x1234, 0x99, "demo/agent_1/root-session", 5)
    trace = [meta(), user("review"), begin(), say("ok"), end(), user("again"), begin(), end()]
    spans = fold_all(numbered(trace), SessionKey("demo", "reviewer", "child"), parent=parent)
    tasks = named(spans, "invoke_agent")
    assert len(tasks) == 2
    assert {t.parent_id for t in tasks} == {0x99}
    assert {s.trace_id for s in spans} == {0x1234}
    assert {s.attributes["session.id"] for s in spans} == {"demo/agent_1/root-session"}
    assert {s.attributes["gen_ai.conversation.id"] for s in spans} == {"demo/reviewer/child"}
    assert {s.task_start_ns for s in spans} == {5}


def _all_text(span: Span) -> str:
    parts: list[Any] = [span.name, span.error, span.attributes, span.events, span.links]
    return json.dumps(parts, default=str, ensure_ascii=False)


def _secret_trace() -> list[Any]:
    system = meta()
    system["payload"]["system_prompt"] = f"use {SECRET}"
    tool_call = call("c1")
    tool_call["payload"]["arguments"] = json.dumps({"token": SECRET, "cmd": f"echo {SECRET}"})
    failure = end("failed")
    failure["payload"]["error_message"] = f"401 for {SECRET}"
    return [
        system,
        user(f"my token is {SECRET}"),
        begin(),
        say(f"I see {SECRET}"),
        tool_call,
        output("c1", f"printed {SECRET}"),
        failure,
        event("abort", reason=f"stop {SECRET}"),
        compaction_begin(reason="manual", mode="discard"),
        event(
            "compaction_end",
            reason="manual",
            mode="discard",
            status="failed",
            error_message=f"bad {SECRET}",
        ),
    ]


def test_content_is_sent_only_when_asked_and_always_redacted() -> None:
    plain = fold_all(numbered(_secret_trace()), KEY)
    full = fold_all(numbered(_secret_trace()), KEY, content=True)
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    assert not content_keys & {k for s in plain for k in s.attributes}
    assert content_keys <= {k for s in full for k in s.attributes}
    for span in (*plain, *full):
        assert SECRET not in _all_text(span)
        assert SECRET[4:20] not in _all_text(span)
    (chat,) = named(full, "chat")
    assert "[redacted:github_token]" in str(chat.attributes["gen_ai.input.messages"])
    assert "[redacted:github_token]" in chat.error
    (tool,) = named(full, "execute_tool")
    arguments = json.loads(str(tool.attributes["gen_ai.tool.call.arguments"]))
    assert arguments["token"] == "[redacted]"


def _gen_ai_names() -> set[str]:
    return {getattr(gen_ai, name) for name in dir(gen_ai) if name.startswith("GEN_AI_")}


@pytest.mark.parametrize(
    "name",
    [
        "basic_session.jsonl",
        "legacy_meta.jsonl",
        "media_mcp_subagent.jsonl",
        "retries_and_compaction.jsonl",
    ],
)
def test_attributes_are_the_semantic_conventions_where_they_name_one(name: str) -> None:
    spans = fold_all(fixture(name), KEY, content=True)
    known = _gen_ai_names()
    operations = {value.value for value in gen_ai.GenAiOperationNameValues}
    providers = {value.value for value in gen_ai.GenAiProviderNameValues}
    for span in spans:
        for key, value in span.attributes.items():
            assert key.startswith(("gen_ai.", "pentrace.", "session.id", ERROR_TYPE)), key
            if key.startswith("gen_ai."):
                assert key in known, key
            if key.startswith("gen_ai.usage."):
                assert isinstance(value, int)
                assert value >= 0
        operation = span.attributes.get("gen_ai.operation.name")
        if operation is not None:
            assert operation in operations
            if operation != "execute_tool":  # required on agent and inference spans
                assert span.attributes["gen_ai.provider.name"] in providers
            assert span.name.split()[0] == operation
        finish = span.attributes.get("gen_ai.response.finish_reasons")
        assert finish is None or (isinstance(finish, tuple) and all(finish))


def test_sdk_spans_keep_the_ids_times_statuses_and_links() -> None:
    spans = fold_all(fixture("retries_and_compaction.jsonl"), KEY)
    sender, exporter = memory_sender()
    assert sender.send(spans)
    sdk = {s.context.span_id: s for s in exporter.get_finished_spans()}
    assert len(sdk) == len(spans)
    for span in spans:
        got = sdk[span.span_id]
        assert got.context.trace_id == span.trace_id
        assert (got.parent.span_id if got.parent else 0) == span.parent_id
        assert (got.start_time, got.end_time) == (span.start_ns, span.end_ns)
        assert got.kind is (SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL)
        assert got.status.status_code is (StatusCode.ERROR if span.failed else StatusCode.UNSET)
        assert [(link.context.trace_id, link.context.span_id) for link in got.links] == [
            (trace, linked) for trace, linked, _ in span.links
        ]
        assert got.resource.attributes["service.name"] == "pentrace"


def test_hostile_values_anywhere_still_make_spans_that_encode() -> None:
    odd = "a\ud800b\udfff"
    start = meta()
    start["payload"].update(provider=odd, model_id=odd, system_prompt=odd, source=odd)
    tool_call = call(odd)
    tool_call["payload"].update(name=odd, arguments=odd)
    failure = end(odd)
    failure["payload"].update(error_message=odd, attempt=2**70, retry_in_ms=-(2**70))
    trace = [
        start,
        user(odd),
        begin(),
        say(odd),
        tool_call,
        event("approval_decision", decision=odd, tool_call_id=odd),
        output(odd, odd) | {"payload": {"type": "tool_call_output", "role": "user",
                                         "output": odd, "tool_call_id": odd,
                                         "stop_reason": odd}},
        failure,
        usage(request={"output": 2**63 - 1, "total": 2**63 - 1, "cache_read": 2**63 - 1}),
        event("abort", reason=odd),
        compaction_begin(reason=odd, mode=odd, context=2**70, turns=-1),
        event("compaction_end", reason=odd, mode=odd, status=odd, attempt=2**70),
        event("goal_finished", outcome=odd),
    ]  # fmt: skip
    for content in (False, True):
        spans = fold_all(numbered(trace), KEY, content=content)
        assert {s.name.split()[0] for s in spans} == {
            "invoke_agent", "chat", "execute_tool", "compaction"
        }  # fmt: skip
        sender, exporter = memory_sender()
        sdk = [sender.sdk_span(span) for span in spans]
        request = encode_spans(sdk).SerializeToString()
        assert b"\\ud800" in request  # the lone surrogate as its JSON escape (ADR 0015)
        assert sender.send(spans)
        assert len(exporter.get_finished_spans()) == len(spans)
