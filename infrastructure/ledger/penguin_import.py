"""Import a Penguin-format ledger file into a pentrace ledger, keeping event ids.

Rows are read read-only in Penguin's insertion order (``rowid``) and stored
with their own ``inserted_at``, so retention ages them as Penguin would have
and a client's ``Last-Event-ID`` from Penguin still resumes.  Each row ends
up in one of these outcomes:

* **imported**: stored under its own id;
* **already held**: the target holds it byte-identically (a second import is
  a no-op);
* **collision**: the target holds its id with other content, or another id
  at its (stream, sequence); it is left out and reported;
* **redacted on import**: pentrace's policy found secrets Penguin's key
  rules missed (W12); the secrets are hidden, the privacy block says so, and
  the row is stored under its id;
* **invalid**: not a RuntimeEvent envelope pentrace accepts; reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sqlalchemy import select

from pentrace.domain.redaction import is_redacted, redact
from pentrace.errors import LedgerError, LedgerFormatError
from pentrace.infrastructure.ledger.backend.codec import read_plain
from pentrace.infrastructure.ledger.backend.formats import (
    file_format,
    penguin_rows,
    penguin_rows_held,
)
from pentrace.infrastructure.ledger.backend.schema import (
    event_id_of,
    ids_match,
    positions_match,
)
from pentrace.infrastructure.ledger.rows import envelope_row
from pentrace.infrastructure.ledger.store import RuntimeEventLedger

__all__ = ["ImportReport", "RowNote", "import_penguin_ledger", "move_aside", "penguin_row_count"]

_PAGE: Final = 500
_FOUND: Final = {
    "pentrace": "a pentrace ledger (nothing to import)",
    "empty": "an empty database",
    "other": "a database without a runtime_events table",
    "foreign": "a runtime_events table of another shape",
    "penguin": "a Penguin ledger",
}
_ORDER: Final = (
    "id", "schema_version", "type", "category", "source", "subject", "time", "stream_id",
    "sequence", "scope", "correlation", "actor", "privacy", "payload", "projections",
)  # fmt: skip


@dataclass(frozen=True)
class RowNote:
    """One row that was not imported as it stood: its id, Penguin rowid and why."""

    event_id: str
    rowid: int
    reason: str


@dataclass
class ImportReport:
    """What :func:`import_penguin_ledger` did with each row of the Penguin file."""

    source: str
    target: str
    read: int = 0
    imported: int = 0
    already_held: int = 0
    collisions: list[RowNote] = field(default_factory=list)
    redacted: list[RowNote] = field(default_factory=list)
    invalid: list[RowNote] = field(default_factory=list)


def _ordered(envelope: dict[str, Any]) -> dict[str, Any]:
    # Penguin stores sorted keys; put the envelope's own keys back in their order.
    first: dict[str, Any] = {key: envelope[key] for key in _ORDER if key in envelope}
    return {**first, **{key: value for key, value in envelope.items() if key not in first}}


def _redacted(envelope: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The envelope with what pentrace's policy hides hidden; ids are kept as they are."""
    kept: dict[str, Any] = {k: envelope[k] for k in ("id", "stream_id") if k in envelope}
    result = redact({key: value for key, value in envelope.items() if key not in kept})
    found = [
        path.removeprefix("payload.") if path.startswith("payload") else f"@{path}"
        for path in result.paths
        if not path.startswith("privacy")
    ]
    clean = _ordered({**result.value, **kept})
    privacy = envelope.get("privacy")
    given = privacy.get("redacted_fields") if isinstance(privacy, Mapping) else None
    fields = [*given, *found] if isinstance(given, list) else found
    clean["privacy"] = {"classification": "sensitive", "redacted": True, "redacted_fields": fields}
    return clean, found


def _prepare(
    page: list[tuple[int, str, int, str]], report: ImportReport
) -> list[tuple[int, dict[str, Any]]]:
    prepared = []
    for rowid, event_id, inserted_at, text in page:
        try:
            envelope = json.loads(text)
            if not isinstance(envelope, dict):
                raise ValueError("not a JSON object")
            envelope = _ordered(envelope)
            if not is_redacted(envelope):
                envelope, found = _redacted(envelope)
                report.redacted.append(RowNote(event_id, rowid, "hid " + ", ".join(found)))
            prepared.append((rowid, envelope_row(envelope, int(inserted_at or 0))))
        except (ValueError, LedgerError) as error:
            report.invalid.append(RowNote(str(event_id), rowid, str(error)[:300]))
    return prepared


