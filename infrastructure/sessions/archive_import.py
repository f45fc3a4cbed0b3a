"""Import what ``pentrace export --archive`` wrote: a session and its subagent children.

The archive (:mod:`pentrace.infrastructure.sessions.archive`) is checked
strictly before anything is written:

* it is a gzip'd tar of regular files only, ``manifest.json`` plus exactly
  the shards the manifest lists (no links, sparse files, absolute or ``..``
  paths, extra or duplicate members, at most :data:`_MAX_MEMBERS` headers);
* every member is judged by its header before a byte is unpacked: listed, a
  plain file, of its listed size; the listed sizes must fit the scratch
  folder, each copy stops at its size and fails fast on content no trace has
  (ADR 0089);
* the manifest has the known ``format``; every shard's path is
  ``traces/<day>/<sessionId>_<NNN>.jsonl`` for its own session, day and index,
  the indexes of a session run 1..n, and size and sha256 match the bytes;
* every shard parses strictly, starts with the ``session_meta`` of its session
  (the same rules as a plain import: a torn last line, as in a live shard
  that was archived, is left out of the copy and counted);
* no session of the archive exists under the target agent yet (an import
  always creates new sessions).

Then the shards are published one by one under each session's lock; if one
fails, every shard written so far is removed again.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tarfile
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from pentrace.errors import NotFoundError, PentraceError, TraceError, TraceFormatError
from pentrace.infrastructure.sessions.archive import ARCHIVE_FORMAT
from pentrace.infrastructure.sessions.trace_import import (
    copy_lines,
    import_failed,
    make_dirs,
    refuse_existing,
    remove_empty,
    scan_trace,
)
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.layout import DataRoot, validate_name
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.reader import MAX_LINE_BYTES
from pentrace.infrastructure.trace.writer import session_lock_path

__all__ = ["ArchiveImportResult", "import_archive", "is_archive"]

_GZIP_MAGIC: Final = b"\x1f\x8b"
_SHARD_PATH: Final = re.compile(r"traces/(\d{4}-\d{2}-\d{2})/([^/]+)_(\d{3})\.jsonl")
_MANIFEST_LIMIT: Final = 16 * 1024 * 1024
_CHUNK: Final = 1024 * 1024
# Far more headers than any export writes (a session per subagent, a shard per compaction).
_MAX_MEMBERS: Final = 10_000
# Left free beside the unpacked shards (the import then copies them under the root).
_ROOM_MARGIN: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ArchiveImportResult:
    """The sessions an archive import created (root first) and the shard files written."""

    root_session_id: str
    session_ids: tuple[str, ...]
    paths: tuple[Path, ...]
    bytes: int
    torn_tails_dropped: int


@dataclass(frozen=True, slots=True)
class _Shard:
    session_id: str
    index: int
    day: date
    member: str
    size: int
    sha256: str


def is_archive(path: Path) -> bool:
    """True when ``path`` starts like a gzip file (what ``export --archive`` writes)."""
    with path.open("rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def _bad(source: Path, what: str) -> TraceError:
    return TraceError(
        f"cannot import archive {source}: {what}",
        hint="import takes what `pentrace export --archive` wrote, unchanged",
    )


def _headers(source: Path, tar: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    """Every member's header, read before anything is unpacked; at most :data:`_MAX_MEMBERS`."""
    headers: dict[str, tarfile.TarInfo] = {}
    while (member := tar.next()) is not None:
        if member.name in headers:
            raise _bad(
                source, f"expected only the listed files, found also duplicates of {member.name!r}"
            )
        if len(headers) >= _MAX_MEMBERS:
            raise _bad(source, f"expected at most {_MAX_MEMBERS} members, found more")
        headers[member.name] = member
    return headers


def _manifest(
    source: Path, tar: tarfile.TarFile, headers: dict[str, tarfile.TarInfo]
) -> dict[str, Any]:
    member = headers.get("manifest.json")
    if member is None:
        raise _bad(source, "expected manifest.json, found none")
    handle = tar.extractfile(member) if _plain_file(member) else None
    if handle is None or member.size > _MANIFEST_LIMIT:
        raise _bad(source, "expected manifest.json to be a small regular file")
    try:
        value = msgspec.json.decode(handle.read(_MANIFEST_LIMIT + 1))
    except msgspec.DecodeError as exc:
        raise _bad(source, f"manifest.json is not JSON ({exc})") from None
    except RecursionError:
        raise _bad(source, "manifest.json is nested too deeply to be a manifest") from None
    if not isinstance(value, dict) or value.get("format") != ARCHIVE_FORMAT:
        found = value.get("format") if isinstance(value, dict) else None
        raise _bad(source, f"expected manifest format {ARCHIVE_FORMAT}, found {found!r}")
    return value


