"""The shard writer core: one ``write(2)`` per record (public API: ``trace_writer``).

A record is an already-encoded JSON envelope (bytes, no newline).  The writer
adds the ``\\n`` in the same buffer and hands it to ONE ``os.write`` on an
``O_APPEND`` descriptor, so a record is never split or interleaved, even at
several MB (PenguinHarness issue #215).  A short write (disk full, file size
limit) is retried for the remainder; if that fails the shard is truncated back
to its size before the append, so a failed append leaves nothing behind.

``append_many`` writes a batch (one eventsourcing save) as ONE buffer, with the
same all-or-nothing rollback on any error the process sees.  A process killed
*during* a multi-MB write can still leave a prefix of the batch; readers drop
the torn last line and commit is decided by ``request_end`` (see ADR 0004).

A shard file never exists without its first batch: a new shard is written to a
hidden temporary file in the same folder, fsynced, and renamed into place, so a
crash cannot leave an empty or headless ``_NNN.jsonl`` behind.

Torn tails: if an existing shard does not end in ``\\n`` (a crash mid-write, or
a failed rollback), the next record is prefixed with ``\\n``; the reader then
sees the torn fragment as a malformed line and the new record intact.

The class is a little over 300 lines and stays whole: every method shares the
one descriptor, size and heal state of the append path.  The file steps it
takes (open, create whole, finish a short write, roll back) and the checks on
what it writes follow it as functions.

What the writer refuses, and which records end a request (for the fsync
policy): both checks run on every appended record, so they start with a plain
byte probe.  A JSON string or key can only start with an unescaped quote, so
the probes never miss the real field, and a hit is confirmed by decoding the
record's header with :func:`pentrace.domain.records.decode_line`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from operator import methodcaller
from pathlib import Path
from typing import Final, NoReturn

from pentrace.domain.records import MalformedLine, decode_line
from pentrace.errors import RecordRefusedError, TraceWriteError, UsageError
from pentrace.infrastructure.storage.atomic import in_flight, temp_name
from pentrace.infrastructure.storage.layout import parse_shard_name
from pentrace.infrastructure.storage.modes import open_private
from pentrace.infrastructure.trace.durability import (
    Durability,
    FsyncFn,
    fsync_directory,
    make_dirs_durably,
)
from pentrace.infrastructure.trace.locking import SessionLock

__all__ = [
    "PARTIAL_PROBE",
    "REQUEST_END_PROBE",
    "ShardWriter",
    "create_shard",
    "finish_short_write",
    "is_request_end",
    "open_for_append",
    "probe_tail",
    "refuse_batch",
    "refuse_record",
    "refuse_rotation",
    "roll_back",
]


def _index_of(path: Path) -> int:
    parsed = parse_shard_name(path.name)
    return parsed[1] if parsed is not None else 1


class ShardWriter:
    """The single writer of one session's current shard (see the module docstring).

    ``lock`` is the session lock to hold (the writer releases it on close); by
    default a sidecar ``<shard>.lock`` is locked, honouring ``wait`` (ADR 0005;
    ``wait`` is ignored when ``lock`` is given).  Not thread-safe: one thread
    appends at a time (the recorder serialises its saves).
    ``next_shard(index)`` names the shard :meth:`rotate` opens next.
    ``fsync`` is called with a file descriptor; tests wrap :func:`os.fsync`.
    """

    # Slots: attribute access on the per-record path is measurably cheaper.
    __slots__ = (
        "_closed",
        "_dir_fsync",
        "_dirty",
        "_durability",
        "_fd",
        "_fsync",
        "_heal",
        "_index",
        "_lock",
        "_next_shard",
        "_path",
        "_sidecar",
        "_size",
        "_sync_at_end",
        "_sync_every",
    )

    def __init__(
        self,
        path: Path | str,
        *,
        durability: Durability = Durability.PER_REQUEST,
        wait: float | None = None,
        lock: SessionLock | None = None,
        next_shard: Callable[[int], Path] | None = None,
        index: int | None = None,
        fsync: FsyncFn = os.fsync,
    ) -> None:
        self._path = Path(path).absolute()
        self._index = index if index is not None else _index_of(self._path)
        self._durability = durability
        self._sync_every = durability is Durability.EVERY_RECORD
        self._sync_at_end = durability is Durability.PER_REQUEST
        self._fsync = fsync
        self._next_shard = next_shard
        self._fd: int | None = None
        self._size = 0
        self._heal = False
        self._dirty = False
        self._closed = False
        # None under Durability.NONE: no fsync at all, not even for new files.
        self._dir_fsync = None if durability is Durability.NONE else fsync
        self._sidecar = lock is None
        try:
            make_dirs_durably(self._path.parent, self._dir_fsync)
            self._lock = lock if lock is not None else _sidecar_lock(self._path, wait)
        except BaseException:
            if lock is not None:
                lock.release()  # the writer owns a lock it was given, even when it fails
            raise
        try:
            self._open_existing()
        except BaseException:
            self._lock.release()
            raise

    @property
    def path(self) -> Path:
        """The shard being appended to (it exists once the first record is written)."""
        return self._path

    @property
    def index(self) -> int:
        """The 1-based index of the current shard (``_001`` is 1)."""
        return self._index

    @property
    def size(self) -> int:
        """Bytes in the current shard after the last successful append."""
        return self._size

    @property
    def durability(self) -> Durability:
        """The fsync policy this writer follows."""
        return self._durability

    def append(self, record: bytes, *, sync: bool | None = None) -> int:
        """Append one record (encoded JSON, no newline) in one write; return the shard size.

        ``sync=None`` lets the policy decide (PER_REQUEST: fsync after a
        ``request_end``), ``True`` forces an fsync, ``False`` skips it.
        """
        # The common record fails every probe; only a hit pays for the full check.
        # bytes.find, not `in`: `in` first tries the needle as an int and pays for
        # the TypeError, which doubles the cost of a short search.
        find = record.find
        if not record or find(b"\n") >= 0 or find(PARTIAL_PROBE) >= 0 or record.isspace():
            refuse_record(record, self._path)
        if sync is None:
            sync = self._sync_every or (
                self._sync_at_end and find(REQUEST_END_PROBE) >= 0 and is_request_end(record)
            )
        return self._commit(b"\n" + record + b"\n" if self._heal else record + b"\n", 1, sync)

    def append_many(self, records: Sequence[bytes], *, sync: bool | None = None) -> int:
        """Append a batch as ONE write: all records land or none do (see module docstring).

        Returns the shard size; an empty batch writes nothing.
        """
        if len(records) == 1:  # a save per event: the same checks without joining
            return self.append(records[0], sync=sync)
        if not records:
            return self._size
        joined = b"\n".join(records)
        refuse_batch(records, joined, self._path)
        buffer = b"\n" + joined + b"\n" if self._heal else joined + b"\n"
        if sync is None:
            sync = self._sync_every or (
                self._sync_at_end and any(is_request_end(record) for record in records)
            )
        return self._commit(buffer, len(records), sync)

    def rotate(self, header_records: Sequence[bytes]) -> Path:
        """Start the next shard (``_NNN+1``) with ``header_records`` and continue there.

        The headers (``session_meta`` then ``tool_list_ready``) are written before
        the new shard becomes visible; the old shard is fsynced and closed first.
        Returns the new shard's path.
        """
        self._check_open()
        next_shard = refuse_rotation(
            self._path, self._next_shard, header_records, has_records=self._fd is not None
        )
        new_index = self._index + 1
        new_path = next_shard(new_index).absolute()
        make_dirs_durably(new_path.parent, self._dir_fsync)
        new_lock = _sidecar_lock(new_path, None) if self._sidecar else None
        try:
            if os.path.lexists(new_path):
                raise TraceWriteError(
                    f"cannot rotate to {new_path}: it already exists (shard index {new_index})",
                    hint="another writer rotated this session; reopen it at its latest shard",
                )
            if self._durability is not Durability.NONE:
                self.sync()
            body = b"\n".join(header_records) + b"\n"
            fd = create_shard(new_path, body, len(header_records), self._dir_fsync)
        except BaseException:
            if new_lock is not None:
                new_lock.release()
            raise
        old_fd, self._fd = self._fd, fd
        if old_fd is not None:
            os.close(old_fd)
        if new_lock is not None:
            self._lock.release()
            self._lock = new_lock
        self._path, self._index, self._size = new_path, new_index, len(body)
        self._heal = self._dirty = False
        return new_path

    def sync(self) -> None:
        """fsync the current shard now if anything was written since the last fsync."""
        if self._fd is not None and self._dirty:
            try:
                self._fsync(self._fd)
            except OSError as exc:
                self._fail("fsync", exc, 0)  # earlier appends stay; only durability is unknown
            self._dirty = False

    def close(self) -> None:
        """fsync pending writes (unless the policy is NONE), close the shard, release the lock."""
        if self._closed:
            return
        try:
            if self._durability is not Durability.NONE:
                self.sync()
        finally:
            self._closed = True
            fd, self._fd = self._fd, None
            try:
                if fd is not None:
                    os.close(fd)
            finally:
                self._lock.release()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------

    def _open_existing(self) -> None:
        self._fd = fd = open_for_append(self._path)
        if fd is not None:
            self._size, self._heal = probe_tail(self._path, fd)

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(
                f"the trace writer for {self._path} is closed",
                hint="open a new writer for the session",
            )

    def _commit(self, buffer: bytes, count: int, sync: bool) -> int:
        fd = self._fd
        if fd is None:
            self._check_open()
            self._fd = create_shard(self._path, buffer, count, self._dir_fsync)
            self._size = len(buffer)
            self._heal = self._dirty = False
            return self._size
        before = self._size
        length = len(buffer)
        try:
            written = os.write(fd, buffer)
            if written != length:
                finish_short_write(fd, buffer, written)
        except OSError as exc:
            self._fail("write", exc, count, before)
        self._size = before + length
        if self._heal:
            self._heal = False
        self._dirty = True
        if sync:
            try:
                self._fsync(fd)
            except OSError as exc:
                self._fail("fsync", exc, count, before)
            self._dirty = False
        return self._size

    def _fail(self, step: str, exc: OSError, count: int, before: int | None = None) -> NoReturn:
        """Roll the shard back to ``before`` bytes and raise one TraceWriteError."""
        rolled = ""
        if before is not None and self._fd is not None:
            rolled, tail = roll_back(self._path, self._fd, before)
            if tail is not None:
                self._size, self._heal = tail
        what = f"{count} record(s)" if count else "pending records"
        raise TraceWriteError(
            f"{step} of {what} to {self._path} failed: "
            f"{exc.strerror or type(exc).__name__}{rolled}",
            hint="check free disk space and the file system, then save again",
        ) from exc


def _sidecar_lock(path: Path, wait: float | None) -> SessionLock:
    return SessionLock(path.with_name(path.name + ".lock"), label=f"trace shard {path}", wait=wait)


def open_for_append(path: Path) -> int | None:
    """An ``O_APPEND`` descriptor on an existing shard; None when there is none yet."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # created whole with its first batch, see create_shard
    except OSError as exc:
        raise TraceWriteError(
            f"cannot open {path} for appending: {exc.strerror or type(exc).__name__}",
            hint="check the file's permissions and the disk",
        ) from exc


