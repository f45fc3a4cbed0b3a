"""A session at a glance: one pure fold over its trace records.

:class:`SummaryFold` takes a session's :class:`~pentrace.domain.records.TraceRecord`
objects in order (every shard, ``_001`` first) and :meth:`SummaryFold.finish`
returns a :class:`SessionSummary`.  Feeding the records in one batch or in
many gives the same summary.  The fold branches on the header fields every
record already carries and decodes a payload only where a value is needed
(the first ``session_meta``, tool call names, approvals, compactions, goals,
subagent pointers, and the last ``token_usage``), so it stays cheap enough
to run over every session for ``pentrace sessions list``.

Definitions (they are the CLI's ``--json`` contract, ``docs/cli-json.md``).
Requests (by how they ended, ``other`` and ``open`` included), turns,
tokens, duration and the model name are defined once, below (the numbers),
and every surface reads them; ``tokens`` here keeps the ``session`` counts
of the last ``token_usage`` that has them, as resume reads them (its
carry-over).  On a shard without a closing compaction ``turns`` equals
``ResumeResult.session_turns``.  Beyond those:

* a **tool call fails** when the first output answering it states a
  ``stop_reason`` other than ``completed`` (outputs usually state none); it is
  **unanswered** when no output names its id.
* **has_errors** is true when a request ended ``failed``, ``timeout``,
  ``malformed`` or ``auth``, a tool call failed, a compaction ended other than
  ``completed``, or a compaction is dangling.  Aborts are the user's choice,
  not errors.
* a **compaction span** opens at a ``compaction_begin`` and closes at the
  next ``compaction_end`` with its status; a second begin before an end
  leaves the first span *dangling* (status ``open``), as does a span still
  open when the trace stops.  :class:`CompactionTally` counts them by mode
  and status.

The numbers: one set per session, the definitions every surface reads (issue #13).

``pentrace sessions list``, ``show``, ``stats``, ``report``, the HTTP API
and the analytics read models all answer "how many requests, turns, tokens,
how long, which model" from these rules, so two screens never give two
answers to one question:

* **requests** are the requests that began (``request_begin``), counted by
  how they ended: the ``request_end`` status (``other`` for an unknown one),
  ``open`` when none came.  The total is their sum.
* **turns** are requests that ended exactly ``"completed"`` outside a
  compaction span (resume's rule, ``docs/resume.md``).
* **tokens** are the sum of the ``request`` counts of *every* ``token_usage``
  record, committed or not (a failed request still used tokens): fresh
  input is what ``total`` leaves after output and the two cache counts,
  never below zero.  The harness's running ``session`` counts are resume's
  carry-over, shown apart as such.
* **duration** runs from the first record's timestamp to the last one's.
* the **model** is ``provider/model_id`` of the first ``session_meta``
  (``model_id`` alone without a provider).

:func:`numbers_of` reads them off a :class:`SessionSummary`; the analytics
projections apply :func:`token_delta` and :func:`model_name` per event.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from pentrace.domain.records import TraceRecord
from pentrace.projections.resume import empty_token_counts
from pentrace.projections.summary import js_truthy

__all__ = [
    "ERROR_STATUSES",
    "REQUEST_STATUSES",
    "TOKEN_FIELDS",
    "CompactionCount",
    "CompactionTally",
    "SessionNumbers",
    "SessionSummary",
    "SummaryFold",
    "TokenDelta",
    "ToolStats",
    "add_tokens",
    "duration_seconds",
    "model_name",
    "numbers_of",
    "parse_timestamp",
    "summarize_session",
    "token_count",
    "token_delta",
]


class CompactionCount(msgspec.Struct, kw_only=True):
    """How many compactions of one mode ended with one status (``open``: no end yet)."""

    mode: str
    status: str
    count: int


class CompactionTally:
    """The spans seen so far; :meth:`counts` may be read and the tally fed again."""

    def __init__(self) -> None:
        self._open: tuple[str, str] | None = None
        self._counts: dict[tuple[str, str], int] = {}
        self._dangling = 0

    @property
    def in_span(self) -> bool:
        """True between a begin and its end."""
        return self._open is not None

    def begin(self, mode: str) -> None:
        """A span of ``mode`` opens; one still open dangles."""
        if self._open is not None:
            self._count(self._open[0], "open")
            self._dangling += 1
        self._open = (mode, "open")

    def end(self, mode: Any, status: str) -> None:
        """The open span ends with ``status``; an end without a mode takes the begin's."""
        if not isinstance(mode, str):
            mode = self._open[0] if self._open is not None else "unknown"
        self._count(mode, status)
        self._open = None

    def counts(self) -> tuple[list[CompactionCount], int]:
        """Every ``(mode, status)`` count, sorted, and how many spans dangle (the open one too)."""
        counts = dict(self._counts)
        dangling = self._dangling
        if self._open is not None:
            counts[self._open] = counts.get(self._open, 0) + 1
            dangling += 1
        listed = [
            CompactionCount(mode=mode, status=status, count=count)
            for (mode, status), count in sorted(counts.items())
        ]
        return listed, dangling

    def _count(self, mode: str, status: str) -> None:
        key = (mode, status)
        self._counts[key] = self._counts.get(key, 0) + 1


