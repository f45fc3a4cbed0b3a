"""The developer API: declare event types, handle them one at a time, write a read model.

::

    class ToolFailures(AnalyticsProjection):
        name = "tool_failures"
        schema = ("CREATE TABLE IF NOT EXISTS tool_failures (tool TEXT, day TEXT, "
                  "failures BIGINT, PRIMARY KEY (tool, day))",)

        @handles("tool.result")
        def on_result(self, event: AnalyticsEvent, tx: Transaction) -> None:
            ...

An :class:`AnalyticsProjection` *is* an eventsourcing ``Projection`` whose
view is a :class:`~pentrace.infrastructure.analytics.readmodel.ReadModel`;
the library's runner feeds it ledger events, already redacted.  ``topics``
is derived from the ``@handles`` declarations, so the ledger only sends the
event types the projection asked for.

Each event is isolated (ADR 0032): a handler that raises on one event has
that event's writes rolled back and the event recorded as failed
(:mod:`~pentrace.infrastructure.analytics.failures`); the others go on.
After ``max_failures`` recorded failures the projection stops instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar, Final, TypeVar

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection

from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics.database import scheme_of
from pentrace.infrastructure.analytics.failures import (
    ENV_MAX_FAILURES,
    EventFailure,
    failure_of,
    isolable,
)
from pentrace.infrastructure.analytics.readmodel import ReadModel, Transaction
from pentrace.infrastructure.analytics.transaction import BatchWriteError
from pentrace.infrastructure.ledger.opener import LedgerApplication, LedgerEvent
from pentrace.projections.analytics.events import AnalyticsEvent, decode_event

__all__ = ["AnalyticsProjection", "Handler", "handles"]

Handler = Callable[[Any, AnalyticsEvent, Transaction], None]
_F = TypeVar("_F", bound=Callable[..., None])
_MARK: Final = "__pentrace_handles__"


def handles(*event_types: str) -> Callable[[_F], _F]:
    """Declare the RuntimeEvent types (``tool.result``, ...) a method handles."""
    if not event_types:
        raise AnalyticsError(
            "@handles() needs at least one event type, found none",
            hint='for example @handles("tool.result")',
        )

    def mark(method: _F) -> _F:
        setattr(method, _MARK, (*getattr(method, _MARK, ()), *event_types))
        return method

    return mark


class AnalyticsProjection(Projection[ReadModel]):
    """Base class of analytics projections (see the module docstring).

    Class attributes:

    * ``name``: the read model's name (tracking row, CLI name);
    * ``schema``: ``CREATE TABLE IF NOT EXISTS`` statements, run on start;
    * ``tables``: the tables a rebuild drops (default: the ones ``schema`` creates);
    * ``batch_size`` / ``batch_seconds``: how many events, or how long, a batch
      may grow before it commits with its tracking position;
    * ``max_failures``: how many events a handler may fail on (each recorded
      and skipped) before the projection stops; 0 stops on the first;
    * ``version``: raise it whenever ``schema`` or what a handler writes changes.
      A read model built by another version is rebuilt from the traces before
      ``pentrace stats`` reads it, and a runner refuses to extend it (ADR 0054).
    """

    schema: ClassVar[tuple[str, ...]] = ()
    tables: ClassVar[tuple[str, ...]] = ()
    batch_size: int = 5000
    batch_seconds: float = 0.2
    max_failures: int = 100
    version: ClassVar[int] = 1
    _handlers: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        found: dict[str, list[str]] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                for event_type in getattr(value, _MARK, ()):
                    names = found.setdefault(event_type, [])
                    if attr not in names:
                        names.append(attr)
        cls._handlers = {event_type: tuple(names) for event_type, names in found.items()}
        cls.topics = tuple(sorted(found))
        if "tables" not in cls.__dict__:
            cls.tables = tuple(name for name in map(_created_table, cls.schema) if name)

    def __init__(self, view: ReadModel) -> None:
        super().__init__(view)
        self._dispatch: dict[str, list[Callable[[AnalyticsEvent, Transaction], None]]] = {
            event_type: [getattr(self, attr) for attr in attrs]
            for event_type, attrs in self._handlers.items()
        }
        self._batch_started = time.monotonic()
        # The open batch's notifications, retried one by one when a batched write is refused.
        self._kept: list[Kept] = []
        self.guard: Callable[[int | None, list[int]], None] | None = None
        #: Trace marks of a cold build (stream id -> highest position folded from the
        #: traces, ADR 0050): ledger events at or below them are in the read model already.
        self.folded: dict[str, int] = {}
        view.scheme = scheme_of(self.version)
        self.create_schema()

    def create_schema(self) -> None:
        """Run the ``schema`` statements (idempotent)."""
        if not self.schema or (self.tables and self.view.db.has_tables(self.tables)):
            return
        with self.view.db.writing(f"create the read model of {self.name}") as conn:
            for statement in self.schema:
                conn.exec_driver_sql(statement)

    def handle(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Run every handler declared for the event's type."""
        for handler in self._dispatch.get(event.type, ()):
            handler(event, tx)

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Handle one ledger event in the open batch; commit the batch when it is full or old."""
        view = self.view
        with view.lock:
            try:
                if view.pending == 0:
                    self._batch_started = time.monotonic()
                self._kept.append(_kept(domain_event, tracking))
                # Every notification advances the position (a topic filter in the query
                # would leave it behind, and would hide pruned ids from the gap check).
                if self.wants(domain_event):
                    try:
                        failure = self.apply(domain_event, tracking.notification_id, strict=False)
                    except BatchWriteError:
                        self._replay()  # this event too, then the batch commits
                        return
                    if failure is not None:
                        self.skip(failure, commit_first=True)
                view.advance(tracking)
                if (
                    view.pending >= self.batch_size
                    or time.monotonic() - self._batch_started >= self.batch_seconds
                ):
                    self.commit()
            except BaseException:
                view.rollback()
                self._kept = []
                raise

    def wants(self, domain_event: Any) -> bool:
        """Whether a delivered ledger event is to be handled: one of our types, and not
        folded from the traces already by a cold build (ADR 0050)."""
        if not isinstance(domain_event, LedgerEvent):
            return False
        if domain_event.event_type not in self._dispatch:
            return False
        mark = self.folded.get(domain_event.originator_id)
        return mark is None or domain_event.originator_version > mark

    def _replay(self) -> int:
        """A batched write was refused: roll back, handle the batch again one event at a time
        (each written in its own savepoint, so the refused one is known), commit."""
        kept, view = self._kept, self.view
        view.rollback()
        self._kept = []
        for stream_id, sequence, event_type, envelope, notification_id in kept:
            tracking = Tracking(LedgerApplication.name, notification_id)
            domain_event = LedgerEvent(stream_id, sequence, event_type, envelope)
            if self.wants(domain_event):
                failure = self.apply(domain_event, tracking.notification_id, strict=True)
                if failure is not None:
                    self.skip(failure, commit_first=True)
            view.advance(tracking)
        if self.guard is not None:
            self.guard(view.start, view.seen)
        return view.commit()

    def apply(
        self, event: AnalyticsEvent | LedgerEvent, notification_id: int | None, *, strict: bool
    ) -> EventFailure | None:
        """Run the handlers on one event (a ledger row's is decoded first), isolated from the
        batch; returns the failure when one raised (its writes are rolled back).

        ``strict`` puts the event in its own savepoint from the start, so even a
        database error of its merged writes is known to be its own.
        """
        tx = self.view.transaction()
        tx.begin_event(strict)
        try:
            decoded = decode_event(event.event_json) if isinstance(event, LedgerEvent) else event
            self.handle(decoded, tx)
            tx.end_event(applied=True)
        except Exception as error:
            if not isolable(error) or isinstance(error, BatchWriteError):
                raise
            tx.end_event(applied=False)
            if isinstance(event, LedgerEvent):
                where = (event.originator_id, event.originator_version, event.event_type)
            else:
                where = (event.stream_id, event.sequence, event.type)
            return failure_of(self.name, *where, notification_id, error)
        return None

    def skip(self, failure: EventFailure, *, commit_first: bool) -> None:
        """Record ``failure`` with the batch, or stop when ``max_failures`` are recorded
        (``commit_first``: commit the events before it first)."""
        view = self.view
        recorded = view.failed_events()
        if recorded < self.max_failures:
            view.failures.append(failure)
            return
        if commit_first:
            self.commit()
        limit = (
            "stopped on the first failure"
            if self.max_failures == 0
            else f"stopped: {recorded} failed event(s) already recorded, the limit"
        )
        raise AnalyticsError(
            f"projection {self.name!r}: the handler failed on {failure.describe()}; "
            f"{limit} ({ENV_MAX_FAILURES}={self.max_failures})",
            hint=f"fix the handler, then `pentrace projections retry {self.name}`; "
            f"`pentrace projections status {self.name} --failures` lists the failed events",
        )

    def commit(self) -> int:
        """Commit the open batch with its tracking position (after the gap check)."""
        view = self.view
        with view.lock:
            if view.pending == 0:
                return 0
            if self.guard is not None:
                self.guard(view.start, view.seen)
            try:
                count = view.commit()
            except BatchWriteError:
                count = self._replay()
            self._kept = []
            return count


Kept = tuple[str, int, str, bytes, int]


def _kept(domain_event: Any, tracking: Tracking) -> Kept:
    """What a replay needs of a notification, in a tuple of plain values: the garbage
    collector stops tracking it, so holding a batch of them costs no collection time."""
    if isinstance(domain_event, LedgerEvent):
        return (
            domain_event.originator_id,
            domain_event.originator_version,
            domain_event.event_type,
            domain_event.event_json,
            tracking.notification_id,
        )
    return ("", 0, "", b"", tracking.notification_id)


def _created_table(statement: str) -> str:
    words = statement.replace("(", " ( ").split()
    upper = [word.upper() for word in words]
    if "TABLE" not in upper:
        return ""
    index = upper.index("TABLE") + 1
    if upper[index : index + 3] == ["IF", "NOT", "EXISTS"]:
        index += 3
    return words[index]
