"""The shared core of the foreign-session readers: records with their source, usage, the report.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

import msgspec

from pentrace.domain import omnimessage as om
from pentrace.domain.json_codec import JsonEncoder
from pentrace.infrastructure.agents.reading import MALFORMED, Item

__all__ = [
    "AGENTS",
    "FOREIGN_KEY",
    "UNMAPPED",
    "Counts",
    "ImportReport",
    "Mapper",
    "Out",
    "Track",
    "UsageBook",
    "can_hold",
    "compact_json",
]

#: The agent names pentrace files foreign sessions under (``stats --by agent`` keys).
AGENTS: Final = ("claude-code", "codex", "opencode", "gemini")
#: The envelope key that carries a record's source (ignored by PenguinHarness).
FOREIGN_KEY: Final = "foreign"
#: The ``event_msg`` payload type of a source item that maps to no OmniMessage record
#: (its row in ``pentrace.domain.kinds``).
UNMAPPED: Final = str(om.ForeignRecord.__struct_config__.tag)
#: Counts in the order input (fresh), output, cache read, cache write.
Counts = tuple[int, int, int, int]
ZERO: Final[Counts] = (0, 0, 0, 0)
_encoder: Final = JsonEncoder()


class Out(NamedTuple):
    """One record for the trace of ``project``/``session``; ``rotate`` starts a new shard
    with it (after a completed compaction).  ``day`` is the record's UTC date."""

    project: str
    session: str
    record: bytes
    day: str
    rotate: bool = False


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

    def problem(self, track: Track, stamp: str, code: str, note: str) -> None:
        """Something in the source that breaks the agent's own resume, kept where ``pentrace
        audit`` reports it (an unmapped record naming the problem)."""
        payload = {"type": UNMAPPED, "agent": self.agent, "record_type": "problem"}
        self.event(track, stamp, {**payload, "note": note, "problem": code})

    def take(self) -> list[Out]:
        """The records built since the last call."""
        out, self.out = self.out, []
        return out


def compact_json(value: Any) -> str:
    """``value`` as compact JSON text (a tool call's arguments), key order kept."""
    text: str = _encoder.encode(value).decode("utf-8", "surrogatepass")
    return text


#: Lines before a session's first timestamped one wait in the mapper's state, this many
#: (and bytes) at the most: past that the session starts without a time (the epoch).
MAX_HELD: Final = 1000
MAX_HELD_BYTES: Final = 8 * 1024 * 1024


def can_hold(held: list[tuple[bytes, int, int]], item: Item) -> bool:
    """True while one more line may wait for its session's first timestamp."""
    return len(held) < MAX_HELD and sum(len(raw) for raw, _, _ in held) + len(item.raw) <= (
        MAX_HELD_BYTES
    )
