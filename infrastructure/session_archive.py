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
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from pentrace.errors import InvalidNameError, NotFoundError
from pentrace.infrastructure.atomic_files import publish_file
from pentrace.infrastructure.layout import DataRoot, ShardRef, validate_name
from pentrace.infrastructure.trace_reader import read_session

__all__ = ["ARCHIVE_FORMAT", "ArchiveResult", "child_session_ids", "export_archive"]

ARCHIVE_FORMAT: Final = "pentrace.session_archive.v1"
_encoder: Final = msgspec.json.Encoder()


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


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o600
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _build(
    project: str,
    agent: str,
    sessions: list[tuple[str, str | None, list[ShardRef]]],
    missing: list[tuple[str, str]],
) -> bytes:
    buffer = io.BytesIO()
    entries: list[dict[str, Any]] = []
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        files: list[tuple[str, bytes]] = []
        for session_id, parent, shards in sessions:
            listed = []
            for shard in shards:
                data = shard.path.read_bytes()
                name = f"traces/{shard.day.isoformat()}/{shard.path.name}"
                files.append((name, data))
                digest = hashlib.sha256(data).hexdigest()
                listed.append(
                    {
                        "path": name,
                        "index": shard.index,
                        "day": shard.day.isoformat(),
                        "bytes": len(data),
                        "sha256": digest,
                    }
                )
            entries.append(
                {"session_id": session_id, "parent_session_id": parent, "shards": listed}
            )
        manifest = {
            "format": ARCHIVE_FORMAT,
            "project": project,
            "agent": agent,
            "root_session_id": sessions[0][0],
            "sessions": entries,
            "missing": [{"session_id": c, "parent_session_id": p} for c, p in missing],
        }
        _add(tar, "manifest.json", _encoder.encode(manifest) + b"\n")
        for name, data in sorted(files):
            _add(tar, name, data)
    return buffer.getvalue()


def export_archive(
    root: DataRoot, project: str, agent: str, session_id: str, dest: Path | IO[bytes]
) -> ArchiveResult:
    """Write ``session_id`` and all its subagent descendants as a tar.gz to ``dest``.

    ``dest`` is a path (written atomically, replacing an existing file) or a
    binary stream.  Raises :class:`~pentrace.errors.NotFoundError` when the
    session has no trace.
    """
    sid = validate_name("session id", session_id)
    if not root.find_shards(project, agent, sid):
        raise NotFoundError(
            f"session {sid} has no trace under {project}/{agent}",
            hint="list sessions with `pentrace sessions`",
        )
    sessions, missing = _collect(root, project, agent, sid)
    data = _build(project, agent, sessions, missing)
    ids = tuple(s[0] for s in sessions)
    gone = tuple(m[0] for m in missing)
    if isinstance(dest, Path):
        publish_file(dest, _once(data), overwrite=True)
        return ArchiveResult(dest, ids, gone, len(data))
    dest.write(data)
    return ArchiveResult(None, ids, gone, len(data))


def _once(data: bytes) -> Iterator[bytes]:
    yield data
