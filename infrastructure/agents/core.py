"""The shared core of the foreign-session readers: source items, records, usage, the report.

A reader turns each *source item* (a line of a JSONL file, a JSON file, a
database row) into pentrace trace records.  Every record carries the
``foreign`` envelope key (ADR 0095)::

    "foreign": {"agent": "claude-code", "source": "<file>", "at": 12, "end": 5120,
                "row": <the source line, verbatim>}

``row`` rides on the *first* record an item maps to (the others name the
same ``at``), so each source line is kept exactly once, beside what it became.
An item that maps to nothing becomes an ``event_msg`` of payload type
:data:`UNMAPPED` (ignored by resume and by PenguinHarness, kept by every
reader), so nothing the agent wrote is lost and a better mapping can
re-derive everything from the trace alone.

:class:`Mapper` is the base every agent's mapper extends: it owns the
sessions it writes (:class:`Track`, small and serialisable, so a cursor can
carry it), builds the records in PenguinHarness's field order and asks the
:class:`UsageBook` what a usage row adds (each agent's duplicate rules are
expressed as keys: a row repeated under the same key adds only what it has
above the largest seen before).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

import msgspec

from pentrace.domain.json_codec import JsonEncoder, loads_strict
from pentrace.domain.omnimessage import format_timestamp
from pentrace.domain.records import JS_WHITESPACE

__all__ = [
    "AGENTS",
    "FOREIGN_KEY",
    "MALFORMED",
    "UNMAPPED",
    "Counts",
    "ImportReport",
    "Item",
    "Mapper",
    "Out",
    "Track",
    "UsageBook",
    "line_items",
    "normal_stamp",
    "parse_json",
    "project_name",
    "walk_files",
]

#: The agent names pentrace files foreign sessions under (``stats --by agent`` keys).
AGENTS: Final = ("claude-code", "codex", "opencode", "gemini")
#: The envelope key that carries a record's source (ignored by PenguinHarness).
FOREIGN_KEY: Final = "foreign"
#: The ``event_msg`` payload type of a source item that maps to no OmniMessage record.
UNMAPPED: Final = "foreign_record"
#: A source line longer than this is reported and kept as its length only.
MAX_LINE: Final = 64 * 1024 * 1024
#: Counts in the order input (fresh), output, cache read, cache write.
Counts = tuple[int, int, int, int]
ZERO: Final[Counts] = (0, 0, 0, 0)
_EPOCH: Final = "1970-01-01T00:00:00.000Z"
_READ_CHUNK: Final = 1024 * 1024
_encoder: Final = JsonEncoder()
_decoder: Final = msgspec.json.Decoder()


class _Malformed:
    """The value of a source item that is not JSON."""

    def __repr__(self) -> str:
        return "MALFORMED"


MALFORMED: Final = _Malformed()


class Item(NamedTuple):
    """One source item: a line (``at`` its 1-based number, ``end`` the offset just past its
    bytes, before its newline; ``next`` where reading goes on) or a record (``at`` its id,
    ``end`` 0).  ``value`` is the parsed JSON or :data:`MALFORMED`; ``size`` is the item's
    length when it was too long to keep."""

    raw: bytes
    at: int | str
    end: int
    value: Any
    size: int = 0
    next: int = 0


class Out(NamedTuple):
    """One record for the trace of ``project``/``session``; ``rotate`` starts a new shard
    with it (after a completed compaction).  ``day`` is the record's UTC date."""

    project: str
    session: str
    record: bytes
    day: str
    rotate: bool = False


