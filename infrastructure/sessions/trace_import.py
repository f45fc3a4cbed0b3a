"""Import a trace file as a new session under an agent (the Web Traces page's import).

Rules:

* The file is read strictly: any malformed line raises
  :class:`~pentrace.errors.TraceFormatError` naming the file and the line.  A
  torn last line follows the reader's rule: it is dropped silently, and the
  imported copy ends at the last complete record.
* The first record must be ``session_meta`` whose ``session_id`` is a valid
  name; an id that already exists under the agent is refused.  With
  ``new_id`` the copy takes a fresh id instead, and every ``session_meta`` of
  the copy names where it came from::

      "imported_from": {"session_id": <the id in the file>, "file": <its absolute path>}

* A later ``session_meta`` right after a completed ``compaction_end`` (a
  rotated shard's copy, as ``pentrace export --shard all`` writes them one
  after another) starts the next shard, so a whole session exported as one
  file comes back as the shards it had.  A ``session_meta`` anywhere else (an
  imported agent session's model change, ADR 0094) stays in its shard, where
  it was written.  All of them must name the same session.
* Each shard lands in the date folder of its ``session_meta`` timestamp (its
  UTC date), the day PenguinHarness would have filed it under.
* The bytes are copied unchanged (apart from the dropped torn tail and, with
  ``new_id``, the ``session_meta`` lines), through a temp file and ``link(2)``,
  under the session lock: a failed import leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any, Final

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord, js_trim
from pentrace.errors import (
    InvalidNameError,
    NoMatchError,
    PentraceError,
    SessionExistsError,
    TraceError,
    TraceFormatError,
)
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.inputs import open_regular
from pentrace.infrastructure.storage.layout import DataRoot, new_session_id, validate_name
from pentrace.infrastructure.storage.modes import make_private_dir, missing_dirs
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.reader import ParseReport, read_shard
from pentrace.infrastructure.trace.writer import session_lock_path
from pentrace.projections.resume import closes_context

__all__ = ["ImportResult", "import_session"]

_encoder: Final = JsonEncoder()
_COPY_CHUNK: Final = 1024 * 1024
_PROGRESS_STEP: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import created and counted (``torn_tail_dropped``: a torn last line was cut).

    ``path`` is the first shard; ``paths`` every shard written.  ``source_session_id``
    is the id the file named when the copy took a new one (else None)."""

    session_id: str
    path: Path
    records: int
    requests: int
    tool_calls: int
    bytes: int
    torn_tail_dropped: bool
    paths: tuple[Path, ...] = ()
    source_session_id: str | None = None


@dataclass(slots=True)
class _Scan:
    session_id: str
    day: date
    records: int
    requests: int
    tool_calls: int
    keep_lines: int | None
    # (line, UTC day) of every session_meta that starts a shard: the first, and each one
    # right after a completed compaction_end (the rotation rule of docs/trace-format.md).
    metas: list[tuple[int, date]] = field(default_factory=list)
    closed: bool = False  # the record before was a completed compaction_end
    meta_lines: set[int] = field(default_factory=set)  # every session_meta (a copy names them all)


def _day_of(timestamp: object, source: Path, line: int) -> date:
    if isinstance(timestamp, str):
        try:
            moment = datetime.fromisoformat(timestamp)
        except ValueError:
            pass
        else:
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC).date()
    raise TraceFormatError(
        source, line, "expected session_meta to carry an ISO 8601 timestamp, found none"
    )


