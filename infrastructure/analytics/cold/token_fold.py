"""The token projection's bulk fold (ADR 0062): its cold build as an in-memory aggregate.

:class:`TokenFold` leaves exactly the rows :class:`~.tokens.TokenUse`'s
handlers leave (``tok_sessions``, ``tok_daily``, ``tok_minutes``,
``tok_requests``): a row's counters are the sums of what the handlers add,
NULL where they never add, and each session's model in effect follows its
records in order, as ``model_of`` does.  A record the redaction screen clears
(with its session's own strings) is read straight from its bytes, only the
timestamp and the payload fields the handlers read; any other through its
exact envelope (:meth:`~pentrace.infrastructure.analytics.cold.bulkfold.ColdSession.event`).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime.mapping import stamp_ms
from pentrace.infrastructure.analytics.builtin import model_entry
from pentrace.infrastructure.analytics.cold.bulkfold import BulkFold, ColdSession
from pentrace.infrastructure.analytics.queries import TOKEN_COLUMNS
from pentrace.infrastructure.analytics.transaction import Transaction
from pentrace.projections.analytics.events import minute_of, token_delta

__all__ = ["TokenFold"]


class _Stamp(msgspec.Struct):
    timestamp: Any = None


class _Fields(msgspec.Struct):
    """The payload fields the handlers read (``session_meta``: provider and model;
    ``token_usage``: the request's counts)."""

    provider: Any = None
    model_id: Any = None
    request: Any = None


class _Record(msgspec.Struct):
    timestamp: Any = None
    payload: _Fields | None = None


_stamp: Final = msgspec.json.Decoder(_Stamp)
_record: Final = msgspec.json.Decoder(_Record)
_ODD: Final = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)
_META_TYPES: Final = frozenset(("session.created", "session.updated"))
_UNKNOWN: Final = ("unknown", "unknown")
# A tok_daily / tok_minutes row's counters, in this order; None: never added (NULL).
_COUNTERS: Final = TOKEN_COLUMNS
_DAILY: Final = ("day", "project", "agent", "provider", "model", "session_id", *_COUNTERS)
_MINUTES: Final = ("minute", "project", "agent", "provider", "model", *_COUNTERS)
_REQUESTS: Final = ("session_id", "sequence", "time_ms", "model", *_COUNTERS[2:])
_MAX_COUNT: Final = 2**63 - 1  # what ``token_delta`` counts at most (a BIGINT)
Counters = list[Any]  # ints, None for a counter never added
Rows = dict[tuple[str, ...], Counters]