def finish_short_write(fd: int, buffer: bytes, written: int) -> None:
    """Write the rest of a buffer after a short write; only we append, so it stays contiguous."""
    view = memoryview(buffer)
    while written < len(buffer):
        step = os.write(fd, view[written:])
        if step <= 0:
            raise OSError(errno.ENOSPC, "no progress writing the rest of a record")
        written += step


def roll_back(path: Path, fd: int, before: int) -> tuple[str, tuple[int, bool] | None]:
    """Truncate a failed append back to ``before`` bytes; return what to say, and the tail.

    The tail (size, torn) is None when the truncation worked; when it failed
    the tail is unknown, so it is probed again and the next record heals it.
    """
    try:
        os.ftruncate(fd, before)
    except OSError:
        return "; rolling back failed, the next record starts on a new line", probe_tail(path, fd)
    return f"; the shard was rolled back to {before} bytes", None


def probe_tail(path: Path, fd: int) -> tuple[int, bool]:
    """The shard's size and whether its last byte is not ``\\n`` (a torn tail to heal)."""
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0, False
        with open(path, "rb") as handle:
            handle.seek(size - 1)
            return size, handle.read(1) != b"\n"
    except OSError:
        # Unknown tail: a leading newline is harmless (blank lines are not records).
        return os.lseek(fd, 0, os.SEEK_END), True


