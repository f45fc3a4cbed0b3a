"""Resume: fold a session's trace into the context a new run starts from.

A pure, single-pass fold over :class:`~pentrace.domain.records.TraceRecord`
objects that reproduces PenguinHarness's ``resumeTrace`` (the observed
algorithm, ``docs/resume.md``): committed history, the carry-over resent with
the next input, the compaction closure, and the turn and token counters.

It branches on the header fields every record already carries and decodes a
payload only for the few records whose contents matter (``token_usage``, the
closing ``compaction_end``, a dangling ``compaction_begin``, the summary
request's assistant text, tool calls that need a placeholder).  Lists are
moved, never re-copied, so the fold stays linear where the reference is
quadratic.  Synthesized records (placeholders, the pending summary) exist only
in the result; the fold has no way to write them anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from pentrace.domain.records import TraceRecord
from pentrace.projections.pairing import Pairing
from pentrace.projections.summary import extract_summary, js_truthy, request_text
from pentrace.projections.synthetic import INTERRUPTED_OUTPUT, SyntheticRecord, summary_message

__all__ = [
    "INTERRUPTED_OUTPUT",
    "ResumeResult",
    "SyntheticRecord",
    "empty_token_counts",
    "resume_trace",
]

# Streaming fragments are never part of a context; any other payload type counts.
_PARTIAL_TYPES: Final = frozenset(
    {"partial_text", "partial_thinking", "partial_tool_call", "partial_tool_call_output"}
)


def empty_token_counts() -> dict[str, int]:
    """Session token counts when the trace has no ``token_usage`` with a session value."""
    return {"cache_read": 0, "cache_write": 0, "output": 0, "total": 0}


@dataclass(frozen=True, slots=True)
class ResumeResult:
    """Everything a new run needs to continue a session.

    ``history`` is committed history plus in-place placeholders; ``carry_over``
    the pending input to resend with the next run plus backfill placeholders.
    Messages are the records as they stand in the trace (``record.raw``);
    synthesized ones are :class:`SyntheticRecord`.  ``session_tokens`` is the
    last truthy ``token_usage.session`` verbatim; ``last_request_total`` the
    last truthy ``request``'s ``total`` verbatim, ``None`` where the reference
    leaves it undefined (e.g. ``request: {}``).  ``meta`` is the first
    ``session_meta`` record.  ``dangling_compaction`` holds ``reason`` and
    ``mode`` of an unmatched ``compaction_begin`` (missing fields omitted).
    """

    history: list[TraceRecord]
    carry_over: list[TraceRecord]
    context_closed: bool
    pending_summary: TraceRecord | None
    session_tokens: Any
    last_request_total: Any
    session_turns: int
    render_messages: list[TraceRecord]
    meta: TraceRecord | None
    dangling_compaction: dict[str, Any] | None


def _abort_renders(origin: Any) -> bool:
    """``(origin?.length ?? 0) === 0``: no origin or an empty one."""
    if origin is None:
        return True
    if isinstance(origin, list | str):
        return len(origin) == 0
    if isinstance(origin, dict):
        length = origin.get("length")
        return length is None or (type(length) in (int, float) and length == 0)
    return True


def _drop(
    snapshot: list[TraceRecord], clean: int, pending: list[TraceRecord], in_compaction: bool
) -> tuple[list[TraceRecord], int]:
    """Return an uncommitted round's input to the front of ``pending``.

    Inside a compaction span only tool outputs are reclaimed.  ``clean`` counts
    the leading snapshot items already known to be tool outputs, so each item
    is filtered at most once however often its round fails.
    """
    if in_compaction and clean < len(snapshot):
        tail = [
            m
            for m in snapshot[clean:]
            if m.ptype == "tool_call_output" and m.tool_call_id is not None
        ]
        del snapshot[clean:]
        snapshot.extend(tail)
        clean = len(snapshot)
    snapshot.extend(pending)
    return snapshot, clean


def resume_trace(records: Iterable[TraceRecord], *, strict_pairing: bool = False) -> ResumeResult:
    """Fold a trace (one shard's records, in order) into a :class:`ResumeResult`.

    ``strict_pairing`` makes every tool call in ``history + carry_over`` answered
    exactly once, after it, with no orphan outputs, even on inputs the
    reference leaves unpaired (``docs/resume.md``, divergences).  The default
    reproduces the reference exactly.
    """
    pairing = Pairing(strict_pairing)
    history: list[TraceRecord] = []
    render: list[TraceRecord] = []
    pending: list[TraceRecord] = []
    snapshot: list[TraceRecord] = []
    outputs: list[TraceRecord] = []
    pending_clean = snapshot_clean = 0
    # The outputs of the last begun request, and of the last completed one: the
    # closure summary is read from the latter (an empty completed request wins).
    begun_outputs = outputs
    summary_outputs: list[TraceRecord] = []
    token_usages: list[TraceRecord] = []
    meta: TraceRecord | None = None
    dangling: TraceRecord | None = None
    last: TraceRecord | None = None
    in_request = in_compaction = False
    turns = 0
    partial_types = _PARTIAL_TYPES

    for record in records:
        last = record
        kind = record.kind
        if kind == "model_msg":
            head = record.head
            ptype = head.type
            if ptype.__class__ is str and ptype in partial_types:
                continue
            render.append(record)
            if head.role == "user":
                pending.append(record)
            elif in_request:
                outputs.append(record)
        elif kind == "event_msg":
            head = record.head
            ptype = head.type
            if ptype == "request_begin":
                if in_request:
                    pending, pending_clean = _drop(snapshot, snapshot_clean, pending, in_compaction)
                snapshot, snapshot_clean = pending, pending_clean
                pending, pending_clean = [], 0
                outputs = begun_outputs = []
                in_request = True
            elif ptype == "request_end":
                if head.status == "completed":
                    pairing.commit_round(snapshot, outputs, history)
                    summary_outputs = begun_outputs
                    if not in_compaction:
                        turns += 1
                elif in_request:
                    pending, pending_clean = _drop(snapshot, snapshot_clean, pending, in_compaction)
                snapshot, snapshot_clean = [], 0
                outputs = []
                in_request = False
            elif ptype == "token_usage":
                token_usages.append(record)
            elif ptype == "compaction_begin":
                in_compaction = True
                dangling = record
            elif ptype == "compaction_end":
                in_compaction = False
                dangling = None
            elif ptype == "abort" and _abort_renders(record.origin):
                render.append(record)
        elif kind == "session_meta" and meta is None:
            meta = record

    session_tokens, last_request_total = _token_counters(token_usages)
    if (
        last is not None
        and last.kind == "event_msg"
        and last.ptype == "compaction_end"
        and last.status == "completed"
    ):
        closed = _closure(last, summary_outputs, session_tokens, meta)
        if closed is not None:
            return closed

    if in_request:
        pending, pending_clean = _drop(snapshot, snapshot_clean, pending, in_compaction)
    return ResumeResult(
        history=history,
        carry_over=pairing.backfill(pending),
        context_closed=False,
        pending_summary=None,
        session_tokens=session_tokens,
        last_request_total=last_request_total,
        session_turns=turns,
        render_messages=render,
        meta=meta,
        dangling_compaction=_dangling(dangling),
    )


def _closure(
    last: TraceRecord,
    summary_outputs: list[TraceRecord],
    session_tokens: Any,
    meta: TraceRecord | None,
) -> ResumeResult | None:
    """The closed-context result, or ``None`` when a textless summary voids the closure."""
    pending_summary: TraceRecord | None = None
    if last.payload().get("mode") == "summarize":
        summary = extract_summary(request_text(summary_outputs))
        if not summary:
            return None
        pending_summary = summary_message(summary, last)
    return ResumeResult(
        history=[],
        carry_over=[],
        context_closed=True,
        pending_summary=pending_summary,
        session_tokens=session_tokens,
        last_request_total=0,
        session_turns=0,
        render_messages=[],
        meta=meta,
        dangling_compaction=None,
    )


def _token_counters(token_usages: list[TraceRecord]) -> tuple[Any, Any]:
    """``(session_tokens, last_request_total)`` from two independent backwards scans."""
    session: Any = None
    request: Any = None
    found_session = found_request = False
    for record in reversed(token_usages):
        payload = record.payload()
        if not found_session and js_truthy(payload.get("session")):
            session, found_session = payload["session"], True
        if not found_request and js_truthy(payload.get("request")):
            request, found_request = payload["request"], True
        if found_session and found_request:
            break
    if not found_session:
        session = empty_token_counts()
    if not found_request:
        return session, 0
    # ``request.total`` of an array, a string or ``{}`` is undefined in JavaScript.
    return session, request.get("total") if isinstance(request, dict) else None


def _dangling(begin: TraceRecord | None) -> dict[str, Any] | None:
    if begin is None:
        return None
    payload = begin.payload()
    return {key: payload[key] for key in ("reason", "mode") if key in payload}
