"""Properties of the resume fold: determinism, continuation, linearity and legality."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pentrace.domain.json_codec import json_bytes
from pentrace.domain.records import TraceRecord
from pentrace.errors import NotATraceError
from pentrace.infrastructure.trace.reader import (
    ParseReport,
    read_records_from_bytes,
    resume_trace_file,
)
from pentrace.projections import pairing, resume, summary, synthetic
from pentrace.projections.resume import ResumeResult, resume_trace
from pentrace.projections.synthetic import SyntheticRecord
from tests.property.resume_oracle import oracle
from tests.support import BOUNDED_PROPERTY
from tests.unit.resume_builders import (
    begin,
    call,
    compaction_begin,
    compaction_end,
    end,
    event,
    meta,
    model,
    observed,
    output,
    records,
    say,
    think,
    tokens,
    usage,
    user,
)

# --- any trace: every record kind, odd values included -------------------------------------

_ids = st.sampled_from(["a", "b", "c", ""])
_statuses = st.sampled_from(["completed", "completed", "failed", "aborted", "COMPLETED", None])
_counts: st.SearchStrategy[Any] = st.sampled_from([tokens(5), tokens(9), {}, None, 0, []])
_any_record: st.SearchStrategy[Any] = st.one_of(
    st.builds(user, st.sampled_from(["u1", "u2"])),
    st.builds(say, st.sampled_from(["[summary]s[/summary]", "plain", ""])),
    st.builds(think, st.just("t")),
    st.builds(call, _ids, st.sampled_from(["completed", "completed", "aborted", None])),
    st.builds(output, st.one_of(st.none(), _ids), st.just("o"), st.sampled_from(["user", "x"])),
    st.builds(begin),
    st.builds(end, _statuses),
    st.builds(usage, _counts, _counts),
    st.builds(compaction_begin, mode=st.sampled_from(["summarize", "discard"])),
    st.builds(compaction_end, st.sampled_from(["completed", "failed"]), st.just("summarize")),
    st.builds(event, st.just("abort"), origin=st.sampled_from([None, [], ["child"]])),
    st.builds(model, st.just("partial_text"), st.just("assistant"), text=st.just("p")),
    st.builds(model, st.just("text"), st.just("system"), text=st.just("[summary]sys[/summary]")),
    st.builds(meta),
    st.sampled_from([None, 42, "s", []]),
)
any_trace = st.lists(_any_record, max_size=40)


@settings(BOUNDED_PROPERTY, max_examples=150)
@given(any_trace, st.booleans())
def test_folding_is_deterministic_whatever_the_input(trace: list[Any], strict: bool) -> None:
    first = observed(resume_trace(records(trace), strict_pairing=strict))
    again = observed(resume_trace(iter(records(trace)), strict_pairing=strict))
    assert first == again


@settings(BOUNDED_PROPERTY, max_examples=150)
@given(any_trace, st.booleans())
def test_a_completed_round_after_resume_sends_exactly_the_carry_over(
    trace: list[Any], strict: bool
) -> None:
    before = resume_trace(records(trace), strict_pairing=strict)
    assume(not before.context_closed)
    question, answer = user("next"), say("answer")
    after = resume_trace(records([*trace, question, begin(), answer, end()]), strict_pairing=strict)
    # The next completed round sends the carry-over, with placeholders first as history needs.
    placeholders = [r for r in before.carry_over if isinstance(r, SyntheticRecord)]
    resent = [r for r in before.carry_over if not isinstance(r, SyntheticRecord)]
    expected = [*before.history, *placeholders, *resent]
    assert observed(after)["history"][: len(expected)] == _shown(expected)
    assert [r.value() for r in after.history[len(expected) :]] == [question, answer]
    assert after.carry_over == []
    assert after.session_turns == before.session_turns + (before.dangling_compaction is None)


def _shown(sequence: list[TraceRecord]) -> list[Any]:
    return [
        ("synthetic", r.value()) if isinstance(r, SyntheticRecord) else r.value() for r in sequence
    ]


def _as_oracle(result: ResumeResult) -> dict[str, Any]:
    def message(record: TraceRecord) -> Any:
        if isinstance(record, SyntheticRecord):
            return ("placeholder", record.tool_call_id)
        return record.value()

    summary = None
    if result.pending_summary is not None:
        text = result.pending_summary.payload()["text"]
        summary = text.removeprefix("[context_summary]\n").removesuffix("\n[/context_summary]")
    return {
        "meta": None if result.meta is None else result.meta.value(),
        "session_tokens": result.session_tokens,
        "last_request_total": result.last_request_total,
        "history": [message(r) for r in result.history],
        "carry_over": [message(r) for r in result.carry_over],
        "context_closed": result.context_closed,
        "pending_summary": summary,
        "session_turns": result.session_turns,
        "render_messages": [r.value() for r in result.render_messages],
        "dangling_compaction": result.dangling_compaction,
    }


@settings(BOUNDED_PROPERTY, max_examples=300)
@given(st.lists(_any_record, max_size=60), st.booleans())
def test_the_fold_agrees_with_a_literal_port_of_the_reference(
    trace: list[Any], close: bool
) -> None:
    if close:  # closures need the very last record: make them common
        trace = [*trace, compaction_end("completed", "summarize")]
    assert _as_oracle(resume_trace(records(trace))) == oracle(trace)


# --- linear: work per record stays flat as the trace grows ---------------------------------

_FOLD_FILES = {
    Path(module.__file__ or "").resolve() for module in (pairing, resume, summary, synthetic)
}


def _lines_executed(fold: Callable[[], object]) -> int:
    """Python lines run inside the resume modules while ``fold`` runs (not a time)."""
    count = 0
    files = {str(path) for path in _FOLD_FILES}

    def tracer(frame: FrameType, event_name: str, arg: object) -> Any:
        nonlocal count
        if frame.f_code.co_filename not in files:
            return None
        if event_name == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fold()
    finally:
        sys.settrace(previous)
    return count


def _failing_rounds(n: int) -> Iterator[Any]:
    # Input piles up behind rounds that keep failing: the reference re-copies it every time.
    yield meta()
    for index in range(n):
        yield from (user(f"u{index}"), begin(), say("partial"), end("failed"))
    yield from (begin(), say("done"), end())


def _failing_compaction_rounds(n: int) -> Iterator[Any]:
    # Tool outputs are re-filtered by every failed round of a compaction span in the reference.
    calls = [call(f"c{index}") for index in range(n)]
    yield from (begin(), *calls, end())
    yield from (output(f"c{index}") for index in range(n))
    yield compaction_begin(mode="summarize")
    for index in range(n):
        yield from (user(f"summarize {index}"), begin(), end("failed"))
    yield from (compaction_end("failed"), begin(), say("go on"), end())


def _placeholder_rounds(n: int) -> Iterator[Any]:
    # Every round commits a call that is never answered; committed ids grow all along.
    for index in range(n):
        yield from (user(f"u{index}"), begin(), call(f"c{index}"), end())


def _falsy_token_usage(n: int) -> Iterator[Any]:
    yield usage(tokens(1), tokens(1))
    for _ in range(n):
        yield usage(None, None)


@pytest.mark.parametrize(
    "family", [_failing_rounds, _failing_compaction_rounds, _placeholder_rounds, _falsy_token_usage]
)
def test_the_fold_does_linear_work(family: Callable[[int], Iterator[Any]]) -> None:
    small, large = records(list(family(100))), records(list(family(400)))
    work_small = _lines_executed(lambda: resume_trace(small))
    work_large = _lines_executed(lambda: resume_trace(large))
    # Four times the records: linear work is about 4x, quadratic would be about 16x.
    assert work_large <= 4.5 * work_small


# --- legal PenguinHarness sessions, cut by a crash anywhere --------------------------------


@st.composite
def legal_session(draw: st.DrawFn) -> list[Any]:
    """A session as PenguinHarness writes it: input before begin, tool outputs after end."""
    trace: list[Any] = [meta()]
    calls = 0
    for task in range(draw(st.integers(1, 3))):
        trace.append(user(f"task {task}"))
        for _round in range(draw(st.integers(1, 3))):
            status = "failed"
            while status != "completed":
                status = draw(st.sampled_from(["completed", "completed", "failed", "timeout"]))
                trace.append(begin())
                if draw(st.booleans()):
                    trace.append(think("plan"))
                if status != "completed":
                    # A tool may already run while the request streams; it can finish late.
                    lost = [call(f"call-{calls}")] if draw(st.booleans()) else []
                    calls += len(lost)
                    late = [output(c["payload"]["tool_call_id"]) for c in lost]
                    if draw(st.booleans()):
                        trace += [say("cut short"), *lost, *late, end(status)]
                    else:
                        trace += [say("cut short"), *lost, end(status), *late]
                    if draw(st.booleans()):
                        break
            if status != "completed":
                break
            made = [call(f"call-{calls + k}") for k in range(draw(st.integers(0, 2)))]
            calls += len(made)
            outputs = [output(c["payload"]["tool_call_id"]) for c in made]
            # Parallel tools may finish before the request ends; both count for the next round.
            early = draw(st.integers(0, len(outputs)))
            trace += [say("reply"), *made, *outputs[:early], end()]
            trace += [usage(tokens(len(trace)), tokens(7)), *outputs[early:]]
            if not made:
                break
        if draw(st.booleans()):
            mode = draw(st.sampled_from(["summarize", "discard"]))
            ok = draw(st.sampled_from(["completed", "failed"]))
            trace += [compaction_begin(reason="context", mode=mode), user("summarize now")]
            trace += [begin(), say("[summary]state[/summary]"), end(ok)]
            trace.append(compaction_end(ok, mode))
    return trace


def _crash(trace: list[Any], cut: int, tear: int) -> list[TraceRecord]:
    """Keep ``cut`` whole lines, then ``tear`` bytes of the next one, and read it back."""
    lines = [msgspec.json.encode(value) for value in trace]
    data = b"\n".join(lines[:cut])
    if cut < len(lines) and tear:
        data += b"\n" + lines[cut][: min(tear, len(lines[cut]) - 1)]
    return list(read_records_from_bytes(data))


def _assert_paired(sequence: list[TraceRecord]) -> None:
    """Every tool call answered exactly once, after it; no output without its call."""
    answered: dict[Any, bool] = {}
    for record in sequence:
        payload = record.payload()
        call_id = payload.get("tool_call_id")
        if payload.get("type") == "tool_call":
            assert call_id not in answered, f"call {call_id} appears twice"
            answered[call_id] = False
        elif payload.get("type") == "tool_call_output":
            assert answered.get(call_id) is False, f"output for {call_id} is an orphan or a repeat"
            answered[call_id] = True
    assert all(answered.values()), f"unanswered calls: {answered}"


def _committed_outputs(read: list[TraceRecord]) -> list[bytes]:
    """The model's output of every request that completed, as the model of a session sees it."""
    committed: list[bytes] = []
    current: list[bytes] | None = None
    for record in read:
        if record.ptype == "request_begin":
            current = []
        elif record.ptype == "request_end":
            if record.status == "completed" and current is not None:
                committed += current
            current = None
        elif current is not None and record.kind == "model_msg" and record.role == "assistant":
            current.append(record.raw)
    return committed