REQUEST_STATUSES: Final = ("completed", "failed", "aborted", "timeout", "malformed", "auth")
ERROR_STATUSES: Final = frozenset({"failed", "timeout", "malformed", "auth"})
_COMPLETED: Final = "completed"
_TOKEN_KEYS: Final = ("cache_read", "cache_write", "output", "total")
TOKEN_FIELDS: Final = ("input", "output", "cache_read", "cache_write", "total")


class ToolStats(msgspec.Struct, kw_only=True):
    """One tool's calls, failed calls and calls no output ever answered."""

    calls: int = 0
    failures: int = 0
    unanswered: int = 0


class SessionSummary(msgspec.Struct, kw_only=True):
    """Everything ``pentrace show`` prints about a session; fields are only ever added.

    Meta fields come from the first ``session_meta`` (``None`` when absent or
    not a string).  ``first_timestamp``/``last_timestamp`` are the first and
    last records' timestamps as written.  ``forked_from`` is the
    ``session_meta.forked_from`` object a fork writes, ``imported_from`` the one an
    import under a new id writes, else ``None``.
    """

    session_id: str | None = None
    provider: str | None = None
    model_id: str | None = None
    workspace: str | None = None
    source: str | None = None
    forked_from: dict[str, Any] | None = None
    imported_from: dict[str, Any] | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    records: int = 0
    requests: dict[str, int] = msgspec.field(default_factory=dict)
    turns: int = 0
    tokens: dict[str, Any] = msgspec.field(default_factory=empty_token_counts)
    token_totals: dict[str, int] = msgspec.field(
        default_factory=lambda: dict.fromkeys(TOKEN_FIELDS, 0)
    )
    last_request_status: str | None = None
    tool_calls: dict[str, ToolStats] = msgspec.field(default_factory=dict)
    approvals: dict[str, int] = msgspec.field(default_factory=dict)
    compactions: list[CompactionCount] = msgspec.field(default_factory=list)
    dangling_compactions: int = 0
    aborts: int = 0
    subagents: list[str] = msgspec.field(default_factory=list)
    goals: dict[str, int] = msgspec.field(default_factory=dict)
    has_errors: bool = False
    #: Per model (``provider/model_id`` as the token read models name it, ``unknown`` before
    #: any model): fresh input, output, cache read, cache write.  What a session costs.
    model_tokens: dict[str, list[int]] | None = None

    @property
    def total_tokens(self) -> int:
        """The session's token total: every request's, summed (``session_numbers``)."""
        return int(self.token_totals.get("total", 0))

    @property
    def tool_failures(self) -> int:
        """Failed tool calls over every tool."""
        return sum(stats.failures for stats in self.tool_calls.values())


_NO_MODEL: Final = (None, "", "unknown")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _key(value: Any) -> str:
    """A dictionary key for a payload value (a status, a decision, a tool name)."""
    return value if isinstance(value, str) else "unknown"


def _timestamp(record: TraceRecord) -> str | None:
    value = record.value()
    return _text(value.get("timestamp")) if isinstance(value, dict) else None


