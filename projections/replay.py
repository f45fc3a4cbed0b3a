"""

Replay view: every record of a session, placed in its request round and marked committed or not.

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

Render items: a replay's records, classified once for the readers that draw them.

``pentrace replay`` (text) and the Session page (HTML) show the same things in
the same order: a message is text, thinking, a tool call (with its approvals
and its output drawn inside it), a tool output whose call is not shown, an
image, inline data or some other message; a ``session_meta`` record opens the
session or a shard; an event is an event.  :func:`build_render_items` decides
that once per record, from the payload the reader shows (the web page passes
redacted payloads), pairs each call with its answers (:func:`pair_calls`) and
marks the records a call drew already as ``folded``.  A reader is a
:class:`Formatter`, a method per kind, and :func:`draw` picks the method; the
readers only format.

Pure: no I/O, and the same items and payloads always give the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from pentrace.domain.json_codec import json_bytes
from pentrace.domain.omnimessage.images import ImageRef, record_images
from pentrace.domain.records import TraceRecord

__all__ = [
    "CallPairs",
    "Formatter",
    "ItemKind",
    "MessageFormatter",
    "RenderItem",
    "ReplayItem",
    "as_text",
    "build_render_items",
    "build_replay",
    "draw",
    "fork_cut",
    "pair_calls",
]


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


ItemKind = Literal[
    "text",  # a text message
    "thinking",  # thinking or inline thinking, shown collapsed
    "tool_call",  # a call, with ``approvals`` and ``output``
    "tool_output",  # an output whose call is not among the items
    "image",  # a message holding ``images`` (image_url, inline image data)
    "inline_data",  # inline data that is not an image
    "message",  # a model message of another type
    "session",  # the first record: the session's meta
    "shard",  # a later shard's meta: a new context
    "round_edge",  # a request_begin, or a request_end that completed: nothing to draw
    "request_failed",  # a request_end of another status (an error, a retry)
    "event",  # another event_msg; readers name its payload type
    "record",  # an envelope of another type
]

_THINKING = ("thinking", "inline_thinking")


def as_text(value: Any) -> str:
    """A payload value as text: a string as it is, nothing as ``""``, anything else as the
    JSON the trace holds (``{"cmd": "ls"}``, ``true``), never a Python repr."""
    if isinstance(value, str):
        return value
    return "" if value is None else json_bytes(value).decode("utf-8", "backslashreplace")


@dataclass(frozen=True, slots=True)
class RenderItem:
    """One replay item as the readers draw it (module docstring).

    ``payload`` is the one the reader shows (a dict, empty when the record has
    none).  ``images`` is set for ``image`` and ``tool_output`` items.  A
    ``tool_call`` holds the items of its ``approvals`` and its first
    ``output``; those items are ``folded`` when the call came before them, and
    the readers skip them where they stand."""

    item: ReplayItem
    kind: ItemKind
    payload: dict[str, Any]
    images: tuple[ImageRef, ...] = ()
    approvals: tuple[RenderItem, ...] = ()
    output: RenderItem | None = None
    folded: bool = False

    @property
    def record(self) -> TraceRecord:
        """The trace record."""
        return self.item.record

    @property
    def position(self) -> int:
        """The record's position in the session."""
        return self.item.position

    def text(self, name: str) -> str:
        """The payload field ``name`` as text (:func:`as_text`)."""
        return as_text(self.payload.get(name))

    @property
    def thinking(self) -> str:
        """A thinking item's text (``thinking``, else ``data``)."""
        return as_text(self.payload.get("thinking", self.payload.get("data")))


def _kind(
    item: ReplayItem, payload: dict[str, Any], model_change: bool
) -> tuple[ItemKind, tuple[ImageRef, ...]]:
    record = item.record
    if record.kind == "session_meta":
        if item.position == 1:
            return "session", ()
        return ("event" if model_change else "shard"), ()
    if record.kind == "event_msg":
        if record.ptype == "request_end":
            completed = as_text(payload.get("status")) == "completed"
            return ("round_edge" if completed else "request_failed"), ()
        return ("round_edge" if record.ptype == "request_begin" else "event"), ()
    if record.kind != "model_msg":
        return "record", ()
    ptype = record.ptype
    if ptype == "text":
        return "text", ()
    if ptype in _THINKING:
        return "thinking", ()
    if ptype == "tool_call":
        return "tool_call", ()
    images = tuple(record_images(ptype, payload))
    if ptype == "tool_call_output":
        return "tool_output", images
    if images:
        return "image", images
    return ("inline_data" if ptype == "inline_data" else "message"), ()


