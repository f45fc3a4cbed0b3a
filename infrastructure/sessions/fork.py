"""Fork: a new session from the committed history of another, up to a turn or an event.

The fork copies the committed records (``projections.replay``: dropped
and open rounds and unsent input are left out) up to the cut, byte for byte,
shard by shard, so a compaction's rotation stays where it was.  Only the
``session_meta`` records change: they take the new ``session_id`` and gain a
``forked_from`` object::

    "forked_from": {"session_id": <source id>, "turn": <turns kept>,
                    "position": <source position of the last record kept>}

PenguinHarness ignores keys it does not know, so the fork stays a valid trace
for both systems.  Records keep their original timestamps; the new id and
the date folder carry the time of the fork.  The source is only read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.errors import (
    NotFoundError,
    PentraceError,
    SessionExistsError,
    TraceError,
    UsageError,
)
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, new_session_id
from pentrace.infrastructure.storage.modes import make_private_dirs
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.reader import ParseReport, read_shard
from pentrace.infrastructure.trace.writer import session_lock_path
from pentrace.projections.replay import ReplayItem, build_replay, fork_cut

__all__ = ["ForkResult", "fork_session", "read_replay", "record_at"]

_encoder: Final = JsonEncoder()


@dataclass(frozen=True, slots=True)
class ForkResult:
    """The new session: its id, shard paths, records and turns kept, and the cut position."""

    session_id: str
    source_session_id: str
    paths: tuple[Path, ...]
    records: int
    turns: int
    position: int


def read_replay(ref: SessionRef, report: ParseReport | None = None) -> list[ReplayItem]:
    """Every record of a session placed in its round (tolerant read: bad lines are skipped)."""
    shared = report if report is not None else ParseReport()

    def pairs() -> Any:
        for shard in ref.shards:
            for record in read_shard(shard.path, report=shared):
                yield shard.index, record

    return build_replay(pairs())


def record_at(ref: SessionRef, position: int) -> TraceRecord:
    """The record at ``position`` (counted as :func:`read_replay` counts, from 1), reading no
    further than it; :class:`NotFoundError` when the session has fewer records."""
    if position >= 1:
        seen = 0
        for shard in ref.shards:
            for record in read_shard(shard.path, report=ParseReport()):
                seen += 1
                if seen == position:
                    return record
    raise NotFoundError(
        f"session {ref.project}/{ref.agent}/{ref.session_id} has no record {position}",
        hint="positions start at 1; take the position from the record's #N",
    )


def _check_range(
    ref: SessionRef, items: list[ReplayItem], turn: int | None, event: int | None
) -> None:
    if turn is not None and event is not None:
        raise UsageError(
            "expected at most one of --at-turn and --at-event, found both",
            hint="fork at a turn (--at-turn 3) or at an event position (--at-event 120)",
        )
    turns = max((item.turn for item in items), default=0)
    if turn is not None and not 1 <= turn <= turns:
        raise UsageError(
            f"expected a turn between 1 and {turns} for session {ref.session_id}, found {turn}",
            hint="`pentrace show SESSION` prints the number of turns",
        )
    if event is not None and not 1 <= event <= len(items):
        raise UsageError(
            f"expected an event position between 1 and {len(items)} for session "
            f"{ref.session_id}, found {event}",
            hint="`pentrace replay SESSION --json` lists every record's position",
        )


def _meta_line(ref: SessionRef, record: TraceRecord, new_id: str, origin: dict[str, Any]) -> bytes:
    envelope = dict(record.value())
    payload = envelope.get("payload")
    if not isinstance(payload, dict):
        raise TraceError(
            f"cannot fork {ref.key.reference}: its session_meta (line {record.line}) has a payload "
            f"that is {_json_kind(payload)}, not an object, so it cannot carry the new id",
            hint="`pentrace audit SESSION` shows the record; fork a session with a valid meta",
        )
    payload = dict(payload)
    payload["session_id"] = new_id
    payload["forked_from"] = origin
    envelope["payload"] = payload
    return _encoder.encode(envelope)


def _json_kind(value: Any) -> str:
    """How JSON would name ``value``'s type, with an article."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def fork_session(
    root: DataRoot,
    ref: SessionRef,
    *,
    at_turn: int | None = None,
    at_event: int | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    session_id: str | None = None,
) -> ForkResult:
    """Write a new session under the same agent from ``ref``'s committed history.

    With neither ``at_turn`` nor ``at_event`` the whole committed history is
    copied.  The cut never splits a round or a compaction
    (:func:`~pentrace.projections.replay.fork_cut`).
    """
    items = read_replay(ref)
    _check_range(ref, items, at_turn, at_event)
    cut = fork_cut(items, at_turn=at_turn, at_event=at_event)
    kept = [item for item in items[:cut] if item.committed]
    if not kept or kept[0].record.kind != "session_meta":
        raise UsageError(
            f"session {ref.session_id} has no committed history before the cut to fork from",
            hint="fork at a later turn or event",
        )
    now = clock()
    new_id = session_id or new_session_id(now)
    turns = max(item.turn for item in kept)
    origin = {"session_id": ref.session_id, "turn": turns, "position": kept[-1].position}
    shards: dict[int, list[bytes]] = {}
    for item in kept:
        record = item.record
        line = (
            _meta_line(ref, record, new_id, origin) if record.kind == "session_meta" else record.raw
        )
        shards.setdefault(item.shard, []).append(line + b"\n")
    paths = _publish(root, ref, new_id, now, list(shards.values()))
    return ForkResult(new_id, ref.session_id, paths, len(kept), turns, kept[-1].position)


def _publish(
    root: DataRoot, ref: SessionRef, new_id: str, now: datetime, shards: list[list[bytes]]
) -> tuple[Path, ...]:
    project, agent = ref.project, ref.agent
    lock_path = session_lock_path(root, project, agent, new_id)
    day = now.astimezone(UTC).date()
    written: list[Path] = []
    try:
        make_private_dirs(lock_path.parent)
        with SessionLock(lock_path, label=f"session {new_id}"):
            if root.find_shards(project, agent, new_id):
                raise SessionExistsError(
                    f"cannot fork {ref.session_id}: session {new_id} already exists "
                    f"under {project}/{agent}",
                    hint="run the fork again for a fresh id",
                )
            for index, lines in enumerate(shards, start=1):
                dest = root.shard_path(project, agent, new_id, index, day)
                make_private_dirs(dest.parent)
                publish_file(dest, lines, overwrite=False)
                written.append(dest)
    except OSError as exc:
        _discard(written)
        raise TraceError(
            f"cannot write the fork of {ref.session_id}: {exc.strerror or type(exc).__name__}",
            hint="check free space and permissions under the data root",
        ) from exc
    except PentraceError:
        _discard(written)
        raise
    return tuple(written)


def _discard(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
