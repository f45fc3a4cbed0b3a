"""The replay view and fork cuts on generated legal sessions."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.records import TraceRecord, decode_line
from pentrace.projections.replay import ReplayItem, build_replay, fork_cut
from pentrace.projections.session_summary import SessionSummary, summarize_session
from pentrace.testing import Command, render_shards, session_commands


def _items(commands: list[Command]) -> list[ReplayItem]:
    pairs: list[tuple[int, TraceRecord]] = []
    for index, lines in enumerate(render_shards(commands), start=1):
        for line in lines:
            record = decode_line(line)
            assert record is not None
            pairs.append((index, record))
    return build_replay(pairs)


def _closes_every_round(summary: SessionSummary) -> None:
    """No request is left open, no compaction dangles, every request kept completed."""
    assert summary.requests["open"] == 0
    assert summary.dangling_compactions == 0
    assert summary.requests["completed"] == sum(summary.requests.values())


def _forks(test: Callable[[list[Command], st.DataObject], None]) -> Callable[..., None]:
    """Run a fork property 80 times on generated sessions, with draws for the fork point."""
    return settings(max_examples=80, deadline=None)(given(session_commands(), st.data())(test))


def _kept(items: list[ReplayItem], cut: int) -> list[TraceRecord]:
    return [item.record for item in items[:cut] if item.committed]


@settings(max_examples=80, deadline=None)
@given(session_commands())
def test_every_record_is_placed_once_and_turns_match_the_summary(commands: list[Command]) -> None:
    items = _items(commands)
    records = [item.record for item in items]

    assert [item.position for item in items] == list(range(1, len(items) + 1))
    assert {item.state for item in items} <= {"committed", "dropped", "open", "pending"}
    assert max((i.turn for i in items), default=0) == summarize_session(records).turns
    # A round is all of one state.
    by_round: dict[int, set[str]] = {}
    for item in items:
        if item.round is not None:
            by_round.setdefault(item.round, set()).add(item.state)
    assert all(len(states) == 1 for states in by_round.values())


@_forks
def test_a_fork_at_a_turn_keeps_exactly_that_many_closed_turns(
    commands: list[Command], data: st.DataObject
) -> None:
    items = _items(commands)
    turns = max((i.turn for i in items), default=0)
    if turns == 0:
        return
    turn = data.draw(st.integers(1, turns))

    summary = summarize_session(_kept(items, fork_cut(items, at_turn=turn, at_event=None)))

    assert summary.turns == turn
    _closes_every_round(summary)


@_forks
def test_a_fork_at_an_event_never_splits_a_round_or_a_compaction(
    commands: list[Command], data: st.DataObject
) -> None:
    items = _items(commands)
    event = data.draw(st.integers(1, len(items)))

    cut = fork_cut(items, at_turn=None, at_event=event)
    summary = summarize_session(_kept(items, cut))

    assert cut <= event
    _closes_every_round(summary)
