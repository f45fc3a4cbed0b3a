"""Import what ``pentrace export --archive`` wrote: a session and its subagent children.

The archive (:mod:`pentrace.infrastructure.sessions.archive`) is checked
strictly before anything is written:

* it is a gzip'd tar of regular files only, ``manifest.json`` plus exactly the
  shards the manifest lists (no links, no absolute or ``..`` paths, no extra
  or duplicate members);
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
from pentrace.infrastructure.trace.writer import session_lock_path

__all__ = ["ArchiveImportResult", "import_archive", "is_archive"]

_GZIP_MAGIC: Final = b"\x1f\x8b"
_SHARD_PATH: Final = re.compile(r"traces/(\d{4}-\d{2}-\d{2})/([^/]+)_(\d{3})\.jsonl")
_MANIFEST_LIMIT: Final = 16 * 1024 * 1024
_CHUNK: Final = 1024 * 1024


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


def _manifest(source: Path, tar: tarfile.TarFile) -> dict[str, Any]:
    try:
        member = tar.getmember("manifest.json")
    except KeyError:
        raise _bad(source, "expected manifest.json, found none") from None
    handle = tar.extractfile(member) if member.isfile() else None
    if handle is None or member.size > _MANIFEST_LIMIT:
        raise _bad(source, "expected manifest.json to be a small regular file")
    try:
        value = msgspec.json.decode(handle.read())
    except msgspec.DecodeError as exc:
        raise _bad(source, f"manifest.json is not JSON ({exc})") from None
    if not isinstance(value, dict) or value.get("format") != ARCHIVE_FORMAT:
        found = value.get("format") if isinstance(value, dict) else None
        raise _bad(source, f"expected manifest format {ARCHIVE_FORMAT}, found {found!r}")
    return value


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


def _extract(source: Path, tar: tarfile.TarFile, shards: list[_Shard], into: Path) -> list[Path]:
    """Copy each listed member out, checking it is a regular file of the listed size and hash."""
    expected = {s.member for s in shards} | {"manifest.json"}
    names = [m.name for m in tar.getmembers()]
    extra = sorted(set(names) - expected)
    if extra or len(names) != len(set(names)):
        raise _bad(source, f"expected only the listed files, found also {extra or 'duplicates'}")
    files = []
    for number, shard in enumerate(shards):
        member = tar.getmember(shard.member)
        handle: IO[bytes] | None = tar.extractfile(member) if member.isfile() else None
        if handle is None:
            raise _bad(source, f"{shard.member} is not a regular file")
        digest = hashlib.sha256()
        target = into / f"{number:05d}.jsonl"
        with target.open("wb") as out:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if member.size != shard.size or digest.hexdigest() != shard.sha256:
            raise _bad(source, f"{shard.member} does not match its size and sha256 in the manifest")
        files.append(target)
    return files


def _check_traces(source: Path, shards: list[_Shard], files: list[Path]) -> list[int | None]:
    """Parse every shard strictly; how many lines to keep of each (None: all; a torn tail goes)."""
    keep: list[int | None] = []
    for shard, path in zip(shards, files, strict=True):
        try:
            scan = scan_trace(path)
        except TraceFormatError as exc:
            raise _bad(source, f"{shard.member}:{exc.line}: {exc.reason}") from None
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
                manifest = _manifest(source, tar)
                shards = _shards(source, manifest)
                files = _extract(source, tar, shards, Path(scratch))
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