def _scan(source: Path, on_progress: Callable[[int], None] | None) -> _Scan:
    """Validate ``source`` strictly and count it, without writing anything."""
    report = ParseReport()
    scan: _Scan | None = None
    pending = 0
    for record in read_shard(source, strict=True, report=report):
        if on_progress is not None:
            pending += len(record.raw) + 1
            if pending >= _PROGRESS_STEP:
                on_progress(pending)
                pending = 0
        if scan is None:
            if record.kind != "session_meta":
                found = repr(record.kind[:40]) if isinstance(record.kind, str) else "no type"
                raise TraceFormatError(
                    source,
                    record.line,
                    f"expected session_meta as the first record, found {found}",
                    hint="a trace starts with session_meta, as pentrace and PenguinHarness "
                    f"write it; `pentrace show {source}` shows what the file holds",
                )
            value = record.value()
            session_id = record.payload().get("session_id")
            if not isinstance(session_id, str):
                raise TraceFormatError(
                    source, record.line, "expected session_meta.session_id to be a string"
                )
            try:
                validate_name("session id", session_id)
            except InvalidNameError as exc:
                raise TraceFormatError(source, record.line, exc.message) from None
            day = _day_of(value.get("timestamp"), source, record.line)
            scan = _Scan(session_id, day, 0, 0, 0, None)
        if record.kind == "session_meta":
            _next_shard(scan, record, source)
            scan.meta_lines.add(record.line)
        scan.closed = closes_context(record)
        scan.records += 1
        if record.kind == "event_msg" and record.ptype == "request_begin":
            scan.requests += 1
        elif record.is_model_msg and record.ptype == "tool_call":
            scan.tool_calls += 1
    if on_progress is not None and pending:
        on_progress(pending)
    if scan is None:
        raise TraceFormatError(source, 1, "expected a session_meta record, found no records")
    torn = report.torn_tail
    scan.keep_lines = torn.line - 1 if torn is not None else None
    return scan


def _next_shard(scan: _Scan, record: Any, source: Path) -> None:
    """Note a ``session_meta`` at ``record``: a new shard, of the same session, starts here."""
    named = record.payload().get("session_id")
    if named != scan.session_id:
        found = repr(named[:80]) if isinstance(named, str) else "no session id"
        raise TraceFormatError(
            source,
            record.line,
            f"expected every session_meta to name session {scan.session_id}, found {found}: "
            "one file holds one session",
            hint="import each session from its own file, or an archive from `export --archive`",
        )
    if scan.metas and not scan.closed:
        return  # a session_meta inside a shard (a model change), not a rotation
    scan.metas.append((record.line, _day_of(record.value().get("timestamp"), source, record.line)))


def _copied_meta(line: bytes, new_id: str, origin: dict[str, Any]) -> bytes:
    """A ``session_meta`` line naming ``new_id`` and, in ``imported_from``, its origin."""
    ending = b"\n" if line.endswith(b"\n") else b""
    envelope = dict(TraceRecord(js_trim(line), 0).value())
    payload = dict(envelope.get("payload") or {})
    payload["session_id"] = new_id
    payload["imported_from"] = origin
    envelope["payload"] = payload
    return _encoder.encode(envelope) + ending


class _Lines:
    """The source's lines in order (up to ``keep_lines``), handed out shard by shard."""

    def __init__(self, handle: IO[bytes], keep_lines: int | None) -> None:
        self._numbered = enumerate(handle, start=1)
        self._keep = keep_lines

    def until(self, last: int | None, rewrite: Callable[[int, bytes], bytes]) -> Iterator[bytes]:
        """The next lines up to line ``last`` (None: to the end), through ``rewrite``."""
        for number, line in self._numbered:
            if self._keep is not None and number > self._keep:
                return
            yield rewrite(number, line)
            if number == last:
                return


def _copy(source: Path, keep_lines: int | None) -> Iterator[bytes]:
    """The file's bytes; with ``keep_lines``, only that many ``\\n``-terminated lines."""
    left = keep_lines
    with open_regular(source, "import source") as handle:
        while chunk := handle.read(_COPY_CHUNK):
            if left is None:
                yield chunk
                continue
            end = 0
            while left > 0:
                found = chunk.find(b"\n", end)
                if found < 0:
                    break
                end = found + 1
                left -= 1
            if left > 0:
                yield chunk
                continue
            yield chunk[:end]
            return


