"""Running projections: the library's runner over the ledger, a batch flusher, loud gaps.

:class:`AnalyticsRunner` *is* eventsourcing's ``BaseProjectionRunner`` with
:class:`~pentrace.infrastructure.ledger.opener.LedgerApplication` as the
application: it catches up from the read model's tracking position, then
follows (polling on SQLite, LISTEN/NOTIFY on PostgreSQL).  A small thread
commits a batch that has waited ``batch_seconds`` with no new event.

Gaps are loud: when ledger retention deleted rows this projection never
read, :class:`~pentrace.errors.ProjectionGapError` is raised (on start and
before any commit) naming ``pentrace projections rebuild <name>``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Final

from eventsourcing.persistence import Tracking
from eventsourcing.projection import BaseProjectionRunner

from pentrace.errors import AnalyticsError, ConfigError, ProjectionGapError
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.database import (
    AnalyticsDatabase,
    analytics_owner,
    analytics_url,
)
from pentrace.infrastructure.analytics.failures import max_failures
from pentrace.infrastructure.analytics.readmodel import ReadModel, TrackingConflictError, read_marks
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.opener import LedgerApplication
from pentrace.infrastructure.ledger.opener import open_ledger as ledger_opener
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts

__all__ = [
    "ENV_BATCH_SIZE",
    "AnalyticsRunner",
    "catch_up",
    "check_gap",
    "open_ledger",
    "open_projection",
    "relevant_head",
]


ENV_BATCH_SIZE: Final = "PENTRACE_ANALYTICS_BATCH_SIZE"


def _positive(value: str, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(
            f"{name}: expected a whole number of events >= 1, found {value[:20]!r}",
            hint=f"unset {name} to use the projection's own batch size",
        )
    return number


def _env(data_root: Path, env: Mapping[str, str] | None) -> dict[str, str]:
    merged = dict(os.environ)
    merged.update(env or {})
    merged["PENGUIN_HOME"] = str(data_root)
    return merged


def open_ledger(data_root: Path, env: Mapping[str, str] | None = None) -> RuntimeEventLedger:
    """The ledger the environment names (the same one the runner follows)."""
    return ledger_opener(LedgerSettings.from_env(_env(data_root, env)), data_root)


def open_projection(
    projection_class: type[AnalyticsProjection],
    data_root: Path,
    env: Mapping[str, str] | None = None,
) -> AnalyticsProjection:
    """A projection over its read model in the analytics database (schema created)."""
    merged = _env(data_root, env)
    limit = max_failures(projection_class.max_failures, merged)
    db = AnalyticsDatabase(analytics_url(data_root, merged), DatabaseTimeouts.from_env(merged))
    projection = projection_class(ReadModel(db, projection_class.name))
    projection.max_failures = limit
    projection.folded = read_marks(db, projection_class.name)
    return projection


def pruned_through(ledger: RuntimeEventLedger) -> int:
    """The highest notification id ledger retention has deleted (0 when none)."""
    return ledger.pruned_through()


def check_gap(name: str, ledger: RuntimeEventLedger, start: int | None, seen: list[int]) -> None:
    """Raise when retention has deleted ledger rows beyond what this projection has read.

    ``start`` is the committed position, ``seen`` the ids handled since.  The
    check is conservative: with a topic filter the projection cannot tell
    whether a deleted row was one of its types, so any deletion past the
    point it has read is a gap.
    """
    pruned = pruned_through(ledger)
    reached = seen[-1] if seen else (start or 0)
    if pruned <= reached:
        return
    raise ProjectionGapError(
        f"projection {name!r}: ledger retention deleted events up to notification {pruned}; "
        f"expected it to have read at least that far, found position {reached}; "
        f"rebuild it: `pentrace projections rebuild {name}`",
        hint="a rebuild reads the traces, which retention never prunes",
    )


def relevant_head(ledger: RuntimeEventLedger, topics: tuple[str, ...], upto: int) -> int:
    """The newest notification id at or below ``upto`` whose type is in ``topics`` (0: none)."""
    return ledger.newest_of_types(topics, upto)


class AnalyticsRunner(BaseProjectionRunner[LedgerApplication]):
    """Catch up, then follow the ledger with one projection (a context manager)."""

    def __init__(
        self,
        projection_class: type[AnalyticsProjection],
        *,
        data_root: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        merged = _env(data_root, env)
        self.projection = open_projection(projection_class, data_root, merged)
        batch = merged.get(ENV_BATCH_SIZE, "").strip()
        if batch:
            self.projection.batch_size = _positive(batch, ENV_BATCH_SIZE)
        self.view = self.projection.view
        self._ledger = open_ledger(data_root, merged)
        name = projection_class.name
        try:
            check_gap(name, self._ledger, self.view.max_tracking_id(name), [])
            stale = self.view.stale_reason()
            if stale is not None:
                raise AnalyticsError(
                    f"read model {name!r} {stale}",
                    hint=f"rebuild it from the traces: `pentrace projections rebuild {name}`",
                )
            self._hold_position()
        except BaseException:
            self._ledger.close()
            self.view.db.close()
            raise
        ledger = self._ledger
        self.projection.guard = lambda start, seen: check_gap(name, ledger, start, seen)
        self._flusher_stop = threading.Event()
        super().__init__(
            projection=self.projection,
            application_class=LedgerApplication,
            tracking_recorder=self.view,
            topics=self.projection.topics,
            env=merged,
        )
        self._flusher = threading.Thread(target=self._flush_idle, daemon=True)
        self._flusher.start()

    def _hold_position(self) -> None:
        """Commit a tracking row before reading anything (position 0 when there is none), then
        read the trace marks: a cold build commits only where no tracking row exists, so the
        marks read now are the ones this runner's events meet (ADR 0050)."""
        name = self.projection.name
        if self.view.max_tracking_id(name) is None:
            try:
                self.view.insert_tracking(Tracking(LedgerApplication.name, 0))
            except AnalyticsError:
                if self.view.max_tracking_id(name) is None:
                    raise
                # a cold build (or another runner) committed one first: it stands
        self.projection.folded = read_marks(self.view.db, self.projection.name)

    def _flush_idle(self) -> None:
        interval = self.projection.batch_seconds
        while not self._flusher_stop.wait(interval / 2):
            try:
                if self.projection.commit() == 0:
                    self.advance_idle()
            except BaseException as error:  # noqa: BLE001 - handed to run_forever()/__exit__
                self._thread_error = error
                self.stop()
                return

    @property
    def ledger(self) -> RuntimeEventLedger:
        """The ledger this runner follows (also used for the gap check)."""
        return self._ledger

    def wait_handled(self, notification_id: int, timeout: float) -> None:
        """Block until the projection has *handled* (not yet committed) ``notification_id``."""
        deadline = time.monotonic() + timeout
        while True:
            if self._thread_error is not None or self.is_interrupted.is_set():
                self.run_forever(timeout=0)
                return
            with self.view.lock:
                reached = self.view.position or self.view.max_tracking_id(self.projection.name)
            if reached is not None and reached >= notification_id:
                return
            if time.monotonic() > deadline:
                raise AnalyticsError(
                    f"projection {self.projection.name!r}: expected to reach notification "
                    f"{notification_id} within {timeout} s, found {reached or 0}",
                    hint="a large backlog takes longer; run `pentrace projections run NAME`",
                )
            time.sleep(0.005)

    def advance_idle(self, head: int | None = None) -> None:
        """Move the tracking position to the ledger head when every event of ours up to it is in.

        The ledger is read with the projection's topic filter, so without this
        the position would stay at the last event of *our* types; the gap
        check and ``projections status`` want to know how far it has looked.
        """
        name = self.projection.name
        with self.view.lock:
            if self.view.pending:
                return
            committed = self.view.max_tracking_id(name) or 0
            newest = head if head is not None else self._ledger.head()
            if newest <= committed:
                return
            if relevant_head(self._ledger, self.projection.topics, newest) > committed:
                return  # one of ours is not handled yet; the subscription will deliver it
            self.view.insert_tracking(Tracking(LedgerApplication.name, newest))

    def position(self) -> int | None:
        """The committed tracking position."""
        return self.view.max_tracking_id(self.projection.name)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        """Stop following, commit what was handled, close everything."""
        self._flusher_stop.set()
        self._flusher.join()
        try:
            self.stop()
            self._stop_thread.join()
            self._processing_thread.join()
            if self._thread_error is None and exc_type is None:
                self.projection.commit()
            else:
                self.view.rollback()
            super().__exit__(exc_type, exc_val, exc_tb)
        finally:
            self._ledger.close()
            self.view.db.close()