class SummaryFold:
    """The incremental fold: :meth:`feed` records in order, then :meth:`finish`."""

    def __init__(self) -> None:
        self._meta_seen = False
        self._summary = SessionSummary()
        self._first: TraceRecord | None = None
        self._last: TraceRecord | None = None
        self._tokens: TraceRecord | None = None
        self._token_totals = dict.fromkeys(TOKEN_FIELDS, 0)
        self._in_request = False
        self._compactions = CompactionTally()
        self._call_names: dict[Any, str] = {}
        self._answered: set[Any] = set()
        self._requests = dict.fromkeys((*REQUEST_STATUSES, "other", "open"), 0)
        self._subagents: dict[str, None] = {}
        self._model = "unknown"
        self._model_tokens: dict[str, list[int]] = {}

    def feed(self, records: Iterable[TraceRecord]) -> None:
        """Fold more records (the next ones of the same session, in order)."""
        summary = self._summary
        for record in records:
            summary.records += 1
            if self._first is None:
                self._first = record
            self._last = record
            kind = record.kind
            if kind == "event_msg":
                self._event(record)
            elif kind == "model_msg":
                ptype = record.ptype
                if ptype == "tool_call":
                    self._tool_call(record)
                elif ptype == "tool_call_output":
                    self._tool_output(record)
            elif kind == "session_meta":
                meta = record.payload()
                self._model = model_name(meta.get("provider"), meta.get("model_id")) or "unknown"
                if not self._meta_seen:
                    self._meta(record)
                elif self._summary.model_id in _NO_MODEL:
                    self._later_model(record)

    def _meta(self, record: TraceRecord) -> None:
        self._meta_seen = True
        payload = record.payload()
        summary = self._summary
        summary.session_id = _text(payload.get("session_id"))
        summary.provider = _text(payload.get("provider"))
        summary.model_id = _text(payload.get("model_id"))
        summary.workspace = _text(payload.get("workspace"))
        summary.source = _text(payload.get("source"))
        forked = payload.get("forked_from")
        summary.forked_from = forked if isinstance(forked, dict) else None
        imported = payload.get("imported_from")
        summary.imported_from = imported if isinstance(imported, dict) else None

    def _later_model(self, record: TraceRecord) -> None:
        """A session that began without naming its model (an imported Claude Code session
        learns it from its first answer, ADR 0094) takes the first model a later
        ``session_meta`` names."""
        payload = record.payload()
        model_id = _text(payload.get("model_id"))
        if model_id not in _NO_MODEL:
            self._summary.model_id = model_id
            self._summary.provider = _text(payload.get("provider"))

    def _event(self, record: TraceRecord) -> None:
        ptype = record.ptype
        summary = self._summary
        if ptype == "request_begin":
            if self._in_request:
                self._requests["open"] += 1
            self._in_request = True
        elif ptype == "request_end":
            status = record.status
            # A status of another shape (an object, a list) is "other", never a crash.
            status = status if isinstance(status, str) else None
            name = status if status in REQUEST_STATUSES else "other"
            self._requests[name] += 1
            summary.last_request_status = _key(status)
            if status == _COMPLETED and not self._compactions.in_span:
                summary.turns += 1
            if status in ERROR_STATUSES:
                summary.has_errors = True
            self._in_request = False
        elif ptype == "token_usage":
            payload = record.payload()
            if js_truthy(payload.get("session")):
                self._tokens = record
            delta = token_delta(payload)
            if delta is not None:
                add_tokens(self._token_totals, delta)
                counts = self._model_tokens.setdefault(self._model, [0, 0, 0, 0])
                for index in range(4):
                    counts[index] += delta[index]
        elif ptype == "approval_decision":
            decision = _key(record.payload().get("decision"))
            summary.approvals[decision] = summary.approvals.get(decision, 0) + 1
        elif ptype == "compaction_begin":
            self._compactions.begin(_key(record.payload().get("mode")))
        elif ptype == "compaction_end":
            status = _key(record.status)
            self._compactions.end(record.payload().get("mode"), status)
            if status != _COMPLETED:
                summary.has_errors = True
        elif ptype == "abort":
            summary.aborts += 1
        elif ptype == "subagent":
            child = record.payload().get("session_id")
            if isinstance(child, str):
                self._subagents.setdefault(child, None)
        elif ptype == "goal_finished":
            outcome = _key(record.payload().get("outcome"))
            summary.goals[outcome] = summary.goals.get(outcome, 0) + 1

    def _tool_call(self, record: TraceRecord) -> None:
        name = _key(record.payload().get("name"))
        stats = self._summary.tool_calls.get(name)
        if stats is None:
            stats = self._summary.tool_calls[name] = ToolStats()
        stats.calls += 1
        call_id = record.tool_call_id
        if isinstance(call_id, str) and call_id not in self._call_names:
            self._call_names[call_id] = name

    def _tool_output(self, record: TraceRecord) -> None:
        call_id = record.tool_call_id
        if not isinstance(call_id, str) or call_id in self._answered:
            return
        self._answered.add(call_id)
        name = self._call_names.get(call_id)
        stop = record.stop_reason
        # Outputs usually carry no stop_reason at all; only a stated non-completed one is a failure.
        if name is not None and stop is not None and stop != _COMPLETED:
            self._summary.tool_calls[name].failures += 1
            self._summary.has_errors = True

    def finish(self) -> SessionSummary:
        """The summary of everything fed so far (the fold may be fed again afterwards)."""
        summary = msgspec.structs.replace(
            self._summary,
            requests=dict(self._requests),
            tool_calls={
                name: ToolStats(calls=s.calls, failures=s.failures)
                for name, s in sorted(self._summary.tool_calls.items())
            },
            approvals=dict(sorted(self._summary.approvals.items())),
            goals=dict(sorted(self._summary.goals.items())),
            subagents=list(self._subagents),
            token_totals=dict(self._token_totals),
            model_tokens={name: list(counts) for name, counts in self._model_tokens.items()},
        )
        if self._in_request:
            summary.requests["open"] += 1
            summary.last_request_status = "open"
        for call_id, name in self._call_names.items():
            if call_id not in self._answered:
                summary.tool_calls[name].unanswered += 1
        summary.compactions, summary.dangling_compactions = self._compactions.counts()
        if summary.dangling_compactions:
            summary.has_errors = True
        summary.tokens = self._token_counts()
        if self._first is not None:
            summary.first_timestamp = _timestamp(self._first)
        if self._last is not None:
            summary.last_timestamp = _timestamp(self._last)
        return summary

    def _token_counts(self) -> dict[str, Any]:
        if self._tokens is None:
            return empty_token_counts()
        session = self._tokens.payload().get("session")
        if isinstance(session, dict):
            return {key: token_count(session.get(key, 0)) for key in _TOKEN_KEYS}
        return empty_token_counts()


