"""A tar.gz of a session with its subagent children, and a small manifest.

Children are found through the ``subagent`` pointer records in every shard of
a session, followed recursively (each session once, so a cycle cannot loop).
A pointer to a child that does not exist under the same agent, or whose id is
not a valid name, is listed in the manifest under ``missing`` rather than
failing the export: the parent's trace is still worth archiving.

Layout inside the archive::

    manifest.json
    traces/<yyyy-mm-dd>/<sessionId>_<NNN>.jsonl   (verbatim bytes)

The manifest (``pentrace.session_archive.v1``; fields are only ever added)::

    {"format", "project", "agent", "root_session_id",
     "sessions": [{"session_id", "parent_session_id",
                   "shards": [{"path", "index", "day", "bytes", "sha256"}]}],
     "missing": [{"session_id", "parent_session_id"}]}

The archive is reproducible: entries are sorted, owned by uid 0 and dated
1970, and the gzip header carries no time, so the same traces always give the
same bytes.  Scratchpads are not included.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from pentrace.domain.json_codec import JsonEncoder
from pentrace.errors import InvalidNameError, NotFoundError
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.layout import DataRoot, ShardRef, validate_name
from pentrace.infrastructure.trace.reader import read_session

__all__ = [
    "ARCHIVE_FORMAT",
    "ArchiveResult",
    "ArchiveStream",
    "archive_stream",
    "child_session_ids",
    "export_archive",
]

ARCHIVE_FORMAT: Final = "pentrace.session_archive.v1"
_CHUNK: Final = 1024 * 1024
# Small archives are built in memory; larger ones spill to a temporary file.
_SPOOL_IN_MEMORY: Final = 16 * 1024 * 1024
_encoder: Final = JsonEncoder()


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    """What :func:`export_archive` wrote: file (None for a stream), sessions, missing children."""

    path: Path | None
    session_ids: tuple[str, ...]
    missing: tuple[str, ...]
    bytes: int


def child_session_ids(shards: list[ShardRef]) -> list[str]:
    """The child ids named by ``subagent`` pointer records, in trace order, each once."""
    seen: dict[str, None] = {}
    for record in read_session(shards):
        if record.kind == "event_msg" and record.ptype == "subagent":
            child = record.payload().get("session_id")
            if isinstance(child, str):
                seen.setdefault(child, None)
    return list(seen)


def _valid(session_id: str) -> bool:
    try:
        validate_name("session id", session_id)
    except InvalidNameError:
        return False
    return True


def _collect(
    root: DataRoot, project: str, agent: str, session_id: str
) -> tuple[list[tuple[str, str | None, list[ShardRef]]], list[tuple[str, str]]]:
    """Breadth-first walk from ``session_id`` over subagent pointers."""
    found: list[tuple[str, str | None, list[ShardRef]]] = []
    missing: list[tuple[str, str]] = []
    seen = {session_id}
    queue: list[tuple[str, str | None]] = [(session_id, None)]
    while queue:
        current, parent = queue.pop(0)
        shards = root.find_shards(project, agent, current)
        found.append((current, parent, shards))
        for child in child_session_ids(shards):
            if child in seen:
                continue
            seen.add(child)
            if _valid(child) and root.find_shards(project, agent, child):
                queue.append((child, current))
            else:
                missing.append((child, current))
    return found, missing


def _tar_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o600
    info.mtime = 0
    return info


def _snapshot(path: Path) -> tuple[int, str]:
    """Size and sha256 of the shard as it is now; a writer may only append after it."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        left = size = os.fstat(handle.fileno()).st_size
        while left > 0 and (chunk := handle.read(min(_CHUNK, left))):
            digest.update(chunk)
            left -= len(chunk)
    return size - left, digest.hexdigest()


def _build(
    out: IO[bytes],
    project: str,
    agent: str,
    sessions: list[tuple[str, str | None, list[ShardRef]]],
    missing: list[tuple[str, str]],
) -> None:
    """Write the archive to ``out``, one shard at a time (memory stays bounded)."""
    entries: list[dict[str, Any]] = []
    files: list[tuple[str, Path, int]] = []
    for session_id, parent, shards in sessions:
        listed = []
        for shard in shards:
            size, digest = _snapshot(shard.path)
            name = f"traces/{shard.day.isoformat()}/{shard.path.name}"
            files.append((name, shard.path, size))
            day = shard.day.isoformat()
            listed.append(
                {"path": name, "index": shard.index, "day": day, "bytes": size, "sha256": digest}
            )
        entries.append({"session_id": session_id, "parent_session_id": parent, "shards": listed})
    manifest = _encoder.encode(
        {
            "format": ARCHIVE_FORMAT,
            "project": project,
            "agent": agent,
            "root_session_id": sessions[0][0],
            "sessions": entries,
            "missing": [{"session_id": c, "parent_session_id": p} for c, p in missing],
        }
    )
    with (
        gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        body = manifest + b"\n"
        tar.addfile(_tar_info("manifest.json", len(body)), io.BytesIO(body))
        for name, path, size in sorted(files):
            with path.open("rb") as handle:
                # Exactly the bytes hashed above, even if a writer appended since.
                tar.addfile(_tar_info(name, size), handle)


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    """The built archive, then the spool is closed (a stream read once)."""
    try:
        spool.seek(0)
        while chunk := spool.read(_CHUNK):
            yield chunk
    finally:
        spool.close()


@dataclass(frozen=True, slots=True)
class ArchiveStream:
    """A built archive, read once through ``chunks``: its sessions, missing children, size."""

    session_ids: tuple[str, ...]
    missing: tuple[str, ...]
    size: int
    chunks: Iterator[bytes]


def archive_stream(root: DataRoot, project: str, agent: str, session_id: str) -> ArchiveStream:
    """Build the tar.gz of ``session_id`` and all its subagent descendants.

    Built before anything is returned, so a missing session raises
    :class:`~pentrace.errors.NotFoundError` here rather than halfway through a stream.
    """
    sid = validate_name("session id", session_id)
    if not root.find_shards(project, agent, sid):
        raise NotFoundError(
            f"session {sid} has no trace under {project}/{agent}",
            hint="list sessions with `pentrace list`",
        )
    sessions, missing = _collect(root, project, agent, sid)
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY)  # noqa: SIM115 - _chunks closes it
    try:
        _build(spool, project, agent, sessions, missing)
    except BaseException:
        spool.close()
        raise
    ids, gone = tuple(s[0] for s in sessions), tuple(m[0] for m in missing)
    return ArchiveStream(ids, gone, spool.tell(), _chunks(spool))


def export_archive(
    root: DataRoot, project: str, agent: str, session_id: str, dest: Path | IO[bytes]
) -> ArchiveResult:
    """Write ``session_id`` and all its subagent descendants as a tar.gz to ``dest``.

    ``dest`` is a path (written atomically, replacing an existing file) or a
    binary stream.  Raises :class:`~pentrace.errors.NotFoundError` when the
    session has no trace.
    """
    stream = archive_stream(root, project, agent, session_id)
    if isinstance(dest, Path):
        publish_file(dest, stream.chunks, overwrite=True)
    else:
        for chunk in stream.chunks:
            dest.write(chunk)
    path = dest if isinstance(dest, Path) else None
    return ArchiveResult(path, stream.session_ids, stream.missing, stream.size)
