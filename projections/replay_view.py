"""Replay view: every record of a session, placed in its request round and marked committed or not.

A pure fold for reading a session back (``pentrace replay``) and for cutting
one (``pentrace fork``).  Records arrive as ``(shard_index, record)`` pairs in
trace order; positions are counted across shards (``docs/architecture.md``).

Each record gets a **state**:

* ``committed`` - part of the history resume would restore: a record of a
  round whose ``request_end.status`` is ``"completed"``, or a record outside
  any round (user input that a later completed round sent, token usage,
  compaction events, ...);
* ``dropped`` - a record of a round that ended with another status, or that
  a new ``request_begin`` cut off (resume drops these rounds);
* ``open`` - a record of a round the trace stops in (a crash, or a live run);
* ``pending`` - a model message outside any round after the last completed
  round: input no committed request has sent yet (resume's carry-over).

``turn`` is the committed turn a record belongs to, counted with resume's
rule (a completed ``request_end`` outside a compaction span); records outside
a turn carry the number of turns completed before them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from pentrace.domain.records import TraceRecord

__all__ = ["CallPairs", "ReplayItem", "build_replay", "fork_cut", "pair_calls"]

_COMPLETED: Final = "completed"


@dataclass(slots=True)
class ReplayItem:
    """One record in its place: position, shard, round, state and turn (see the module doc)."""

    position: int
    shard: int
    record: TraceRecord
    round: int | None
    state: str
    status: str | None
    turn: int
    in_compaction: bool

    @property
    def committed(self) -> bool:
        """True for records of the committed history."""
        return self.state == "committed"


@dataclass(slots=True)
class CallPairs:
    """Where each tool call's answer is in a list of items: ``outputs`` maps a call id to the
    index of its first ``tool_call_output``, ``approvals`` to those of its decisions."""

    outputs: dict[str, int]
    approvals: dict[str, list[int]]


def pair_calls(items: Sequence[ReplayItem]) -> CallPairs:
    """The outputs and approvals of the tool calls in ``items`` (readers draw them together)."""
    pairs = CallPairs({}, {})
    for index, item in enumerate(items):
        record = item.record
        call_id = record.tool_call_id
        if not isinstance(call_id, str):
            continue
        if record.kind == "model_msg" and record.ptype == "tool_call_output":
            pairs.outputs.setdefault(call_id, index)
        elif record.kind == "event_msg" and record.ptype == "approval_decision":
            pairs.approvals.setdefault(call_id, []).append(index)
    return pairs


def build_replay(records: Iterable[tuple[int, TraceRecord]]) -> list[ReplayItem]:
    """Place every record of a session (``(shard_index, record)`` in order) in its round."""
    items: list[ReplayItem] = []
    open_round: list[ReplayItem] = []
    rounds = turns = 0
    in_request = in_compaction = False
    last_commit = -1
    for position, (shard, record) in enumerate(records, start=1):
        kind, ptype = record.kind, record.ptype
        is_event = kind == "event_msg"
        if is_event and ptype == "request_begin":
            if in_request:
                _close(open_round, "dropped", None, turns)
            rounds += 1
            in_request = True
            open_round = []
        round_number = rounds if in_request else None
        item = ReplayItem(position, shard, record, round_number, "committed", None, turns, False)
        item.in_compaction = in_compaction
        items.append(item)
        if in_request:
            open_round.append(item)
        if not is_event:
            continue
        if ptype == "request_end":
            completed = record.status == _COMPLETED
            if completed and not in_compaction:
                turns += 1
            status = record.status if isinstance(record.status, str) else None
            if not in_request:
                # A stray end: resume counts a completed one; it is its own round.
                item.status = status
                item.turn = turns
            _close(open_round, "committed" if completed else "dropped", status, turns)
            if completed:
                last_commit = len(items) - 1
            open_round = []
            in_request = False
        elif ptype == "compaction_begin":
            in_compaction = True
            item.in_compaction = True
        elif ptype == "compaction_end":
            in_compaction = False
    if in_request:
        _close(open_round, "open", None, turns)
    for item in items[last_commit + 1 :]:
        if item.round is None and item.record.kind == "model_msg":
            item.state = "pending"
    return items


def _close(round_items: list[ReplayItem], state: str, status: str | None, turn: int) -> None:
    for item in round_items:
        item.state = state
        item.status = status
        if state == "committed":
            item.turn = turn


def fork_cut(items: list[ReplayItem], *, at_turn: int | None, at_event: int | None) -> int:
    """How many leading items a fork keeps: a cut that never splits a round or a compaction.

    ``at_turn`` keeps everything up to the ``request_end`` that completes that
    turn, plus the ``token_usage`` records right after it.  ``at_event`` keeps
    positions up to and including it, moved back to the last point where no
    round and no compaction is open.  Exactly one of the two must be given;
    the caller checks the range.
    """
    if at_turn is not None:
        cut = 0
        for index, item in enumerate(items):
            record = item.record
            if (
                record.kind == "event_msg"
                and record.ptype == "request_end"
                and item.committed
                and not item.in_compaction
                and item.turn == at_turn
            ):
                cut = index + 1
                while cut < len(items) and items[cut].record.ptype == "token_usage":
                    cut += 1
                return cut
        return cut
    limit = at_event if at_event is not None else len(items)
    cut = 0
    in_compaction = False
    for index, item in enumerate(items[:limit]):
        record = item.record
        if record.kind == "event_msg" and record.ptype == "compaction_begin":
            in_compaction = True
        elif record.kind == "event_msg" and record.ptype == "compaction_end":
            in_compaction = False
        inside_round = item.round is not None and not _ends_round(item)
        if not inside_round and not in_compaction:
            cut = index + 1
    return cut


def _ends_round(item: ReplayItem) -> bool:
    return bool(item.record.kind == "event_msg" and item.record.ptype == "request_end")