def create_shard(path: Path, buffer: bytes, count: int, fsync: FsyncFn | None) -> int:
    """Create ``path`` holding exactly ``buffer`` (``count`` records); return an append fd.

    The bytes go to a hidden temporary file (mode 0600) that is fsynced and
    renamed into place, then the folder is fsynced, so the shard appears whole
    or not at all.  ``fsync=None`` (Durability.NONE) skips both fsyncs.  The
    caller holds the session lock, so the existence check cannot race another
    pentrace writer.
    """
    with in_flight(temp_name(path)) as temp:
        return _create(path, temp, buffer, count, fsync)


def _create(path: Path, temp: Path, buffer: bytes, count: int, fsync: FsyncFn | None) -> int:
    renamed = False
    try:
        fd = open_private(temp, os.O_WRONLY | os.O_EXCL)
        try:
            written = os.write(fd, buffer)
            if written != len(buffer):
                finish_short_write(fd, buffer, written)
            if fsync is not None:
                fsync(fd)
        finally:
            os.close(fd)
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "the shard appeared while it was being created")
        os.rename(temp, path)
        renamed = True
        if fsync is not None:
            fsync_directory(path.parent, fsync)
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError as exc:
        # All or nothing: a shard that is not known to be whole is removed again.
        (path if renamed else temp).unlink(missing_ok=True)
        raise TraceWriteError(
            f"could not create {path} with its first {count} record(s) "
            f"({len(buffer)} bytes): {exc.strerror or type(exc).__name__}",
            hint="check free disk space and the folder's permissions, then save again",
        ) from exc