def import_session(
    root: DataRoot,
    project: str,
    agent: str,
    source_path: Path,
    *,
    on_progress: Callable[[int], None] | None = None,
    new_id: bool = False,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ImportResult:
    """Import the trace file ``source_path`` as a new session (its shards from ``001``).

    ``on_progress`` is called with the bytes read as the strict scan (the long
    part of an import) goes, in steps of about a megabyte.  With ``new_id`` the
    session takes a fresh id (from ``clock``) and records the one it came from.

    Raises :class:`~pentrace.errors.TraceFormatError` for a malformed line or a
    missing/invalid ``session_meta``, :class:`~pentrace.errors.SessionExistsError`
    when the session id exists under the agent (without ``new_id``), and
    :class:`~pentrace.errors.TraceLockedError` if a writer holds the session.
    """
    source = Path(source_path)
    if not source.exists():
        raise NoMatchError(
            f"import source {source} does not exist", hint="pass the path of a .jsonl trace"
        )
    # The strict scan reads through input_files: a FIFO, a device or a folder is refused.
    scan = _scan(source, on_progress)
    origin = {"session_id": scan.session_id, "file": str(source.absolute())}
    sid = new_session_id(clock()) if new_id else scan.session_id
    _refuse_existing(root, project, agent, sid, source)
    lock_path = session_lock_path(root, project, agent, sid)
    lock_existed = lock_path.exists()
    metas = scan.metas or [(1, scan.day)]
    made: list[Path] = []
    written: list[Path] = []

    def rewrite(number: int, line: bytes) -> bytes:
        return _copied_meta(line, sid, origin) if new_id and number in scan.meta_lines else line

    size = 0
    try:
        made.extend(_make_dirs(lock_path.parent))
        with SessionLock(lock_path, label=f"session {sid}"):
            # Again under the lock: a writer may have created the session meanwhile.
            _refuse_existing(root, project, agent, sid, source)
            with open_regular(source, "import source") as handle:
                lines = _Lines(handle, scan.keep_lines)
                for index, (_, day) in enumerate(metas, start=1):
                    dest = root.shard_path(project, agent, sid, index, day)
                    made.extend(_make_dirs(dest.parent))
                    last = metas[index][0] - 1 if index < len(metas) else None
                    size += publish_file(dest, lines.until(last, rewrite), overwrite=False)
                    written.append(dest)
    except (PentraceError, OSError, ValueError) as exc:
        for path in written:
            path.unlink(missing_ok=True)
        if not lock_existed:
            lock_path.unlink(missing_ok=True)
        _remove_empty(made)
        if isinstance(exc, PentraceError):
            raise
        if isinstance(exc, ValueError):  # a session_meta line no longer parses
            raise TraceFormatError(source, 1, "the file changed while it was imported") from exc
        raise import_failed(f"{source} as session {sid}", exc) from exc
    return ImportResult(
        sid,
        written[0],
        scan.records,
        scan.requests,
        scan.tool_calls,
        size,
        scan.keep_lines is not None,
        tuple(written),
        scan.session_id if new_id else None,
    )


def _refuse_existing(root: DataRoot, project: str, agent: str, sid: str, source: Path) -> None:
    existing = root.find_shards(project, agent, sid)
    if existing:
        raise SessionExistsError(
            f"cannot import {source}: session {sid} already exists under "
            f"{project}/{agent} ({existing[0].path})",
            hint="import a copy under a new id with --new-id (it records the id it came "
            "from), import under another --agent, or delete the existing session first",
        )


def _make_dirs(folder: Path) -> list[Path]:
    """``mkdir -p``; return the folders it created, deepest last."""
    missing = missing_dirs(folder)[0]
    for path in missing:
        make_private_dir(path)
    return missing


def import_failed(what: str, exc: OSError) -> TraceError:
    """The error for an import of ``what`` that an OS error stopped (after cleaning up)."""
    return TraceError(
        f"cannot import {what}: {exc.strerror or type(exc).__name__}",
        hint="check free space and permissions under the data root",
    )


def _remove_empty(made: list[Path]) -> None:
    """Remove the folders a failed import created, deepest first, when still empty."""
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            # Not empty (another writer put something there) or already gone: leave it.
            continue


def scan_trace(source: Path) -> _Scan:
    """Check ``source`` the way an import does (strict, ``session_meta`` first); write nothing."""
    return _scan(source, None)


def refuse_existing(root: DataRoot, project: str, agent: str, sid: str, source: Path) -> None:
    """Raise :class:`~pentrace.errors.SessionExistsError` when ``sid`` exists under the agent."""
    _refuse_existing(root, project, agent, sid, source)


copy_lines = _copy
make_dirs = _make_dirs
remove_empty = _remove_empty
