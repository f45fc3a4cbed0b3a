"""One session's rows for ``ledger sync``, built where they can be spread over the cores.

:func:`build_session` reads a session's shards, maps each record the ledger
lacks through :class:`~pentrace.domain.runtime.SessionEvents` (its shared
header candidate when the redaction screen clears it), checks each row with
its envelope plain, and compresses the session's envelopes in one call
(:func:`~..rows.compressed_rows`, ADR 0072).  Its rows are the reference
path's rows, byte for byte (the README names the tests that hold it so).

A record the ledger cannot take (the redaction check refuses it, or the
mapping cannot take one of its values) is left out and reported as one
finding, with its file, line and position (:class:`SessionFailure`); the
session's other records, and the other sessions, go on.  Its position is left
as a gap: no other record takes it, and the rows after it keep their ids, as
the live path leaves it (ADR 0102).

Rows are then packed by which of their columns are NULL (ADR 0066): a row of
form 2 leaves five to seven of its seventeen columns NULL, and binding a
parameter costs the driver about as much per value as SQLite's own work on
it.  :func:`pack` groups a run of rows by the set of columns they hold and
keeps per group one flat list: for each row, its offset in the run, then the
values it holds.  The backend inserts each group with multi-row statements
that name only those columns and give each row the notification id ``base +
offset`` (``SQLiteDialect.packed_insert``), so the ids follow the rows' order
whatever the grouping.  Packing runs in the workers, and the flat lists cross
the pipe with fewer objects than the tuples would.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import EncodedEvent, SessionEvents
from pentrace.domain.runtime.candidate import EncodedCandidate
from pentrace.errors import (
    LedgerConflictError,
    LedgerError,
    PentraceError,
    RedactionError,
    TraceError,
)
from pentrace.infrastructure.ledger.backend.codec import RowCodec
from pentrace.infrastructure.ledger.rows import (
    MAPPING_ERRORS,
    candidate_values,
    checked_values,
    compressed_rows,
    refusal,
)
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.infrastructure.trace.reader import read_session, read_shard

__all__ = [
    "RECORD_ERRORS",
    "SESSION_ERRORS",
    "STREAM_BYTES",
    "STREAM_LINES",
    "PackedGroup",
    "PackedRows",
    "SessionBuild",
    "SessionFailure",
    "SyncReport",
    "build_session",
    "large_session",
    "numbered",
    "pack",
    "session_pieces",
    "unpack",
]

#: Errors that belong to one session's trace or rows; anything else (the database locked
#: or gone) stops the whole run.  :data:`~..rows.MAPPING_ERRORS` are a record the mapping
#: cannot take: that session is reported the same way.
SESSION_ERRORS: Final = (LedgerConflictError, RedactionError, TraceError, OSError)
#: Errors one record's row raises when the ledger cannot take it: the redaction check, the
#: envelope's shape, a value the mapping cannot take.  Building a row touches no database,
#: so no ledger error raised there is about anything but the record.
RECORD_ERRORS: Final = (LedgerError, *MAPPING_ERRORS)


@dataclass(frozen=True)
class SessionFailure:
    """One finding of a sync, rebuild or cold build: a session it could not read (``position``
    None), or one record of it a derived store cannot take, which was left out (ADR 0102).
    ``message`` names what was wrong; ``path``, ``line`` and ``position`` the record."""

    project: str
    agent: str
    session_id: str
    message: str
    path: str | None = None
    line: int | None = None
    position: int | None = None

    @classmethod
    def of(cls, ref: SessionRef, error: BaseException) -> SessionFailure:
        """The failure of ``ref`` with ``error``'s message."""
        message = error.message if isinstance(error, PentraceError) else str(error)
        return cls(ref.project, ref.agent, ref.session_id, message)

    @classmethod
    def at(cls, ref: SessionRef, position: int, error: BaseException) -> SessionFailure:
        """The finding of the record of ``ref`` at ``position``, found in its shards."""
        return record_findings(ref, [(position, error)])[0]