def _model_changes(items: Sequence[ReplayItem], shown: Sequence[dict[str, Any]]) -> list[bool]:
    """Per item: a ``session_meta`` inside a shard naming another model than the one before
    (an imported session learns or changes its model so, ADR 0094), not a new context."""
    changes: list[bool] = []
    model: Any = None
    shard: int | None = None
    for item, payload in zip(items, shown, strict=True):
        change = False
        if item.record.kind == "session_meta":
            named = payload.get("model_id")
            change = shard == item.shard and named != model
            model = named
        shard = item.shard
        changes.append(change)
    return changes


def build_render_items(
    items: Sequence[ReplayItem], payloads: Sequence[Any] | None = None
) -> list[RenderItem]:
    """The render items of ``items``, one each, in order; ``payloads`` (one per item) are
    what the reader shows, by default each record's own payload."""
    shown = [
        payload if isinstance(payload, dict) else {}
        for payload in (payloads if payloads is not None else [i.record.payload() for i in items])
    ]
    kinds = [
        _kind(item, payload, changes)
        for item, payload, changes in zip(items, shown, _model_changes(items, shown), strict=True)
    ]
    pairs = pair_calls(items)
    answers: dict[int, tuple[list[int], int | None]] = {}
    folded: set[int] = set()
    for index, (kind, _) in enumerate(kinds):
        if kind == "tool_call":
            call = as_text(shown[index].get("tool_call_id"))
            approvals, output = pairs.approvals.get(call, []), pairs.outputs.get(call)
            answers[index] = (approvals, output)
            # What a call draws is skipped where it stands only after the call.
            folded.update(a for a in (*approvals, output) if a is not None and a > index)
    plain = [
        RenderItem(item, kind, payload, images, folded=index in folded)
        for index, (item, payload, (kind, images)) in enumerate(
            zip(items, shown, kinds, strict=True)
        )
    ]
    for index, (approvals, output) in answers.items():
        drawn = plain[index]
        plain[index] = RenderItem(
            drawn.item,
            drawn.kind,
            drawn.payload,
            approvals=tuple(plain[a] for a in approvals),
            output=None if output is None else plain[output],
        )
    return plain


class MessageFormatter(Protocol):
    """A reader's drawing of each kind of model message; ``None``: nothing shown."""

    def text(self, entry: RenderItem) -> str | None: ...
    def thinking(self, entry: RenderItem) -> str | None: ...
    def tool_call(self, entry: RenderItem) -> str | None: ...
    def tool_output(self, entry: RenderItem) -> str | None: ...
    def image(self, entry: RenderItem) -> str | None: ...
    def inline_data(self, entry: RenderItem) -> str | None: ...
    def message(self, entry: RenderItem) -> str | None: ...


class Formatter(MessageFormatter, Protocol):
    """A reader's drawing of every kind of item (:data:`ItemKind`, the method names), the
    records around the messages too; nothing is asked for a ``round_edge``."""

    def session(self, entry: RenderItem) -> str | None: ...
    def shard(self, entry: RenderItem) -> str | None: ...
    def request_failed(self, entry: RenderItem) -> str | None: ...
    def event(self, entry: RenderItem) -> str | None: ...
    def record(self, entry: RenderItem) -> str | None: ...


def draw(entry: RenderItem, formatter: Formatter) -> str | None:
    """What ``formatter`` draws for ``entry``: the method named by its kind; nothing for a
    ``round_edge`` (the round's header says it)."""
    if entry.kind == "round_edge":
        return None
    method: Callable[[RenderItem], str | None] = getattr(formatter, entry.kind)
    return method(entry)