def _plain_file(member: tarfile.TarInfo) -> bool:
    """A regular file, not a link, device, folder or sparse file (which tar calls regular)."""
    return member.type in (tarfile.REGTYPE, tarfile.AREGTYPE) and not member.issparse()


def _named(source: Path, manifest: dict[str, Any], key: str) -> str:
    value = manifest.get(key)
    if not isinstance(value, str):
        raise _bad(source, f"expected the manifest to name the {key}, found {value!r}")
    return value


def _shards(source: Path, manifest: dict[str, Any]) -> list[_Shard]:
    sessions = manifest.get("sessions")
    if not isinstance(sessions, list) or not sessions:
        raise _bad(source, "expected the manifest to list at least one session")
    shards: list[_Shard] = []
    seen: set[str] = set()
    for entry in sessions:
        sid = entry.get("session_id") if isinstance(entry, dict) else None
        if not isinstance(sid, str) or sid in seen:
            raise _bad(source, f"expected unique session ids in the manifest, found {sid!r}")
        seen.add(validate_name("session id", sid))
        listed = entry.get("shards")
        if not isinstance(listed, list) or not listed:
            raise _bad(source, f"session {sid} lists no shards")
        for number, shard in enumerate(listed, start=1):
            shards.append(_shard(source, sid, number, shard))
    return shards


def _shard(source: Path, sid: str, number: int, shard: Any) -> _Shard:
    if not isinstance(shard, dict):
        raise _bad(source, f"session {sid}: shard {number} is not an object")
    path, index, size = shard.get("path"), shard.get("index"), shard.get("bytes")
    digest, day = shard.get("sha256"), shard.get("day")
    match = _SHARD_PATH.fullmatch(path) if isinstance(path, str) else None
    if (
        match is None
        or match.group(2) != sid
        or int(match.group(3)) != number
        or index != number
        or day != match.group(1)
        or not isinstance(size, int)
        or not isinstance(digest, str)
    ):
        raise _bad(
            source,
            f"session {sid}: shard {number} has an unexpected entry {path!r} (index {index})",
        )
    try:
        parsed = date.fromisoformat(day)
    except ValueError:
        raise _bad(source, f"session {sid}: shard {number} has no valid day ({day!r})") from None
    return _Shard(sid, number, parsed, match.group(0), size, digest)


def _check_room(source: Path, shards: list[_Shard], into: Path) -> None:
    """Refuse before copying when the listed sizes cannot fit the scratch folder."""
    total = sum(shard.size for shard in shards)
    free = shutil.disk_usage(into).free
    if total + _ROOM_MARGIN > free:
        raise _bad(
            source,
            f"its shards need {total} bytes unpacked, more than the {free} bytes free "
            "for unpacking them",
        )


def _check_headers(source: Path, shards: list[_Shard], headers: dict[str, tarfile.TarInfo]) -> None:
    """Names, kinds and sizes from the headers alone, before a byte is unpacked."""
    extra = sorted(set(headers) - {s.member for s in shards} - {"manifest.json"})
    if extra:
        raise _bad(source, f"expected only the listed files, found also {extra[:20]}")
    for shard in shards:
        member = headers.get(shard.member)
        if member is None:
            raise _bad(source, f"expected every listed shard, found no {shard.member!r}")
        if not _plain_file(member):
            raise _bad(source, f"{shard.member} is not a regular file")
        if member.size != shard.size:
            raise _bad(
                source,
                f"{shard.member} does not match its size and sha256 in the manifest "
                f"({member.size} bytes by its header, {shard.size} listed)",
            )


def _extract(
    source: Path,
    tar: tarfile.TarFile,
    shards: list[_Shard],
    headers: dict[str, tarfile.TarInfo],
    into: Path,
) -> list[Path]:
    """Copy each listed member out (checked by :func:`_check_headers` first), then its hash."""
    _check_headers(source, shards, headers)
    _check_room(source, shards, into)
    files = []
    for number, shard in enumerate(shards):
        handle: IO[bytes] | None = tar.extractfile(headers[shard.member])
        if handle is None:
            raise _bad(source, f"{shard.member} is not a regular file")
        target = into / f"{number:05d}.jsonl"
        if _copy_checked(source, shard, handle, target) != shard.sha256:
            raise _bad(source, f"{shard.member} does not match its size and sha256 in the manifest")
        files.append(target)
    return files