def record_findings(
    ref: SessionRef, refused: list[tuple[int, BaseException]]
) -> list[SessionFailure]:
    """One finding per ``(position, error)`` of ``ref``, each with its shard and line (read
    again in one pass, only when records were refused; None when the shards no longer hold
    it)."""
    places: dict[int, tuple[str, int]] = {}
    wanted = {position for position, _ in refused}
    seen = 0
    try:
        for shard in sorted(ref.shards, key=lambda shard: shard.index):
            for record in read_shard(shard.path):
                seen += 1
                if seen in wanted:
                    places[seen] = (str(shard.path), record.line)
            if seen >= max(wanted, default=0):
                break
    except (TraceError, OSError):
        pass
    found = []
    for position, error in refused:
        path, line = places.get(position, (None, None))
        where = f"{path}, line {line}" if path is not None else "its trace"
        message = f"position {position} ({where}): {refusal(error)}; the record was left out"
        found.append(
            SessionFailure(ref.project, ref.agent, ref.session_id, message, path, line, position)
        )
    return found


@dataclass(frozen=True)
class SyncReport:
    """What a sync or rebuild did; ``failures`` lists the sessions it had to leave out, and
    ``retention_skipped`` the new rows it did not insert because retention drops them."""

    sessions: int = 0
    indexed: int = 0
    already_held: int = 0
    failures: tuple[SessionFailure, ...] = ()
    retention_skipped: int = 0


@dataclass(frozen=True)
class SessionBuild:
    """A session's new rows (tuples in ``ROW_COLUMNS`` order), how many it passed over as
    held, and its findings (records left out, or the session cut short where its shards
    failed); for a backend that takes packed rows, ``packed`` holds them instead (runs in
    order) and ``rows`` is empty."""

    rows: list[tuple[Any, ...]]
    already_held: int
    failures: tuple[SessionFailure, ...] = ()
    packed: tuple[PackedRows, ...] = ()
    #: False for a piece of a session other than its last (:func:`session_pieces`).
    final: bool = True

    @property
    def count(self) -> int:
        """How many new rows the build holds, packed or not."""
        return len(self.rows) + sum(run.count for run in self.packed)


# A session of more bytes or lines than these is built in pieces, by the process that writes
# (or folds) it: a row or an envelope is about a kilobyte whatever its line's size (a `{}`
# line too), so tiny lines count as much as long ones.
STREAM_BYTES: Final = 16 * 1024 * 1024
STREAM_LINES: Final = 20_000


def large_session(ref: SessionRef) -> bool:
    """Whether the session's shards hold more than :data:`STREAM_BYTES` or
    :data:`STREAM_LINES` (an unreadable or missing shard counts nothing: its build reports
    it).  Lines are counted only below the byte limit, so at most that much is read."""
    size = 0
    for shard in ref.shards:
        try:
            size += os.stat(shard.path).st_size
        except OSError:
            continue
    if size > STREAM_BYTES:
        return True
    if size <= STREAM_LINES:  # fewer bytes than the limit in lines: no need to count
        return False
    lines = 0
    for shard in ref.shards:
        try:
            with shard.path.open("rb") as handle:
                lines += sum(
                    chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b"")
                )
        except OSError:
            continue
    return lines > STREAM_LINES


def numbered(records: Iterable[TraceRecord]) -> Iterator[tuple[int, TraceRecord]]:
    """``(position, record)`` pairs: a record's position is its 1-based place in the session."""
    return enumerate(records, start=1)


def build_session(
    ref: SessionRef,
    held: frozenset[int],
    pruned_through: int,
    inserted_at: int,
    codec: RowCodec | None = None,
) -> SessionBuild:
    """The rows of every record of ``ref`` but the ``held`` positions and those retention
    pruned, and the findings of the records left out (see the module docstring)."""
    (whole,) = session_pieces(ref, held, pruned_through, inserted_at, codec)
    return whole