def catch_up(
    projection_class: type[AnalyticsProjection],
    *,
    data_root: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 600.0,
) -> int | None:
    """Process every event the ledger holds now, commit, stop; returns the tracking position.

    A read model built before sessions were keyed by (project, agent, id)
    (ADR 0023), or by another version of its projection (ADR 0054), is rebuilt
    from the traces first, never extended.  Concurrent catch-ups (threads or
    processes on one data root) run one at a time (:func:`analytics_owner`); one
    that meets a runner of ``projections run`` committing first starts again from
    the position it committed.
    """
    with analytics_owner(data_root):
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                return _catch_up(projection_class, data_root, env, timeout)
            except TrackingConflictError:
                if attempt == _CONFLICT_RETRIES:
                    raise
    raise AssertionError("unreachable: the last attempt returns or raises")


_CONFLICT_RETRIES: Final = 3


def _catch_up(
    projection_class: type[AnalyticsProjection],
    data_root: Path,
    env: Mapping[str, str] | None,
    timeout: float,
) -> int | None:
    projection = open_projection(projection_class, data_root, _env(data_root, env))
    try:
        stale = projection.view.stale_identity()
    finally:
        projection.view.db.close()
    if stale:
        from pentrace.infrastructure.analytics.rebuild import rebuild

        return rebuild(projection_class, data_root=data_root, env=env).position
    ledger = open_ledger(data_root, env)
    projection = open_projection(projection_class, data_root, _env(data_root, env))
    try:
        head = ledger.head()
        position = projection.view.max_tracking_id(projection_class.name)
    finally:
        ledger.close()
        projection.view.db.close()
    if not head or (position is not None and position >= head):
        return position  # already caught up: no runner, no threads
    runner = AnalyticsRunner(projection_class, data_root=data_root, env=env)
    with runner:
        head = runner.ledger.head()
        if head:
            target = relevant_head(runner.ledger, runner.projection.topics, head)
            if target:
                runner.wait_handled(target, timeout)
            runner.projection.commit()
            runner.advance_idle(head)
        return runner.position()