def _keep_new(
    target: RuntimeEventLedger, prepared: list[tuple[int, dict[str, Any]]], report: ImportReport
) -> list[dict[str, Any]]:
    events = target.db.tables.events
    ids = [row["event_id"] for _, row in prepared]
    positions = [(row["stream_id"], row["sequence"]) for _, row in prepared]
    event_id_column = event_id_of(events)
    digest = target.db.digest_streams
    with target.db.reading("check the ledger for imported ids") as conn:
        held = conn.execute(
            select(event_id_column, events.c.event_json).where(
                ids_match(events, ids, digest=digest)
            )
        ).all()
        wanted = set(ids)
        by_id = {
            str(row[0]): data
            for row, data in zip(held, read_plain(target.db, held, 1, None), strict=True)
            if str(row[0]) in wanted
        }
        by_position = {
            (str(stream), int(sequence)): str(event_id)
            for stream, sequence, event_id in conn.execute(
                select(events.c.stream_id, events.c.sequence, event_id_column).where(
                    positions_match(events, positions, digest=digest)
                )
            )
        }
    fresh: list[dict[str, Any]] = []
    for rowid, row in prepared:
        event_id, position = row["event_id"], (row["stream_id"], row["sequence"])
        if event_id in by_id:
            if by_id[event_id] == row["event_json"]:
                report.already_held += 1
            else:
                report.collisions.append(
                    RowNote(event_id, rowid, "the ledger holds this id with other content")
                )
        elif position in by_position:
            report.collisions.append(
                RowNote(
                    event_id,
                    rowid,
                    f"the ledger holds {by_position[position]} at stream {position[0]}, "
                    f"sequence {position[1]}",
                )
            )
        else:
            by_id[event_id] = row["event_json"]
            by_position[position] = event_id
            fresh.append(row)
    return fresh


def penguin_row_count(path: Path) -> int:
    """Rows of the Penguin ledger file at ``path`` (read-only); raises unless it is one."""
    _check_source(path)
    return penguin_rows_held(path)


def _check_source(source: Path) -> None:
    if not source.is_file():
        raise LedgerFormatError(
            f"no Penguin ledger at {source}: expected a SQLite file, found none",
            hint="pass the path of Penguin's runtime_events.db",
        )
    found = file_format(source, "runtime_events")
    if found != "penguin":
        raise LedgerFormatError(
            f"{source}: expected a Penguin-format ledger, found {_FOUND[found]}",
            hint="`pentrace ledger import-penguin` reads files Penguin's ledger wrote",
        )


def import_penguin_ledger(
    source: Path,
    target: RuntimeEventLedger,
    *,
    on_rows: Callable[[int], None] | None = None,
) -> ImportReport:
    """Copy every row of the Penguin ledger at ``source`` into ``target``; see the module doc.

    ``on_rows`` is told how many rows each page read (a progress bar).
    """
    _check_source(source)
    report = ImportReport(str(source), target.db.where)
    for page in penguin_rows(source, _PAGE):
        report.read += len(page)
        fresh = _keep_new(target, _prepare(page, report), report)
        report.imported += target.extend_rows(fresh)
        if on_rows is not None:
            on_rows(len(page))
    return report


def move_aside(path: Path) -> Path:
    """Rename a Penguin ledger (with its ``-wal`` and ``-shm``) to ``<stem>.penguin<suffix>``,
    so a pentrace ledger can take its place; returns the new path.  Stop Penguin first."""
    moved = path.with_name(f"{path.stem}.penguin{path.suffix}")
    if moved.exists():
        raise LedgerFormatError(
            f"cannot move {path} aside: {moved} already exists",
            hint=f"import from {moved} instead, or remove it first",
        )
    for suffix in ("-wal", "-shm"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            sidecar.rename(moved.with_name(moved.name + suffix))
    path.rename(moved)
    return moved