@settings(BOUNDED_PROPERTY, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(legal_session(), st.data())
def test_a_crashed_legal_session_resumes_to_committed_rounds_with_every_call_answered(
    trace: list[Any], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(1, len(trace)), label="whole lines kept")
    tear = data.draw(st.integers(0, 80), label="bytes of the torn line")
    read = _crash(trace, cut, tear)
    result = resume_trace(read)
    _assert_paired([*result.history, *result.carry_over])
    assistant_side = [r.raw for r in result.history if r.role == "assistant"]
    if result.context_closed:
        assert result.history == result.carry_over == []
        return
    assert assistant_side == _committed_outputs(read)
    completed_outside_compaction = _completed_turns(read)
    assert result.session_turns == completed_outside_compaction
    assert not any(isinstance(r, SyntheticRecord) for r in read)
    assert observed(resume_trace(read, strict_pairing=True)) == observed(result)


@settings(BOUNDED_PROPERTY, max_examples=300)
@given(any_trace)
def test_strict_pairing_answers_every_call_exactly_once_whatever_the_input(
    trace: list[Any],
) -> None:
    result = resume_trace(records(trace), strict_pairing=True)
    _assert_paired([*result.history, *result.carry_over])


def _completed_turns(read: list[TraceRecord]) -> int:
    turns, compacting = 0, False
    for record in read:
        if record.ptype == "compaction_begin":
            compacting = True
        elif record.ptype == "compaction_end":
            compacting = False
        elif record.ptype == "request_end" and record.status == "completed" and not compacting:
            turns += 1
    return turns


# --- from a file: the closure shortcut and the backwards peek agree with the fold ----------

_raw_lines = st.sampled_from(
    [b"", b"   ", b"not json", b'{"type":"event_msg"', b"\xef\xbb\xbf", b"null", b"\r", b"42"]
)


@settings(BOUNDED_PROPERTY, max_examples=200)
@given(
    st.lists(st.one_of(_any_record.map(json_bytes), _raw_lines), max_size=40),
    st.sampled_from([None, "completed", "failed"]),
    st.sampled_from([b"", b"\n", b"torn {", b"\n\n  \n"]),
)
def test_resuming_a_file_agrees_with_folding_its_records(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    close: str | None,
    tail: bytes,
) -> None:
    if close is not None:  # make closures, void ones included, common
        lines = [*lines, json_bytes(compaction_end(close, "summarize"))]
    data = b"\n".join(lines) + b"\n" + tail
    path = tmp_path_factory.mktemp("resume") / "trace.jsonl"
    path.write_bytes(data)
    folded = resume_trace(read_records_from_bytes(data))
    report = ParseReport()
    try:
        from_file = resume_trace_file(path, report=report)
    except NotATraceError:
        assert folded.meta is None
        assert not folded.render_messages
        assert not folded.carry_over
        assert not any(
            r.kind in ("session_meta", "model_msg", "event_msg") for r in records_of(data)
        )
        return
    assert observed(from_file) == observed(folded)
    expected = ParseReport()
    list(read_records_from_bytes(data, report=expected))
    assert (report.records, report.skipped_count, len(report.torn_tails)) == (
        expected.records,
        expected.skipped_count,
        len(expected.torn_tails),
    )


def records_of(data: bytes) -> list[TraceRecord]:
    return list(read_records_from_bytes(data))