def parse_json(raw: bytes) -> Any:
    """The JSON value of ``raw`` (strict: no NaN), or :data:`MALFORMED`."""
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        return loads_strict(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return MALFORMED


def line_items(path: Path, start: int, line: int, *, limit: int = MAX_LINE) -> Iterator[Item]:
    """The complete lines of ``path`` from byte ``start`` (line ``line`` is the last one read).

    Memory stays bounded: a line longer than ``limit`` is skipped to its newline
    and yielded with ``size`` set and no bytes.  An unterminated last line is
    yielded only when it parses as a JSON object (a writer that never ends its
    file with a newline); a torn tail waits for the next pass.  Blank lines
    take a number and are not yielded.
    """
    with open(path, "rb", buffering=0) as handle:
        offset = start
        pending = bytearray()
        skipping = 0  # bytes of an oversized line skipped so far
        if start > 0:
            handle.seek(start - 1)
            if handle.read(1) != b"\n":
                # The cursor sits after an unterminated last line read as a whole object:
                # the newline that follows ends that line, which is not read again.
                skipping = limit + 1
                line -= 1
        handle.seek(start)
        first_line = line + 1
        while chunk := handle.read(_READ_CHUNK):
            begin = 0
            while True:
                newline = chunk.find(b"\n", begin)
                if newline < 0:
                    rest = len(chunk) - begin
                    if skipping or len(pending) + rest > limit:
                        skipping += len(pending) + rest
                        pending.clear()
                    else:
                        pending += chunk[begin:]
                    break
                line += 1
                piece = chunk[begin:newline]
                end = offset + newline
                if skipping > limit and line == first_line:
                    skipping = 0  # the end of the line the cursor sits in
                    pending.clear()
                elif skipping or len(pending) + len(piece) > limit:
                    size = skipping + len(pending) + len(piece)
                    skipping = 0
                    pending.clear()
                    yield Item(b"", line, end, MALFORMED, size, end + 1)
                else:
                    raw = bytes(pending + piece) if pending else piece
                    pending.clear()
                    if raw.strip(b" \t\r"):
                        yield Item(raw, line, end, parse_json(raw), 0, end + 1)
                begin = newline + 1
            offset += len(chunk)
        if pending and not skipping:
            raw = bytes(pending)
            value = parse_json(raw)
            if isinstance(value, dict):
                yield Item(raw, line + 1, offset, value, 0, offset)


def walk_files(
    base: Path, suffixes: tuple[str, ...], report: ImportReport | None = None
) -> Iterator[Path]:
    """Every file under ``base`` whose name ends with one of ``suffixes``, in path order.

    A symlink to a folder is followed once: a folder reached again (a loop) is
    reported and not entered.  A folder that cannot be listed is reported and
    skipped.
    """
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    stack = [str(base)]
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            if report is not None:
                report.warn(f"loop:{folder}", f"{folder}: a folder reached again (symlink loop); "
                            "not entered twice")  # fmt: skip
            continue
        seen.add((info.st_dev, info.st_ino))
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as exc:
            if report is not None:
                report.warn(f"list:{folder}", f"cannot list {folder}: {exc.strerror or exc}; "
                            "skipped")  # fmt: skip
            continue
        for entry in listed:
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                continue
            if is_dir:
                stack.append(entry.path)
            elif entry.name.endswith(suffixes):
                found.append(entry.path)
    for path in sorted(found):
        yield Path(path)


def normal_stamp(value: Any) -> str | None:
    """A source timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC), or None when unreadable.

    Accepts ISO 8601 text (naive means UTC) and epoch numbers (seconds, or
    milliseconds above 1e11).
    """
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, int | float):
            seconds = value / 1000 if abs(value) > 1e11 else value
            moment = datetime.fromtimestamp(seconds, UTC)
        elif isinstance(value, str) and 10 <= len(value) <= 64:
            moment = datetime.fromisoformat(value.strip(JS_WHITESPACE))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        else:
            return None
        stamp: str = format_timestamp(moment)
        return stamp
    except (ValueError, OverflowError, OSError):
        return None


def project_name(workspace: str) -> str:
    """The project a workspace path files under (ADR 0094): every character outside
    ``[A-Za-z0-9]`` becomes ``-`` (Claude Code's own folder rule), leading dashes dropped."""
    spelled = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in workspace)
    spelled = spelled.lstrip("-")[:180]
    return spelled or "no-workspace"


class UsageBook(Protocol):
    """What a usage row adds, given what its key already added (the duplicate rules)."""

    def observe(self, key: str, counts: Counts) -> Counts | None:
        """The counts to add for this row (each kind: how far it rises above the most
        seen under ``key``), or None when it adds nothing."""
        ...


class Track(msgspec.Struct, kw_only=True):
    """One pentrace session a mapper writes: its identity and what the next record needs."""

    project: str
    sid: str
    meta: dict[str, Any]
    model: str = ""
    started: bool = False
    in_request: bool = False
    request_key: str = ""
    open_calls: list[str] = msgspec.field(default_factory=list)
    totals: list[int] = msgspec.field(default_factory=lambda: [0, 0, 0, 0])
    written: int = 0
    last_stamp: str = ""
    tip: str = ""
    compacting: bool = False