def _count_request(rows: Rows, key: tuple[str, ...]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = [1, None, None, None, None, None, None]
    else:
        row[0] = 1 if row[0] is None else row[0] + 1


def _count_usage(rows: Rows, key: tuple[str, ...], delta: tuple[int, ...]) -> None:
    row = rows.get(key)
    if row is None:
        rows[key] = [None, 1, *delta]
    elif row[1] is None:
        row[1:] = [1, *delta]
    else:
        fresh, output, cache_read, cache_write, total = delta
        row[1] += 1
        row[2] += fresh
        row[3] += output
        row[4] += cache_read
        row[5] += cache_write
        row[6] += total


def _delta(request: Any) -> tuple[int, ...] | None:
    """``token_delta`` of a payload with this ``request``; plain counts without the calls."""
    if type(request) is dict:
        get = request.get
        output, cache_read, cache_write, total = (
            get("output"),
            get("cache_read"),
            get("cache_write"),
            get("total"),
        )
        if (
            type(output) is int
            and type(cache_read) is int
            and type(cache_write) is int
            and type(total) is int
            and 0 <= output <= _MAX_COUNT
            and 0 <= cache_read <= _MAX_COUNT
            and 0 <= cache_write <= _MAX_COUNT
            and 0 <= total <= _MAX_COUNT
        ):
            fresh = max(total - output - cache_read - cache_write, 0)
            return fresh, output, cache_read, cache_write, total
    return token_delta({"request": request})


def _merged(held: Counters, more: Counters) -> Counters:
    return [b if a is None else a if b is None else a + b for a, b in zip(held, more, strict=True)]


class TokenFold(BulkFold):
    """:class:`~.tokens.TokenUse`'s handlers as an aggregate (see the module docstring)."""

    def __init__(self) -> None:
        self.models: dict[str, tuple[str, str]] = {}  # each session's latest (provider, model)
        self.daily: Rows = {}
        self.minutes: Rows = {}
        self.requests: list[tuple[Any, ...]] = []  # tok_requests rows
        self._minutes: dict[int, str] = {}  # minute number -> ``minute_of`` (a memo)

    @staticmethod
    def _read(
        session: ColdSession, position: int, event_type: str, record: TraceRecord
    ) -> tuple[str, str, str, int, _Fields | None]:
        """``(session, project, agent, time, payload fields)`` as the handlers would see them."""
        if session.untouched(record):
            try:
                if event_type == "run.started":
                    stamp = _stamp.decode(record.raw).timestamp
                    return session.session, session.project, session.agent, stamp_ms(stamp), None
                read = _record.decode(record.raw)
                time = stamp_ms(read.timestamp)
                return session.session, session.project, session.agent, time, read.payload
            except _ODD:
                pass  # an odd shape: its envelope decides
        event = session.event(position, record)
        scope, payload = event.scope, event.payload
        fields = _Fields(payload.get("provider"), payload.get("model_id"), payload.get("request"))
        return event.session, scope.project_id or "", scope.agent_id or "", event.time, fields

    def fold(
        self, session: ColdSession, position: int, event_type: str, record: TraceRecord
    ) -> None:
        """Fold one record as ``on_meta``, ``on_request`` or ``on_usage`` handles its event."""
        name, project, agent, time, fields = self._read(session, position, event_type, record)
        if event_type in _META_TYPES:
            self.models[name] = (
                model_entry(fields.provider, fields.model_id) if fields is not None else _UNKNOWN
            )
            return
        provider, model = self.models.get(name, _UNKNOWN)
        minute = self._minutes.get(time // 60_000)
        if minute is None:
            minute = self._minutes[time // 60_000] = minute_of(time)
        day = minute[:10]  # day_of(time)
        if event_type == "run.started":
            _count_request(self.daily, (day, project, agent, provider, model, name))
            _count_request(self.minutes, (minute, project, agent, provider, model))
            return
        delta = _delta(fields.request if fields is not None else None)
        if delta is None:
            return
        _count_usage(self.daily, (day, project, agent, provider, model, name), delta)
        _count_usage(self.minutes, (minute, project, agent, provider, model), delta)
        self.requests.append((name, position, time, model, *delta))

    def take(self) -> tuple[Any, ...]:
        """The aggregate (picklable), and start again (a session's records are in one task)."""
        taken = (self.models, self.daily, self.minutes, self.requests)
        self.models, self.daily, self.minutes, self.requests = {}, {}, {}, []
        return taken

    def merge(self, partial: tuple[Any, ...]) -> None:
        """Add a worker's aggregate."""
        models, daily, minutes, requests = partial
        self.models.update(models)
        for mine, theirs in ((self.daily, daily), (self.minutes, minutes)):
            for key, values in theirs.items():
                held = mine.get(key)
                mine[key] = values if held is None else _merged(held, values)
        self.requests += requests

    def write(self, tx: Transaction) -> None:
        """The merged rows, each inserted once into the fresh tables."""
        sessions = [(name, *entry) for name, entry in self.models.items()]
        tx.insert("tok_sessions", ("session_id", "provider", "model"), sessions)
        tx.insert("tok_daily", _DAILY, [(*key, *row) for key, row in self.daily.items()])
        tx.insert("tok_minutes", _MINUTES, [(*key, *row) for key, row in self.minutes.items()])
        tx.insert("tok_requests", _REQUESTS, self.requests)
