"""Every branch of the reference resume algorithm, one hand-written trace each.

The expected results follow /shared/reference/resume-semantics.md step by step;
the case names say which branch or numbered surprise each one pins down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pentrace.projections.resume import resume_trace
from tests.unit.resume_builders import (
    ZERO_TOKENS,
    Envelope,
    begin,
    call,
    compaction_begin,
    compaction_end,
    end,
    envelope,
    event,
    meta,
    model,
    observed,
    output,
    placeholder,
    records,
    say,
    summary_text,
    think,
    tokens,
    usage,
    user,
)

Case = Callable[[], tuple[list[Any], dict[str, Any]]]
CASES: list[Any] = []
STRICT_CASES: list[Any] = []


def case(build: Case) -> Case:
    CASES.append(pytest.param(build, id=build.__name__))
    return build


def strict_case(build: Case) -> Case:
    STRICT_CASES.append(pytest.param(build, id=build.__name__))
    return build


def expect(trace: list[Any], **fields: Any) -> dict[str, Any]:
    """The full expected result: defaults for a trace that commits nothing, then overrides."""
    metas = [v for v in trace if isinstance(v, dict) and v.get("type") == "session_meta"]
    expected: dict[str, Any] = {
        "history": [],
        "carry_over": [],
        "context_closed": False,
        "pending_summary": None,
        "session_tokens": ZERO_TOKENS,
        "last_request_total": 0,
        "session_turns": 0,
        "render_messages": [
            v for v in trace if isinstance(v, dict) and v.get("type") == "model_msg"
        ],
        "meta": metas[0] if metas else None,
        "dangling_compaction": None,
    }
    expected.update(fields)
    return expected


def closed(trace: list[Any], **fields: Any) -> dict[str, Any]:
    return expect(trace, context_closed=True, render_messages=[], **fields)


# --- preliminaries --------------------------------------------------------------------------


@case
def an_empty_trace_resumes_to_nothing() -> tuple[list[Any], dict[str, Any]]:
    return [], expect([])


@case
def a_committed_round_enters_history_and_counts_a_turn() -> tuple[list[Any], dict[str, Any]]:
    u, t, a = user("hi"), think("hmm"), say("hello")
    trace = [meta(), u, begin(), t, a, end(), usage(tokens(10), tokens(4))]
    return trace, expect(
        trace, history=[u, t, a], session_tokens=tokens(10), last_request_total=4, session_turns=1
    )


@case
def only_the_first_session_meta_is_meta() -> tuple[list[Any], dict[str, Any]]:
    first, second = meta("session-a"), meta("session-b")
    u, a = user("hi"), say("ok")
    trace = [first, u, begin(), second, a, end()]
    return trace, expect(trace, meta=first, history=[u, a], session_turns=1)


@case
def session_and_request_tokens_come_from_separate_backwards_scans() -> tuple[
    list[Any], dict[str, Any]
]:
    trace = [usage(tokens(5), tokens(2)), usage(tokens(9), None), usage(0, {"total": 7})]
    return trace, expect(trace, session_tokens=tokens(9), last_request_total=7)


@case
def an_empty_object_session_is_accepted_verbatim() -> tuple[list[Any], dict[str, Any]]:
    trace = [usage(tokens(5), tokens(2)), usage({}, tokens(3))]
    return trace, expect(trace, session_tokens={}, last_request_total=3)


@case
def an_empty_object_request_leaves_the_last_request_total_undefined() -> tuple[
    list[Any], dict[str, Any]
]:
    trace = [usage(tokens(5), tokens(2)), usage(tokens(6), {})]
    return trace, expect(trace, session_tokens=tokens(6), last_request_total=None)


@case
def falsy_token_values_are_skipped() -> tuple[list[Any], dict[str, Any]]:
    trace = [usage(tokens(5), tokens(2)), usage(None, 0), usage("", None)]
    return trace, expect(trace, session_tokens=tokens(5), last_request_total=2)


# --- file-level closure ---------------------------------------------------------------------


def _compaction(reply: Any, mode: str = "summarize") -> tuple[list[Any], Envelope]:
    """A committed round, then a compaction whose request replies ``reply``."""
    closing = compaction_end("completed", mode)
    trace = [
        meta(),
        user("task"),
        begin(),
        say("working"),
        end(),
        usage(tokens(50), tokens(40)),
        compaction_begin(reason="context", mode=mode, context=40, turns=1),
        user("summarize please"),
        begin(),
        say(reply),
        end(),
        usage(tokens(70), tokens(60)),
        closing,
    ]
    return trace, closing


def _replayed(trace: list[Any], session: int = 70, request: int = 60) -> dict[str, Any]:
    """A compaction trace that did not close: both committed rounds replay into history."""
    return expect(
        trace,
        history=[trace[1], trace[3], trace[7], trace[9]],
        session_tokens=tokens(session),
        last_request_total=request,
        session_turns=1,
    )


@case
def a_discard_closure_starts_an_empty_context() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary]ignored[/summary]", mode="discard")
    return trace, closed(trace, session_tokens=tokens(70))


@case
def a_closure_without_mode_has_no_summary() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary]ignored[/summary]")
    trace[-1] = compaction_end("completed", mode=None)
    return trace, closed(trace, session_tokens=tokens(70))


SUMMARIES = {
    "square": ("intro [summary]\n the state \n[/summary] outro", "the state"),
    "legacy_angle": ("<summary>old form</summary>", "old form"),
    "square_wins_over_an_earlier_angle": (
        "<summary>angle</summary>[summary]square[/summary]",
        "square",
    ),
    "stray_markers_stripped_inside": ("[summary] a [summary] b <summary>[/summary]", "a  b"),
    "first_non_empty_block_wins": ("[summary] [/summary][summary]second[/summary]", "second"),
    "untagged_reply_used_whole": ("  just the state  ", "just the state"),
    "body_after_an_empty_block": ("[summary][/summary] the body", "the body"),
    "lone_tags_removed_in_fallback": ("[summary] x <summary> y", "x  y"),
    "empty_angle_then_text": ("<summary> </summary>rest [/summary]", "rest"),
}


def _summary_case(name: str, reply: str, summary: str) -> Case:
    def build() -> tuple[list[Any], dict[str, Any]]:
        trace, closing = _compaction(reply)
        return trace, closed(
            trace, session_tokens=tokens(70), pending_summary=summary_text(summary, closing)
        )

    build.__name__ = f"a_summarize_closure_extracts_the_summary_{name}"
    return case(build)


for _name, (_reply, _summary) in SUMMARIES.items():
    _summary_case(_name, _reply, _summary)


@case
def a_textless_summary_voids_the_closure_and_replays() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary] [/summary]")
    return trace, _replayed(trace)


@case
def an_empty_completed_request_wins_over_an_earlier_reply() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("")
    trace[9] = think("no text at all")
    return trace, _replayed(trace)


@case
def a_failed_compaction_request_takes_the_summary_from_an_ordinary_reply() -> tuple[
    list[Any], dict[str, Any]
]:
    trace, closing = _compaction("[summary]never committed[/summary]")
    trace[3] = say("[summary]from the ordinary turn[/summary]")
    trace[10] = end("failed")
    return trace, closed(
        trace,
        session_tokens=tokens(70),
        pending_summary=summary_text("from the ordinary turn", closing),
    )


@case
def only_assistant_text_is_summary_text() -> tuple[list[Any], dict[str, Any]]:
    trace, closing = _compaction("[summary]assistant[/summary]")
    trace[9:9] = [
        user("[summary]user side[/summary]"),
        model("text", "system", text="[summary]system side[/summary]"),
    ]
    return trace, closed(
        trace, session_tokens=tokens(70), pending_summary=summary_text("assistant", closing)
    )


@case
def a_record_after_compaction_end_cancels_the_closure() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary]state[/summary]")
    trace.append(usage(tokens(71), tokens(1)))
    return trace, _replayed(trace, session=71, request=1)


@case
def a_non_object_last_record_cancels_the_closure() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary]state[/summary]")
    trace.append(42)
    return trace, _replayed(trace)


@case
def a_failed_compaction_end_is_no_closure() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary]state[/summary]")
    trace[-1] = compaction_end("failed")
    return trace, _replayed(trace)


@case
def status_checks_are_case_sensitive() -> tuple[list[Any], dict[str, Any]]:
    trace, _ = _compaction("[summary]state[/summary]")
    trace[-1] = compaction_end("COMPLETED")
    trace[4] = end("COMPLETED")
    u, prompt, reply = trace[1], trace[7], trace[9]
    # The first round failed, so its input is retried by the compaction request.
    return trace, expect(
        trace,
        history=[u, prompt, reply],
        session_tokens=tokens(70),
        last_request_total=60,
        session_turns=0,
    )


# --- turn-by-turn replay --------------------------------------------------------------------

DROP_STATUSES = ["failed", "aborted", "timeout", "malformed", "auth", None, "weird"]


def _dropped_round_case(status: Any) -> Case:
    def build() -> tuple[list[Any], dict[str, Any]]:
        u, partial = user("do it"), say("half an ans")
        trace = [meta(), u, begin(), partial, end(status)]
        return trace, expect(trace, carry_over=[u])

    build.__name__ = f"a_round_ending_{status or 'without_status'}_is_dropped_and_its_input_resent"
    return case(build)


for _status in DROP_STATUSES:
    _dropped_round_case(_status)


@case
def a_request_open_at_eof_is_dropped() -> tuple[list[Any], dict[str, Any]]:
    u, c = user("run it"), call("c1")
    trace = [meta(), u, begin(), c]
    return trace, expect(trace, carry_over=[u])


@case
def a_begin_inside_a_request_drops_the_open_round_first() -> tuple[list[Any], dict[str, Any]]:
    u1, lost, u2, a = user("one"), say("lost"), user("two"), say("answer")
    trace = [u1, begin(), lost, u2, begin(), a, end()]
    # The dropped round's input goes back in front of what arrived meanwhile.
    return trace, expect(trace, history=[u1, u2, a], session_turns=1)


@case
def a_stray_completed_end_counts_as_a_turn() -> tuple[list[Any], dict[str, Any]]:
    u = user("waiting")
    trace = [meta(), u, end()]
    return trace, expect(trace, carry_over=[u], session_turns=1)


@case
def a_stray_failed_end_changes_nothing() -> tuple[list[Any], dict[str, Any]]:
    u = user("waiting")
    trace = [u, end("failed")]
    return trace, expect(trace, carry_over=[u])


@case
def user_messages_inside_a_request_are_next_turn_input() -> tuple[list[Any], dict[str, Any]]:
    u1, late, a = user("first"), user("steer"), say("reply")
    trace = [u1, begin(), late, a, end()]
    return trace, expect(trace, history=[u1, a], carry_over=[late], session_turns=1)


@case
def assistant_messages_outside_a_request_are_only_rendered() -> tuple[list[Any], dict[str, Any]]:
    stray = say("outside")
    trace = [stray]
    return trace, expect(trace)


@case
def partial_messages_are_ignored_but_unknown_types_count() -> tuple[list[Any], dict[str, Any]]:
    u, a = user("hi"), say("ok")
    partial = model("partial_text", "assistant", event_type="delta", text="o")
    unknown = model("partial_future", "assistant", text="kept")
    trace = [u, begin(), partial, unknown, a, end()]
    return trace, expect(
        trace, history=[u, unknown, a], render_messages=[u, unknown, a], session_turns=1
    )


@case
def a_committed_call_without_output_gets_a_placeholder_in_the_next_round() -> tuple[
    list[Any], dict[str, Any]
]:
    u1, c1, u2, a2 = user("go"), call("c1"), user("next"), say("done")
    trace = [u1, begin(), c1, end(), u2, begin(), a2, end()]
    return trace, expect(trace, history=[u1, c1, placeholder(c1), u2, a2], session_turns=2)


@case
def placeholders_come_in_commit_order_before_the_round_input() -> tuple[list[Any], dict[str, Any]]:
    c1, c2, c3, o2, a = call("c1"), call("c2"), call("c3"), output("c2"), say("next")
    trace = [begin(), c1, c2, c3, end(), o2, begin(), a, end()]
    return trace, expect(
        trace,
        history=[c1, c2, c3, placeholder(c1), placeholder(c3), o2, a],
        session_turns=2,
    )


@case
def a_late_output_after_a_history_placeholder_is_discarded() -> tuple[list[Any], dict[str, Any]]:
    c1, a2, late = call("c1"), say("moved on"), output("c1", "finally")
    trace = [begin(), c1, end(), begin(), a2, end(), late]
    return trace, expect(trace, history=[c1, placeholder(c1), a2], session_turns=2)


@case
def unanswered_calls_at_eof_are_backfilled_after_the_pending_input() -> tuple[
    list[Any], dict[str, Any]
]:
    c1, c2, c3, o2, u = call("c1"), call("c2"), call("c3"), output("c2"), user("more")
    trace = [begin(), c1, c2, c3, end(), o2, u]
    return trace, expect(
        trace,
        history=[c1, c2, c3],
        carry_over=[o2, u, placeholder(c1), placeholder(c3)],
        session_turns=1,
    )


@case
def outputs_of_an_uncommitted_call_are_dropped_as_orphans() -> tuple[list[Any], dict[str, Any]]:
    u, c1, o1, a = user("go"), call("c1"), output("c1"), say("retry")
    trace = [u, begin(), c1, end("failed"), o1, begin(), a, end()]
    return trace, expect(trace, history=[u, a], session_turns=1)


@case
def tool_outputs_without_an_id_are_plain_input() -> tuple[list[Any], dict[str, Any]]:
    o_in, a, o_tail = output(None, "no id"), say("ok"), output(None, "tail")
    trace = [o_in, begin(), a, end(), o_tail]
    return trace, expect(trace, history=[o_in, a], carry_over=[o_tail], session_turns=1)


@case
def tool_outputs_with_an_empty_id_are_always_filtered() -> tuple[list[Any], dict[str, Any]]:
    o_in, a, o_tail = output("", "empty"), say("ok"), output("", "tail")
    trace = [o_in, begin(), a, end(), o_tail]
    return trace, expect(trace, history=[a], session_turns=1)


@case
def a_tool_call_output_during_the_request_answers_in_the_next_round() -> tuple[
    list[Any], dict[str, Any]
]:
    c1, o1, c2, o2, a = call("c1"), output("c1"), call("c2"), output("c2"), say("both done")
    trace = [begin(), c1, c2, o1, end(), o2, begin(), a, end()]
    return trace, expect(trace, history=[c1, c2, o1, o2, a], session_turns=2)


@case
def a_dangling_compaction_prompt_is_resent() -> tuple[list[Any], dict[str, Any]]:
    u, a, prompt = user("task"), say("done"), user("summarize please")
    trace = [
        meta(),
        u,
        begin(),
        a,
        end(),
        compaction_begin(reason="turns", mode="summarize", context=9, turns=1),
        prompt,
    ]
    return trace, expect(
        trace,
        history=[u, a],
        carry_over=[prompt],
        session_turns=1,
        dangling_compaction={"reason": "turns", "mode": "summarize"},
    )


@case
def a_dangling_compaction_keeps_only_the_fields_it_has() -> tuple[list[Any], dict[str, Any]]:
    trace = [compaction_begin(mode="discard")]
    return trace, expect(trace, dangling_compaction={"mode": "discard"})


@case
def a_dropped_compaction_round_reclaims_tool_outputs_but_not_the_prompt() -> tuple[
    list[Any], dict[str, Any]
]:
    c1, o1, prompt = call("c1"), output("c1"), user("summarize please")
    begin_compaction = compaction_begin(reason="context", mode="summarize")
    trace = [begin(), c1, end(), o1, begin_compaction, prompt, begin(), say("x"), end("failed")]
    return trace, expect(
        trace,
        history=[c1],
        carry_over=[o1],
        session_turns=1,
        dangling_compaction={"reason": "context", "mode": "summarize"},
    )


@case
def repeated_failed_compaction_rounds_reclaim_each_output_once() -> tuple[
    list[Any], dict[str, Any]
]:
    c1, o1, u = call("c1"), output("c1"), user("go on")
    first, second, third = user("summarize 1"), user("summarize 2"), user("summarize 3")
    a = say("continuing")
    trace = [
        begin(),
        c1,
        end(),
        o1,
        compaction_begin(mode="summarize"),
        first,
        begin(),
        end("failed"),
    ]
    trace += [second, begin(), end("timeout"), third, begin(), compaction_end("failed"), u]
    trace += [begin(), a, end()]
    # The open compaction round is dropped by the next begin outside the span: all kept.
    return trace, expect(trace, history=[c1, o1, third, u, a], session_turns=2)


@case
def committed_rounds_inside_a_compaction_span_are_not_turns() -> tuple[list[Any], dict[str, Any]]:
    u, a, prompt, reply = user("task"), say("done"), user("summarize"), say("[summary]s[/summary]")
    trace = [u, begin(), a, end(), compaction_begin(), prompt, begin(), reply, end()]
    trace.append(compaction_end("failed"))
    return trace, expect(trace, history=[u, a, prompt, reply], session_turns=1)


@case
def origin_is_ignored_except_for_aborts() -> tuple[list[Any], dict[str, Any]]:
    child = ["session-child"]
    tagged_user, a = user("from child", origin=child), say("ok")
    shown_abort, empty_origin_abort = event("abort", reason="user"), event("abort", origin=[])
    trace = [
        tagged_user,
        begin(origin=child),
        a,
        end(origin=child),
        usage(tokens(3), tokens(2), origin=child),
        shown_abort,
        event("abort", origin=child, reason="child"),
        empty_origin_abort,
    ]
    return trace, expect(
        trace,
        history=[tagged_user, a],
        session_turns=1,
        session_tokens=tokens(3),
        last_request_total=2,
        render_messages=[tagged_user, a, shown_abort, empty_origin_abort],
    )


@case
def other_events_take_no_part() -> tuple[list[Any], dict[str, Any]]:
    u, a = user("hi"), say("ok")
    trace = [u, event("approval_decision", decision="allow", tool_call_id="c1"), begin()]
    trace += [event("subagent", session_id="s"), a, event("tool_list_ready", tools=[])]
    trace += [event("goal_finished", outcome="complete"), event("unknown_kind"), end()]
    return trace, expect(trace, history=[u, a], session_turns=1)


@case
def a_call_that_did_not_complete_stays_unpaired() -> tuple[list[Any], dict[str, Any]]:
    aborted, missing, o1, o2, a = (
        call("c1", "aborted"),
        call("c2", None),
        output("c1"),
        output("c2"),
        say("x"),
    )
    trace = [begin(), aborted, missing, end(), o1, o2, begin(), a, end()]
    return trace, expect(trace, history=[aborted, missing, a], session_turns=2)


@case
def duplicate_outputs_in_one_snapshot_both_enter_history() -> tuple[list[Any], dict[str, Any]]:
    c1, o1, again, a = call("c1"), output("c1", "one"), output("c1", "two"), say("x")
    trace = [begin(), c1, end(), o1, again, begin(), a, end()]
    return trace, expect(trace, history=[c1, o1, again, a], session_turns=2)


@case
def duplicate_outputs_at_the_tail_are_both_carried_over() -> tuple[list[Any], dict[str, Any]]:
    c1, o1, again = call("c1"), output("c1", "one"), output("c1", "two")
    trace = [begin(), c1, end(), o1, again]
    return trace, expect(trace, history=[c1], carry_over=[o1, again], session_turns=1)


@case
def a_duplicated_tool_call_record_is_committed_once() -> tuple[list[Any], dict[str, Any]]:
    c1, twin, o1 = call("c1"), call("c1"), output("c1")
    trace = [begin(), c1, twin, end(), o1]
    return trace, expect(trace, history=[c1, twin], carry_over=[o1], session_turns=1)


@case
def a_null_line_and_payloadless_messages_are_tolerated() -> tuple[list[Any], dict[str, Any]]:
    bare_model = envelope("model_msg")
    u = user("hi")
    trace: list[Any] = [None, u, envelope("event_msg"), begin(), bare_model, end(), [], "text", 7]
    # The reference throws a TypeError here; pentrace reads a missing payload as {}.
    return trace, expect(trace, history=[u, bare_model], session_turns=1)


@pytest.mark.parametrize("build", CASES)
def test_resume_reproduces_the_reference(build: Case) -> None:
    trace, expected = build()
    assert observed(resume_trace(records(trace))) == expected


@case
def a_tool_output_on_the_assistant_side_is_model_output() -> tuple[list[Any], dict[str, Any]]:
    c1, odd = call("c1"), output("c1", role="assistant")
    trace = [begin(), c1, odd, end()]
    # It enters history unfiltered without answering c1, so c1 is backfilled too.
    return trace, expect(trace, history=[c1, odd], carry_over=[placeholder(c1)], session_turns=1)


# --- strict pairing: the divergences that keep every call answered exactly once --------------


@strict_case
def strict_commits_calls_that_did_not_complete() -> tuple[list[Any], dict[str, Any]]:
    aborted, missing, o1, a = call("c1", "aborted"), call("c2", None), output("c1"), say("x")
    trace = [begin(), aborted, missing, end(), o1, begin(), a, end()]
    return trace, expect(
        trace, history=[aborted, missing, placeholder(missing), o1, a], session_turns=2
    )


@strict_case
def strict_drops_calls_that_cannot_be_answered() -> tuple[list[Any], dict[str, Any]]:
    empty, no_id, twin, c1, o1 = call(""), call(None), call("c1"), call("c1"), output("c1")
    trace = [begin(), empty, no_id, c1, twin, end(), o1]
    return trace, expect(trace, history=[c1], carry_over=[o1], session_turns=1)


@strict_case
def strict_keeps_only_the_first_of_duplicate_outputs() -> tuple[list[Any], dict[str, Any]]:
    c1, c2 = call("c1"), call("c2")
    o1, again1 = output("c1", "one"), output("c1", "two")
    o2, again2 = output("c2", "one"), output("c2", "two")
    trace = [begin(), c1, c2, end(), o1, again1, begin(), end(), o2, again2]
    return trace, expect(trace, history=[c1, c2, placeholder(c2), o1], session_turns=2)


@strict_case
def strict_drops_outputs_without_an_id() -> tuple[list[Any], dict[str, Any]]:
    o_in, a, o_tail = output(None, "no id"), say("ok"), output(None, "tail")
    trace = [o_in, begin(), a, end(), o_tail]
    return trace, expect(trace, history=[a], session_turns=1)


@strict_case
def strict_lets_an_assistant_side_output_answer_its_call() -> tuple[list[Any], dict[str, Any]]:
    c1, odd, stray = call("c1"), output("c1", role="assistant"), output("c9", role="assistant")
    trace = [begin(), c1, odd, stray, end()]
    return trace, expect(trace, history=[c1, odd], session_turns=1)


@strict_case
def strict_changes_nothing_on_a_legal_trace() -> tuple[list[Any], dict[str, Any]]:
    u, c1, c2, o1, a = user("go"), call("c1"), call("c2"), output("c1"), say("done")
    trace = [meta(), u, begin(), c1, c2, end(), o1, begin(), a, end(), user("more")]
    return trace, expect(
        trace,
        history=[u, c1, c2, placeholder(c2), o1, a],
        carry_over=[trace[-1]],
        session_turns=2,
    )


@pytest.mark.parametrize("build", STRICT_CASES)
def test_strict_pairing_diverges_only_to_keep_calls_paired(build: Case) -> None:
    trace, expected = build()
    assert observed(resume_trace(records(trace), strict_pairing=True)) == expected


def test_strict_and_reference_modes_agree_on_a_legal_trace() -> None:
    trace, _ = strict_changes_nothing_on_a_legal_trace()
    reference = observed(resume_trace(records(trace)))
    assert observed(resume_trace(records(trace), strict_pairing=True)) == reference