@dataclass
class ImportReport:
    """What one pass read and wrote, and what it could not map (each kind said once)."""

    agent: str
    files: int = 0
    items: int = 0
    records: int = 0
    sessions: set[str] = field(default_factory=set)
    new_sessions: set[str] = field(default_factory=set)
    unmapped: dict[str, int] = field(default_factory=dict)
    malformed: int = 0
    warnings: list[str] = field(default_factory=list)
    _said: set[str] = field(default_factory=set)

    def warn(self, key: str, message: str) -> None:
        """Record ``message`` once per ``key``."""
        if key not in self._said:
            self._said.add(key)
            self.warnings.append(message)

    def document(self) -> dict[str, Any]:
        """The ``--json`` document of the pass."""
        return {
            "agent": self.agent,
            "files": self.files,
            "items": self.items,
            "records": self.records,
            "sessions": sorted(self.sessions),
            "new_sessions": sorted(self.new_sessions),
            "unmapped": dict(sorted(self.unmapped.items())),
            "malformed": self.malformed,
            "warnings": list(self.warnings),
        }


def _counts_object(counts: Counts) -> dict[str, int]:
    fresh, output, cache_read, cache_write = counts
    return {
        "cache_read": cache_read,
        "cache_write": cache_write,
        "output": output,
        "total": fresh + output + cache_read + cache_write,
    }


def _day(stamp: str) -> str:
    return stamp[:10]