def summarize_session(records: Iterable[TraceRecord]) -> SessionSummary:
    """Fold a whole session's records (all shards, in order) into a :class:`SessionSummary`."""
    fold = SummaryFold()
    fold.feed(records)
    return fold.finish()


TokenDelta = tuple[int, int, int, int, int]
"""(input, output, cache_read, cache_write, total) of one request."""
_UNKNOWN: Final = frozenset({"", "unknown"})


class SessionNumbers(msgspec.Struct, kw_only=True):
    """A session's headline numbers, as every surface shows them."""

    requests: dict[str, int]
    request_total: int
    turns: int
    tokens: dict[str, int]
    duration_s: float | None
    model: str | None


_MAX_COUNT: Final = 2**63 - 1  # what a BIGINT column holds


def _finite(value: Any) -> int | float | None:
    """``value`` when it is a finite number >= 0 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if value >= 0 else None


def token_count(value: Any) -> int | float:
    """A token count as written when it is a finite number >= 0, else 0.

    Counts of other shapes (``1e400`` read as infinity, ``-5``, ``true``,
    ``"12"``, an object) count as nothing rather than failing every command
    that adds them up.
    """
    number = _finite(value)
    return 0 if number is None else number


def _count(value: Any) -> int:
    """A count as an int: 0 for anything but a finite number in 0..2**63-1 (1e400, -5, "7")."""
    number = _finite(value)
    count = 0 if number is None else int(number)
    return count if count <= _MAX_COUNT else 0


def token_delta(payload: dict[str, Any]) -> TokenDelta | None:
    """The request's token counts of a ``token_usage`` payload, or None without them."""
    request = payload.get("request")
    if not isinstance(request, dict):
        return None
    output = _count(request.get("output"))
    cache_read = _count(request.get("cache_read"))
    cache_write = _count(request.get("cache_write"))
    total = _count(request.get("total"))
    fresh = max(total - output - cache_read - cache_write, 0)
    return (fresh, output, cache_read, cache_write, total)


def add_tokens(totals: dict[str, int], delta: TokenDelta) -> None:
    """Add one request's counts to running totals keyed by :data:`TOKEN_FIELDS`."""
    for name, value in zip(TOKEN_FIELDS, delta, strict=True):
        totals[name] = totals.get(name, 0) + value


def model_name(provider: object, model_id: object) -> str | None:
    """``provider/model_id`` (``model_id`` alone without a provider; None without a model)."""
    if not isinstance(model_id, str) or model_id in _UNKNOWN:
        return None
    if isinstance(provider, str) and provider not in _UNKNOWN:
        return f"{provider}/{model_id}"
    return model_id


def parse_timestamp(stamp: str | None) -> datetime | None:
    """A record's ISO 8601 timestamp as an aware datetime (UTC when it names no zone), or None."""
    if stamp is None:
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _ms(stamp: str | None) -> int | None:
    moment = parse_timestamp(stamp)
    return None if moment is None else int(moment.timestamp() * 1000)


def duration_seconds(first: str | None, last: str | None) -> float | None:
    """Seconds from the first record's timestamp to the last's (None when one is unreadable)."""
    start, end = _ms(first), _ms(last)
    if start is None or end is None:
        return None
    return round((end - start) / 1000, 3)


def numbers_of(summary: SessionSummary) -> SessionNumbers:
    """The numbers of a session summary."""
    requests = {status: count for status, count in summary.requests.items() if count}
    return SessionNumbers(
        requests=requests,
        request_total=sum(requests.values()),
        turns=summary.turns,
        tokens=dict(summary.token_totals),
        duration_s=duration_seconds(summary.first_timestamp, summary.last_timestamp),
        model=model_name(summary.provider, summary.model_id),
    )