def session_pieces(
    ref: SessionRef,
    held: frozenset[int],
    pruned_through: int,
    inserted_at: int,
    codec: RowCodec | None = None,
    piece: int | None = None,
) -> Iterator[SessionBuild]:
    """:func:`build_session` in pieces of at most ``piece`` rows (None: one piece), so that a
    session of any length is built in bounded memory; the last piece has ``final`` set and
    carries the findings, and the pieces' rows, in order, are the whole build's."""
    mapper = SessionEvents(ref.key)
    rows: list[tuple[Any, ...]] = []
    skipped = 0
    refused: list[tuple[int, BaseException]] = []
    cut: list[SessionFailure] = []
    limit = piece if piece is not None else -1
    try:
        for position, record in numbered(read_session(ref.shards)):
            if position in held or position <= pruned_through:
                skipped += 1
                mapper.skip(position, record)
                continue
            try:
                found = mapper.screened(position, record)
                if type(found) is EncodedCandidate:
                    row = candidate_values(found, inserted_at, codec)
                else:
                    assert isinstance(found, EncodedEvent)
                    row = checked_values(found, inserted_at, codec)
            except RECORD_ERRORS as error:  # this record only: a gap at its position
                mapper.skip(position, record)  # a first record still names the workspace
                refused.append((position, error))
                continue
            rows.append(row)
            if len(rows) == limit:
                yield SessionBuild(compressed_rows(rows, codec), skipped, final=False)
                rows, skipped = [], 0
    except (TraceError, OSError) as error:  # the shards themselves
        cut.append(SessionFailure.of(ref, error))
    findings = (*record_findings(ref, refused), *cut) if refused else tuple(cut)
    yield SessionBuild(compressed_rows(rows, codec), skipped, findings)


@dataclass(frozen=True, slots=True)
class PackedGroup:
    """The rows of one run that hold exactly the columns ``present`` (their positions in
    the row, ascending): ``values`` is, per row, its offset in the run then those values."""

    present: tuple[int, ...]
    values: list[Any]

    @property
    def rows(self) -> int:
        """How many rows the group holds."""
        return len(self.values) // (len(self.present) + 1)


@dataclass(frozen=True, slots=True)
class PackedRows:
    """A run of ``count`` consecutive rows, grouped (see the module docstring)."""

    count: int
    groups: tuple[PackedGroup, ...]


_is_none: Callable[[object], object] = None.__eq__  # True for None, NotImplemented otherwise


def pack(rows: Sequence[tuple[Any, ...]]) -> PackedRows:
    """``rows`` (tuples of one width) grouped by the columns they hold, order kept by offset."""
    groups: dict[tuple[object, ...], tuple[Callable[[tuple[Any, ...]], Any], list[Any]]] = {}
    for offset, row in enumerate(rows):
        shape = tuple(map(_is_none, row))
        found = groups.get(shape)
        if found is None:
            present = tuple(i for i, null in enumerate(shape) if null is not True)
            found = groups[shape] = (_getter(present), [])
        take, values = found
        values.append(offset)
        values.extend(take(row))
    packed = tuple(
        PackedGroup(tuple(i for i, null in enumerate(shape) if null is not True), values)
        for shape, (_, values) in groups.items()
    )
    return PackedRows(len(rows), packed)


def unpack(packed: PackedRows, width: int) -> list[tuple[Any, ...]]:
    """The rows :func:`pack` was given (each ``width`` columns wide), in their order."""
    rows: list[tuple[Any, ...] | None] = [None] * packed.count
    for group in packed.groups:
        step = len(group.present) + 1
        values = group.values
        for start in range(0, len(values), step):
            row: list[Any] = [None] * width
            for column, value in zip(group.present, values[start + 1 : start + step], strict=True):
                row[column] = value
            rows[values[start]] = tuple(row)
    assert all(row is not None for row in rows), "a packed run misses rows"
    return [row for row in rows if row is not None]


def _getter(present: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """The values at ``present`` of a row, as a tuple (itemgetter of one index gives a scalar)."""
    if len(present) == 1:
        index = present[0]
        return lambda row: (row[index],)
    return itemgetter(*present)