PARTIAL_PROBE: Final = b'"partial_'
REQUEST_END_PROBE: Final = b'"request_end"'
_isspace = methodcaller("isspace")


def is_request_end(record: bytes) -> bool:
    """True when ``record`` is an ``event_msg`` whose payload type is ``request_end``."""
    if record.find(REQUEST_END_PROBE) < 0:
        return False
    try:
        head = decode_line(record)
    except MalformedLine:
        return True  # cannot tell: an extra fsync is the safe side
    return head is not None and head.kind == "event_msg" and head.ptype == "request_end"


def refuse_record(record: bytes, where: Path) -> None:
    """Raise :class:`RecordRefusedError` for a record no trace may hold; return otherwise.

    Refused: empty or blank records, records containing ``\\n`` (they would
    become several lines) and ``partial_*`` payloads (live-only fragments).
    """
    if not record or record.isspace():
        raise RecordRefusedError(
            f"refused an empty record for {where}: a trace line must hold one JSON envelope",
            hint="encode the envelope before appending it",
        )
    if record.find(b"\n") >= 0:
        raise RecordRefusedError(
            f"refused a record of {len(record)} bytes for {where}: it contains a raw newline "
            "and would become several trace lines",
            hint="encode records as compact JSON (msgspec.json.encode escapes newlines)",
        )
    if record.find(PARTIAL_PROBE) >= 0:
        try:
            head = decode_line(record)
        except MalformedLine:
            return
        ptype = head.ptype if head is not None else None
        if isinstance(ptype, str) and ptype.startswith("partial_"):
            raise RecordRefusedError(
                f"refused a {ptype} record for {where}: partial_* fragments are live-only "
                "and never written to a trace",
                hint="append the complete message once its stream segment ends",
            )


def refuse_batch(records: Sequence[bytes], joined: bytes, where: Path) -> None:
    """:func:`refuse_record` for every record of a batch (``joined``: them joined by ``\\n``).

    Checked once for the batch: a newline in the records joined without
    separators (a one-byte find is a memchr; bytes.count is several times
    slower), and the partial probe on the joined batch (no probe contains a
    newline, so none spans two records); only a hit pays for the per-record
    check that names the record.
    """
    if b"".join(records).find(b"\n") >= 0 or joined.find(PARTIAL_PROBE) >= 0:
        for record in records:
            refuse_record(record, where)
    # Empty or blank records, found without a Python-level loop in the common case.
    if not all(records) or any(map(_isspace, records)):
        for record in records:
            if not record or record.isspace():
                refuse_record(record, where)


def refuse_rotation(
    where: Path,
    next_shard: Callable[[int], Path] | None,
    header_records: Sequence[bytes],
    *,
    has_records: bool,
) -> Callable[[int], Path]:
    """``next_shard``, once a rotation away from ``where`` is known to be possible.

    Raises :class:`~pentrace.errors.UsageError` without a ``next_shard``, without
    header records, or when the current shard holds no records yet (a shard is
    never left empty behind), and refuses a header no trace may hold.
    """
    if next_shard is None:
        raise UsageError(
            f"cannot rotate {where}: the writer was opened without next_shard",
            hint="open the writer with open_session_writer(...) or pass next_shard=",
        )
    if not header_records:
        raise UsageError(
            f"cannot rotate {where}: a new shard must start with session_meta "
            "and tool_list_ready, got no header records",
            hint="pass the session_meta and tool_list_ready records",
        )
    if not has_records:
        raise UsageError(
            f"cannot rotate away from {where}: it has no records yet",
            hint="write the session's first records before rotating",
        )
    for record in header_records:
        refuse_record(record, where)
    return next_shard
