"""Export streams: the bytes of ``pentrace export`` and of the service's trace and archive
routes, made in one place so both surfaces send the same bytes (ADR 0036).

One JSONL export is **one shard**, by default the latest: one trace file is one
complete model context, and import turns one file into index ``001`` of a new
session, so one shard per file is what round-trips (concatenated shards would
not be a trace PenguinHarness writes: a rotated shard's copied ``session_meta``
would cancel a compaction's closure on resume).  The service may ask for every
shard in a row (``?shard=all``) for reading.  Every shard and the subagent
children go into one archive (:func:`archive_export`).

Verbatim bytes are the shard as it was when opened: a live writer's later
appends are not followed.  Redacted exports decode every record, pass it
through :func:`pentrace.domain.redaction.redact` and re-encode it; lines that
do not parse are left out (they could hold anything) and counted.

The other way in is here too (ADR 0103): a trace file or an archive imported as
a new session, and another agent's store imported as traces.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final, Literal

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.redaction import redact
from pentrace.errors import NoMatchError, NotFoundError, TraceError
from pentrace.infrastructure.sessions.archive import ArchiveStream, archive_stream
from pentrace.infrastructure.sessions.archive_import import import_archive, is_archive
from pentrace.infrastructure.sessions.files import export_archive, import_session
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef, validate_name
from pentrace.infrastructure.trace.reader import ParseReport, read_shard

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pentrace.infrastructure.agents.importer import ImportReport

__all__ = [
    "ExportResult",
    "TraceExport",
    "archive_export",
    "choose_shards",
    "export_archive",
    "export_session",
    "import_agent",
    "import_archive",
    "import_session",
    "is_archive",
    "publish_file",
    "trace_export",
    "write_chunks",
]


def import_agent(
    root: DataRoot, agent: str, paths: Sequence[Path] | None = None, *, project: str | None = None
) -> ImportReport:
    """``import --from AGENT``: that agent's sessions imported into ``root`` as traces (or
    continued where the last import stopped); docs/agents.md."""
    # Imported here: the session commands load eagerly (ADR 0008).
    from pentrace.infrastructure.agents.importer import import_agent as run

    return run(root, agent, paths, project=project)


_CHUNK: Final = 1024 * 1024
_BATCH: Final = 256
_encoder: Final = JsonEncoder()
ShardChoice = int | Literal["all"] | None


@dataclass(frozen=True, slots=True)
class TraceExport:
    """The JSONL bytes of one or more shards, read once through ``chunks``.

    ``report`` counts, once the chunks are read, the lines a redacted export left out.
    """

    ref: SessionRef
    shards: tuple[ShardRef, ...]
    redacted: bool
    chunks: Iterator[bytes]
    report: ParseReport = field(default_factory=ParseReport)

    @property
    def skipped_lines(self) -> int:
        """Malformed lines, healed fragments and torn tails left out (after reading)."""
        report = self.report
        return report.skipped_count + report.healed_count + len(report.torn_tails)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote: the shard it came from, bytes, and (redacted) lines left out."""

    shard: ShardRef
    path: Path | None
    bytes: int
    redacted: bool
    skipped_lines: int


def choose_shards(ref: SessionRef, wanted: ShardChoice) -> tuple[ShardRef, ...]:
    """The latest shard (``None``), every shard (``"all"``) or the shard with index ``wanted``."""
    if not ref.shards:
        raise NotFoundError(
            f"session {ref.session_id} has no trace under {ref.project}/{ref.agent}",
            hint="list sessions with `pentrace list`",
        )
    if wanted is None:
        return (ref.shards[-1],)
    if wanted == "all":
        return ref.shards
    for shard in ref.shards:
        if shard.index == wanted:
            return (shard,)
    have = ", ".join(f"{shard.index:03d}" for shard in ref.shards)
    raise NoMatchError(
        f"session {ref.session_id} has no shard {wanted:03d} (it has {have})",
        hint="omit the shard to export the latest",
    )


def _verbatim(shards: Iterable[ShardRef]) -> Iterator[bytes]:
    for shard in shards:
        with shard.path.open("rb") as handle:
            left = os.fstat(handle.fileno()).st_size
            while left > 0 and (chunk := handle.read(min(_CHUNK, left))):
                left -= len(chunk)
                yield chunk


def _redacted(shards: Iterable[ShardRef], report: ParseReport) -> Iterator[bytes]:
    for shard in shards:
        batch: list[bytes] = []
        for record in read_shard(shard.path, report=report):
            batch.append(_encoder.encode(redact(record.value()).value) + b"\n")
            if len(batch) >= _BATCH:
                yield b"".join(batch)
                batch = []
        if batch:
            yield b"".join(batch)


def trace_export(ref: SessionRef, *, shard: ShardChoice = None, redacted: bool) -> TraceExport:
    """The JSONL export of ``ref``: the chosen shards, verbatim or redacted."""
    shards = choose_shards(ref, shard)
    report = ParseReport()
    chunks = _redacted(shards, report) if redacted else _verbatim(shards)
    return TraceExport(ref, shards, redacted, chunks, report)


def archive_export(root: DataRoot, ref: SessionRef) -> ArchiveStream:
    """The tar.gz of ``ref`` with its subagent children (verbatim, reproducible bytes)."""
    return archive_stream(root, ref.project, ref.agent, ref.session_id)


def write_chunks(chunks: Iterable[bytes], dest: Path | IO[bytes], what: str) -> int:
    """Write ``chunks`` to a path (atomically, replacing a file) or a binary stream; the size."""
    try:
        if isinstance(dest, Path):
            return publish_file(dest, chunks, overwrite=True)
        size = 0
        for chunk in chunks:
            dest.write(chunk)
            size += len(chunk)
        return size
    except OSError as exc:
        raise TraceError(
            f"cannot export {what}: {exc.strerror or type(exc).__name__}",
            hint="check that the trace is readable and the destination writable",
        ) from exc


def export_session(
    root: DataRoot,
    project: str,
    agent: str,
    session_id: str,
    dest: Path | IO[bytes],
    *,
    index: int | None = None,
    redacted: bool = False,
) -> ExportResult:
    """Export one shard of a session (default: the latest) to ``dest`` (a path or a stream)."""
    shards = tuple(root.find_shards(project, agent, validate_name("session id", session_id)))
    ref = SessionRef(project, agent, session_id, shards)
    export = trace_export(ref, shard=index, redacted=redacted)
    size = write_chunks(export.chunks, dest, str(export.shards[0].path))
    path = dest if isinstance(dest, Path) else None
    return ExportResult(export.shards[0], path, size, redacted, export.skipped_lines)