class Mapper:
    """The base of every agent's mapper: records in PenguinHarness's field order, each with
    its source (see the module docstring).  A subclass maps items with :meth:`feed`."""

    agent: str = ""
    provider: str = ""

    def __init__(self, source: Path, book: UsageBook) -> None:
        self.source = str(source)
        self.book = book
        self.out: list[Out] = []
        self.report: ImportReport | None = None
        self._item: Item | None = None
        self._row_kept = True

    # -- the item being mapped -------------------------------------------------

    def begin_item(self, item: Item, *, kept: bool = False) -> None:
        """Records built from now on come from ``item`` (``kept``: its row is in the
        trace already, on an earlier record)."""
        self._item = item
        self._row_kept = kept

    def item_kept(self) -> bool:
        """True once a record carries the current item's row."""
        return self._row_kept

    def _foreign(self) -> dict[str, Any]:
        item = self._item
        foreign: dict[str, Any] = {"agent": self.agent, "source": self.source}
        if item is None:
            return foreign
        foreign["at"] = item.at
        if item.end:
            foreign["end"] = item.end
        if not self._row_kept:
            self._row_kept = True
            raw = item.raw
            if item.size:
                foreign["size"] = item.size
            elif item.value is MALFORMED:
                foreign["bytes"] = base64.b64encode(raw).decode("ascii")
            elif raw.find(b"\n") >= 0 or raw.find(b"\r") >= 0:
                # JSON written over several lines (a file of OpenCode's tree, a Gemini chat):
                # its text, verbatim, as a string (a trace record is one line).
                foreign["text"] = raw.decode("utf-8")
            else:
                foreign["row"] = msgspec.Raw(raw)
        return foreign

    # -- records -----------------------------------------------------------------

    def _emit(
        self, track: Track, stamp: str, kind: str, payload: dict[str, Any], rotate: bool = False
    ) -> None:
        envelope = {
            "timestamp": stamp,
            "type": kind,
            "payload": payload,
            FOREIGN_KEY: self._foreign(),
        }
        record = _encoder.encode(envelope)
        self.out.append(Out(track.project, track.sid, record, _day(stamp), rotate))
        track.written += 1
        track.last_stamp = stamp

    def open_track(
        self,
        project: str,
        sid: str,
        stamp: str,
        *,
        agent_state: str,
        workspace: str,
        provider: str = "",
        model: str = "",
        system_prompt: str = "",
        extra: dict[str, Any] | None = None,
    ) -> Track:
        """A new session: its ``session_meta`` (PenguinHarness's fields, then ``extra``),
        written at ``stamp``."""
        meta: dict[str, Any] = {
            "session_id": sid,
            "provider": provider or self.provider,
            "model_id": model or "unknown",
            "model_context_window": 0,
            "system_prompt": system_prompt,
            "agent_state": agent_state,
            "workspace": workspace,
            **(extra or {}),
        }
        track = Track(project=project, sid=sid, meta=meta, model=model)
        self.start(track, stamp)
        return track

    def start(self, track: Track, stamp: str) -> None:
        """Write ``track``'s ``session_meta`` (the first record of its trace)."""
        track.started = True
        self._emit(track, stamp, "session_meta", dict(track.meta))

    def meta_copy(self, track: Track, stamp: str, rotate: bool = False) -> None:
        """A later ``session_meta``: a model change, or the head of a rotated shard."""
        self._emit(track, stamp, "session_meta", dict(track.meta), rotate)

    def switch_model(self, track: Track, stamp: str, model: str) -> None:
        """Record a model change as a new ``session_meta`` naming it."""
        if not model or model == track.model:
            return
        track.model = model
        track.meta["model_id"] = model
        self.meta_copy(track, stamp)

    def message(self, track: Track, stamp: str, payload: dict[str, Any]) -> None:
        """A ``model_msg`` record (``payload`` in PenguinHarness's field order)."""
        self._emit(track, stamp, "model_msg", payload)

    def event(self, track: Track, stamp: str, payload: dict[str, Any]) -> None:
        """An ``event_msg`` record."""
        self._emit(track, stamp, "event_msg", payload)

    def text(
        self,
        track: Track,
        stamp: str,
        role: str,
        text: str,
        *,
        sender: str | None = None,
        status: str = "completed",
    ) -> None:
        payload: dict[str, Any] = {"type": "text", "role": role, "text": text}
        if sender is not None:
            payload["sender"] = sender
        payload["stop_reason"] = status
        self.message(track, stamp, payload)

    def thinking(
        self, track: Track, stamp: str, text: str, fidelity: dict[str, Any] | None = None
    ) -> None:
        payload: dict[str, Any] = {"type": "thinking", "role": "assistant", "thinking": text}
        payload["stop_reason"] = "completed"
        if fidelity:
            payload["fidelity"] = fidelity
        self.message(track, stamp, payload)

    def tool_call(self, track: Track, stamp: str, name: str, arguments: str, call_id: str) -> None:
        self.message(
            track,
            stamp,
            {
                "type": "tool_call",
                "role": "assistant",
                "name": name,
                "arguments": arguments,
                "tool_call_id": call_id,
                "stop_reason": "completed",
            },
        )
        if call_id and call_id not in track.open_calls:
            track.open_calls.append(call_id)

    def tool_output(
        self,
        track: Track,
        stamp: str,
        call_id: str,
        output: str,
        *,
        images: list[str] | None = None,
        failed: bool = False,
    ) -> None:
        payload: dict[str, Any] = {"type": "tool_call_output", "role": "user", "output": output}
        if images:
            payload["images"] = images
        payload["tool_call_id"] = call_id
        payload["stop_reason"] = "failed" if failed else "completed"
        self.message(track, stamp, payload)
        if call_id in track.open_calls:
            track.open_calls.remove(call_id)

    def begin(self, track: Track, stamp: str, key: str = "") -> None:
        """Open a request (``request_begin``), closing an open one as completed first."""
        if track.in_request:
            self.end(track, stamp)
        track.in_request = True
        track.request_key = key
        self.event(track, stamp, {"type": "request_begin"})

    def end(
        self,
        track: Track,
        stamp: str,
        status: str = "completed",
        *,
        error: str | None = None,
        attempt: int | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """Close the open request (``request_end``); a no-op when none is open."""
        if not track.in_request:
            return
        track.in_request = False
        payload: dict[str, Any] = {"type": "request_end", "status": status}
        if error is not None:
            payload["error_message"] = error
        if attempt is not None:
            payload["attempt"] = attempt
        if retry_in_ms is not None:
            payload["retry_in_ms"] = retry_in_ms
        self.event(track, stamp, payload)

    def failed_request(
        self,
        track: Track,
        stamp: str,
        error: str,
        *,
        attempt: int | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """A request that failed (an API error, a retry): its own begin and failed end."""
        if not track.in_request:
            self.begin(track, stamp)
        self.end(track, stamp, "failed", error=error, attempt=attempt, retry_in_ms=retry_in_ms)

    def usage(self, track: Track, stamp: str, key: str, counts: Counts) -> None:
        """A usage row under ``key``: a ``token_usage`` record of what it adds, if anything."""
        delta = self.book.observe(f"{self.agent}:{key}", counts)
        if delta is not None:
            self.spent(track, stamp, delta)

    def spent(self, track: Track, stamp: str, delta: Counts) -> None:
        """A ``token_usage`` record of ``delta`` (nothing when it is all zero)."""
        if delta == ZERO:
            return
        totals = track.totals
        for index, value in enumerate(delta):
            totals[index] += value
        session = (totals[0], totals[1], totals[2], totals[3])
        self.event(
            track,
            stamp,
            {
                "type": "token_usage",
                "session": _counts_object(session),
                "request": _counts_object(delta),
            },
        )

    def compaction(self, track: Track, stamp: str, reason: str, context: int) -> None:
        """A completed compaction; the next record starts a new shard (``meta_copy``)."""
        self.end(track, stamp)
        self.event(
            track,
            stamp,
            {
                "type": "compaction_begin",
                "reason": reason,
                "mode": "summarize",
                "context": context,
                "turns": 0,
            },
        )
        self.event(
            track,
            stamp,
            {
                "type": "compaction_end",
                "reason": reason,
                "mode": "summarize",
                "status": "completed",
            },
        )
        self.meta_copy(track, stamp, rotate=True)

    def subagent(self, track: Track, stamp: str, child: str) -> None:
        self.event(track, stamp, {"type": "subagent", "session_id": child})

    def unmapped(self, track: Track, stamp: str, record_type: str, note: str = "") -> None:
        """Keep an item that maps to nothing as a :data:`UNMAPPED` event (counted in the report)."""
        payload: dict[str, Any] = {
            "type": UNMAPPED,
            "agent": self.agent,
            "record_type": record_type,
        }
        if note:
            payload["note"] = note
        self.event(track, stamp, payload)
        if self.report is not None:
            counts = self.report.unmapped
            counts[record_type] = counts.get(record_type, 0) + 1

    def feed(self, item: Item) -> None:
        """Map one source item (each agent's mapper defines it)."""
        raise NotImplementedError

    def encoded_state(self) -> bytes:
        """The mapper's state, as the cursor stores it."""
        raise NotImplementedError

    def waiting(self) -> int:
        """Items read but held back (a session starts at its first timestamped line)."""
        return 0

    def odd(self, track: Track, stamp: str, item: Item) -> None:
        """Keep a line that is too long, not JSON, or not an object, and say so once."""
        if item.size:
            note = f"line of {item.size} bytes, over the limit; its length only is kept"
            self.unmapped(track, stamp, "oversized", note)
            said = f"a line of {item.size} bytes is longer than pentrace keeps; it is recorded "
            said += "by its length only"
        else:
            self.unmapped(track, stamp, "malformed" if item.value is MALFORMED else "record")
            said = "not a JSON object; kept verbatim as an unmapped record"
            if self.report is not None:
                self.report.malformed += 1
        if self.report is not None:
            self.report.warn(f"{self.source}:{item.at}:odd", f"{self.source}:{item.at}: {said}")

    def take(self) -> list[Out]:
        """The records built since the last call."""
        out, self.out = self.out, []
        return out


def stamp_or(value: Any, fallback: str) -> str:
    """``normal_stamp(value)``, else ``fallback`` (the previous record's), else the epoch."""
    return normal_stamp(value) or fallback or _EPOCH


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text (a tool call's arguments), key order kept."""
    text: str = _encoder.encode(value).decode("utf-8", "surrogatepass")
    return text


def text_of(value: Any) -> str:
    """The text of a content value: a string, or the ``text`` of a list of blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    if value is None:
        return ""
    return compact_json(value)


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any, default: str = "") -> str:
    """``value`` when it is a non-empty string, else ``default``."""
    return value if isinstance(value, str) and value else default


def count(value: Any) -> int:
    """A token count: a non-negative integer, 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return 0
    return min(int(value), 2**62)


def store_home(path: Path | str, folders: tuple[str, ...]) -> str:
    """The agent's own folder a source file sits in: the parent of the nearest folder named
    one of ``folders`` (``~/.claude`` for ``projects``), else the file's folder.  It names a
    foreign session's ``agent_state`` and stays the same when the agent moves the file."""
    parts = Path(path).parts
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] in folders:
            return str(Path(*parts[:index]))
    return str(Path(path).parent)


def file_identity(path: Path) -> tuple[int, int, int]:
    """``(device, inode, size)`` of a source file (it follows a symlink)."""
    status = os.stat(path)
    return status.st_dev, status.st_ino, status.st_size
