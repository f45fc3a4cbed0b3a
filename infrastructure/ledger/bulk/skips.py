"""What a sync needs before it builds: the positions to leave out, and the ledger's dictionary.

Retention-aware bulk work: leave out what the count limit would delete right after.

Retention keeps the newest ``max_events`` rows by notification id, and a
sync inserts its rows after everything the ledger holds, sessions in order
and each session's positions in order.  When a sync brings more than
``max_events`` new rows, retention would delete every row the ledger held
before and the first ``new - max_events`` new rows: inserting those only to
delete them is most of the work when the limit is small.

:func:`plan_skips` counts each session's new positions first (reading the
traces, which costs a fraction of building rows) and marks the leading
positions retention would drop as *skipped*: a session wholly inside them is
not built at all, the session on the boundary is built from the first kept
position on.  :meth:`~..store.RuntimeEventLedger.skip_rows` then does, in one
transaction, what the deletion would have left behind: the notification ids those rows would have
taken are handed to no row, and each stream's retention watermark is raised
to the last skipped sequence and id.  After the sync's retention pass the
ledger holds the same rows, ids and watermarks as inserting everything and
pruning (tests hold SQLite and PostgreSQL to that).

The count is taken when the sync starts.  A session that fails while being
built stores fewer rows than counted, so retention would have kept a few
older ones the plan skipped; they are reported as evicted, as a prune
would report them, and ``ledger rebuild`` restores them.  The age rule never
drops a row a sync inserts (age counts from insertion) and the size rule
depends on the file, so only the count limit plans skips.

A first dictionary (ADR 0058): a sync into a ledger without one trains it
before it builds any row, on the envelopes of the first records of its first
sessions (built and redaction-checked exactly as the rows will be), so every
row it writes is compressed (:func:`sync_codec`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

from pentrace.domain.runtime import SessionEvents
from pentrace.errors import LedgerError, TraceError
from pentrace.infrastructure.ledger.backend.codec import RowCodec
from pentrace.infrastructure.ledger.retention import Watermark
from pentrace.infrastructure.ledger.rows import MAPPING_ERRORS, encoded_values
from pentrace.infrastructure.ledger.store import SAMPLES, RuntimeEventLedger
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session

__all__ = ["SessionTask", "SkipPlan", "plan_skips", "session_tasks", "sync_codec"]

# Envelopes one session may give the first dictionary.
_PER_SESSION: Final = 20


@dataclass(frozen=True)
class SessionTask:
    """What building one session needs: the positions the ledger holds, and the highest
    one not to index (retention pruned it, or the plan skips it).  ``skipped`` counts the
    positions the plan skips; ``build`` is False when it skips them all, and then
    ``already_held`` is what the build would have passed over as held."""

    ref: SessionRef
    held: frozenset[int]
    pruned_through: int
    inserted_at: int
    skipped: int = 0
    build: bool = True
    already_held: int = 0


@dataclass(frozen=True)
class SkipPlan:
    """Every session's task, in order, and the watermarks of what is skipped (none
    when the count limit drops nothing)."""

    tasks: list[SessionTask]
    marks: list[Watermark]

    @property
    def skipped(self) -> int:
        """New rows left out in all."""
        return sum(mark.rows for mark in self.marks)


def session_tasks(ledger: RuntimeEventLedger, refs: Iterable[SessionRef]) -> Iterable[SessionTask]:
    """Each session's task as the ledger stands now (read one session at a time).

    A new ledger holds no position of any session: nothing is read per session (a row
    another writer adds meanwhile is a held key at the insert, which the exact path
    sorts out).
    """
    if ledger.holds_nothing():
        for ref in refs:
            yield SessionTask(ref, frozenset(), 0, ledger.now_ms())
        return
    for ref in refs:
        held, pruned_through = ledger.held_sequences(ref.key.stream_id)
        yield SessionTask(ref, frozenset(held), pruned_through, ledger.now_ms())


def _upper_bound(refs: list[SessionRef]) -> int:
    """At least as many as the records of ``refs``: one per line, and a torn tail per shard."""
    lines = 0
    for ref in refs:
        for shard in ref.shards:
            with contextlib.suppress(OSError), shard.path.open("rb") as handle:
                chunks = iter(lambda: handle.read(1 << 20), b"")
                lines += 1 + sum(chunk.count(b"\n") for chunk in chunks)
    return lines


def _new_positions(task: SessionTask) -> tuple[list[int], int]:
    """The positions a sync would index, and how many it would pass over as held."""
    new: list[int] = []
    seen = 0
    try:
        for position, _ in enumerate(read_session(task.ref.shards), start=1):
            seen = position
            if position not in task.held and position > task.pruned_through:
                new.append(position)
    except (TraceError, OSError):
        return [], 0  # it fails again when built, and is reported then
    return new, seen - len(new)


def plan_skips(ledger: RuntimeEventLedger, refs: list[SessionRef]) -> SkipPlan | None:
    """What to leave out of a sync of ``refs``; None when no count limit can drop any of it
    (no limit, or fewer trace lines than the limit) or while retention is held."""
    limit = ledger.policy.max_events
    if ledger.retention_is_held or limit is None or limit <= 0 or _upper_bound(refs) <= limit:
        return None  # held: the caller reads every new row before retention runs
    tasks = list(session_tasks(ledger, refs))
    counted = [_new_positions(task) for task in tasks]
    remaining = sum(len(new) for new, _ in counted) - limit
    planned: list[SessionTask] = []
    marks: list[Watermark] = []
    for task, (new, held) in zip(tasks, counted, strict=True):
        skip = min(max(remaining, 0), len(new))
        if skip:
            remaining -= skip
            key = task.ref.key
            marks.append(Watermark(key.stream_id, key.id_prefix, new[skip - 1], 0, skip))
            task = replace(
                task,
                pruned_through=max(task.pruned_through, new[skip - 1]),
                skipped=skip,
                build=skip < len(new),
                already_held=held,
            )
        planned.append(task)
    return SkipPlan(planned, marks)


def sync_codec(ledger: RuntimeEventLedger, refs: Iterable[SessionRef]) -> RowCodec:
    """The codec a sync of ``refs`` writes with: the ledger's, after training its first
    dictionary on the sessions' envelopes when it has none (and they are enough)."""
    codec = ledger.db.codec
    if codec.current is not None or ledger.db.read_only:
        return codec
    samples: list[bytes] = []
    for ref in refs:
        samples += _session_samples(ref)
        if len(samples) >= SAMPLES:
            break
    return ledger.train_dictionary(samples)


def _session_samples(ref: SessionRef) -> list[bytes]:
    """The first envelopes of a session, as its rows hold them (a failing session: those
    before the failure; the sync reports it when it builds the session)."""
    mapper = SessionEvents(ref.key)
    found: list[bytes] = []
    try:
        for position, record in enumerate(read_session(ref.shards), start=1):
            found.append(encoded_values(mapper.encoded(position, record), 0)[-1])
            if len(found) >= _PER_SESSION:
                break
    except (LedgerError, TraceError, OSError, *MAPPING_ERRORS):
        pass
    return found