def _copy_checked(source: Path, shard: _Shard, handle: IO[bytes], target: Path) -> str:
    """Copy one member (at most its listed size), failing fast on bytes no trace holds."""
    digest = hashlib.sha256()
    copied = line = 0
    started = False
    with target.open("wb") as out:
        while chunk := handle.read(min(_CHUNK, shard.size - copied + 1)):
            copied += len(chunk)
            if copied > shard.size:
                raise _bad(source, f"{shard.member} holds more than its {shard.size} bytes")
            if not started and chunk.lstrip():
                started = True
                if not chunk.lstrip().startswith(b"{"):
                    raise _bad(source, f"{shard.member} does not start with a JSON record")
            newline = chunk.rfind(b"\n")
            line = len(chunk) - newline - 1 if newline >= 0 else line + len(chunk)
            if line > MAX_LINE_BYTES:
                raise _bad(
                    source,
                    f"{shard.member} has a line longer than {MAX_LINE_BYTES} bytes; "
                    "no record is that long",
                )
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _check_traces(source: Path, shards: list[_Shard], files: list[Path]) -> list[int | None]:
    """Parse every shard strictly; how many lines to keep of each (None: all; a torn tail goes)."""
    keep: list[int | None] = []
    for shard, path in zip(shards, files, strict=True):
        try:
            scan = scan_trace(path)
        except TraceFormatError as exc:
            raise _bad(source, f"{shard.member}:{exc.line}: {exc.reason}") from None
        except TraceError as exc:
            # Name the member, never the scratch copy.
            reason = exc.message.replace(f"trace file {path}", shard.member)
            raise _bad(source, reason.replace(str(path), shard.member)) from None
        if scan.session_id != shard.session_id:
            raise _bad(
                source,
                f"{shard.member} belongs to session {scan.session_id}, not {shard.session_id}",
            )
        keep.append(scan.keep_lines)
    return keep


def import_archive(
    root: DataRoot, project: str | None, agent: str | None, source: Path
) -> ArchiveImportResult:
    """Create every session of the archive ``source`` under ``project``/``agent``.

    Either may be None: then the one the manifest names (where it was exported from).
    """
    if not source.is_file():
        raise NotFoundError(f"import source {source} is not a readable file")
    with tempfile.TemporaryDirectory(prefix="pentrace-import-") as scratch:
        try:
            with tarfile.open(source, mode="r:gz") as tar:
                headers = _headers(source, tar)
                manifest = _manifest(source, tar, headers)
                shards = _shards(source, manifest)
                files = _extract(source, tar, shards, headers, Path(scratch))
                project = validate_name("project", project or _named(source, manifest, "project"))
                agent = validate_name("agent", agent or _named(source, manifest, "agent"))
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise _bad(source, f"not a readable tar.gz ({exc})") from None
        keep = _check_traces(source, shards, files)
        ids = list(dict.fromkeys(s.session_id for s in shards))
        for sid in ids:
            refuse_existing(root, project, agent, sid, source)
        return _publish(
            root, project, agent, source, list(zip(shards, files, keep, strict=True)), ids
        )


def _publish(
    root: DataRoot,
    project: str,
    agent: str,
    source: Path,
    planned: list[tuple[_Shard, Path, int | None]],
    ids: list[str],
) -> ArchiveImportResult:
    written: list[Path] = []
    made: list[Path] = []
    total = torn = 0
    try:
        with ExitStack() as locks:
            for sid in ids:
                lock = session_lock_path(root, project, agent, sid)
                made.extend(make_dirs(lock.parent))
                locks.enter_context(SessionLock(lock, label=f"session {sid}"))
                refuse_existing(root, project, agent, sid, source)  # again, under the lock
            for shard, path, keep_lines in planned:
                dest = root.shard_path(project, agent, shard.session_id, shard.index, shard.day)
                made.extend(make_dirs(dest.parent))
                # As a plain import does: a torn last line (a live shard archived) is left out.
                total += publish_file(dest, copy_lines(path, keep_lines), overwrite=False)
                written.append(dest)
                torn += keep_lines is not None
    except (PentraceError, OSError) as exc:
        for path in written:
            path.unlink(missing_ok=True)
        remove_empty(made)
        if isinstance(exc, PentraceError):
            raise
        raise import_failed(f"archive {source}", exc) from exc
    return ArchiveImportResult(ids[0], tuple(ids), tuple(written), total, torn)
