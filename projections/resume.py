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

The ``resume-check --json`` contract: a resume result as one JSON object.

Messages are embedded as the envelopes exactly as they stand in the trace
(``msgspec.Raw`` of each record's bytes), so numbers, key order and opaque
``fidelity`` blobs come out byte for byte.  Synthesized records are embedded
the same way and flagged *outside* the envelopes, in ``synthesized``.  Fields
are only ever added (``docs/resume.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgspec

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.projections.pairing import Pairing
from pentrace.projections.summary import extract_summary, js_truthy, request_text
from pentrace.projections.synthetic import INTERRUPTED_OUTPUT, SyntheticRecord, summary_message

__all__ = [
    "INTERRUPTED_OUTPUT",
    "ParseReportLike",
    "ResumeResult",
    "SyntheticRecord",
    "closes_context",
    "empty_token_counts",
    "encode_resume_report",
    "resume_closed",
    "resume_report",
    "resume_trace",
]


# token_usage records held before the tail is cut down to the two the counters need.
_TOKEN_TAIL: Final = 64
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
    token_usages = _TokenScan()
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
                token_usages.add(record)
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

    session_tokens, last_request_total = token_usages.counters()
    if closes_context(last):
        assert last is not None  # for mypy: closes_context is false for None
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


def closes_context(last: TraceRecord | None) -> bool:
    """True when ``last``, the last parsed record, closes the context: a completed
    ``compaction_end``.  (A summarize closure whose request left no summary is void.)"""
    return (
        last is not None
        and last.kind == "event_msg"
        and last.ptype == "compaction_end"
        and last.status == "completed"
    )


def resume_closed(records: Iterable[TraceRecord]) -> ResumeResult | None:
    """:func:`resume_trace` for a trace known to end in a closure, holding only what it reads.

    A closed context returns no history, so this fold keeps no messages but
    the outputs of the last completed request (the summary's source), the
    first ``session_meta`` and the token counters.  It returns ``None`` when
    the trace does not end in a closure after all, or the closure is void;
    :func:`resume_trace` then gives the result.  The two agree on every trace
    that closes (``tests/property/test_resume_fold.py``).
    """
    outputs: list[TraceRecord] = []
    begun_outputs = outputs
    summary_outputs: list[TraceRecord] = []
    token_usages = _TokenScan()
    meta: TraceRecord | None = None
    last: TraceRecord | None = None
    in_request = False
    partial_types = _PARTIAL_TYPES
    for record in records:
        last = record
        kind = record.kind
        if kind == "model_msg":
            head = record.head
            ptype = head.type
            if ptype.__class__ is str and ptype in partial_types:
                continue
            if head.role != "user" and in_request:
                outputs.append(record)
        elif kind == "event_msg":
            ptype = record.head.type
            if ptype == "request_begin":
                outputs = begun_outputs = []
                in_request = True
            elif ptype == "request_end":
                if record.head.status == "completed":
                    summary_outputs = begun_outputs
                outputs = []
                in_request = False
            elif ptype == "token_usage":
                token_usages.add(record)
        elif kind == "session_meta" and meta is None:
            meta = record
    if last is None or not closes_context(last):
        return None
    return _closure(last, summary_outputs, token_usages.counters()[0], meta)


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


class _TokenScan:
    """The two backwards scans for token counters, kept in bounded memory while folding forwards.

    Every ``token_usage`` record is added in order; once more than
    :data:`_TOKEN_TAIL` wait, only the two a backwards scan over them would
    stop at (the last truthy ``session``, the last truthy ``request``) are
    kept, so a trace of nothing but token events costs a constant.
    """

    __slots__ = ("tail",)

    def __init__(self) -> None:
        self.tail: list[TraceRecord] = []

    def add(self, record: TraceRecord) -> None:
        self.tail.append(record)
        if len(self.tail) > _TOKEN_TAIL:
            session, request = self._found()
            # In trace order: the backwards scans over the kept two find the same records.
            self.tail = [r for r in self.tail if r is session or r is request]

    def _found(self) -> tuple[TraceRecord | None, TraceRecord | None]:
        """The records holding the last truthy ``session`` and the last truthy ``request``."""
        session: TraceRecord | None = None
        request: TraceRecord | None = None
        for record in reversed(self.tail):
            payload = record.payload()
            if session is None and js_truthy(payload.get("session")):
                session = record
            if request is None and js_truthy(payload.get("request")):
                request = record
            if session is not None and request is not None:
                break
        return session, request

    def counters(self) -> tuple[Any, Any]:
        """``(session_tokens, last_request_total)`` as the reference's two scans give them."""
        session, request = self._found()
        tokens = empty_token_counts() if session is None else session.payload()["session"]
        if request is None:
            return tokens, 0
        value = request.payload()["request"]
        # ``request.total`` of an array, a string or ``{}`` is undefined in JavaScript.
        return tokens, value.get("total") if isinstance(value, dict) else None


def _dangling(begin: TraceRecord | None) -> dict[str, Any] | None:
    if begin is None:
        return None
    payload = begin.payload()
    return {key: payload[key] for key in ("reason", "mode") if key in payload}


_encoder = JsonEncoder()


class _LineLike(Protocol):
    @property
    def line(self) -> int: ...


class ParseReportLike(Protocol):
    """What the report needs from a reader's parse report (``trace_reader.ParseReport``)."""

    @property
    def skipped(self) -> Sequence[_LineLike]: ...

    @property
    def skipped_count(self) -> int: ...

    @property
    def torn_tails(self) -> Sequence[_LineLike]: ...


def _raw(record: TraceRecord | None) -> msgspec.Raw | None:
    return None if record is None else msgspec.Raw(record.raw)


def _synthesized(records: list[TraceRecord]) -> list[int]:
    return [index for index, record in enumerate(records) if isinstance(record, SyntheticRecord)]


def _parse_section(report: ParseReportLike | None) -> dict[str, Any] | None:
    if report is None:
        return None
    torn = report.torn_tails
    return {
        "skipped_lines": [bad.line for bad in report.skipped],
        "skipped_count": report.skipped_count,
        "torn_tail": torn[-1].line if torn else None,
    }


def resume_report(
    result: ResumeResult, parse_report: ParseReportLike | None = None
) -> dict[str, Any]:
    """The JSON-ready report of ``result``; message values are ``msgspec.Raw``.

    ``parse`` is ``None`` when no parse report is given.  ``last_request_total``
    is ``null`` where the reference leaves it undefined.
    """
    return {
        "history": [msgspec.Raw(record.raw) for record in result.history],
        "carry_over": [msgspec.Raw(record.raw) for record in result.carry_over],
        "context_closed": result.context_closed,
        "pending_summary": _raw(result.pending_summary),
        "session_tokens": result.session_tokens,
        "last_request_total": result.last_request_total,
        "session_turns": result.session_turns,
        "render_messages": [msgspec.Raw(record.raw) for record in result.render_messages],
        "meta": _raw(result.meta),
        "dangling_compaction": result.dangling_compaction,
        "synthesized": {
            "history": _synthesized(result.history),
            "carry_over": _synthesized(result.carry_over),
        },
        "parse": _parse_section(parse_report),
    }


def encode_resume_report(
    result: ResumeResult, parse_report: ParseReportLike | None = None
) -> bytes:
    """:func:`resume_report` encoded as compact JSON bytes."""
    return _encoder.encode(resume_report(result, parse_report))
