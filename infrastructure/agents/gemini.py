"""Gemini CLI: ``~/.gemini/tmp/<project>/chats/`` as pentrace sessions, both forms.

Where (``docs/agents.md``): ``$GEMINI_DATA_DIR`` (comma-separated, as ccusage
reads it), else ``~/.gemini/tmp``; every ``*.json`` and ``*.jsonl`` under it.

* The **JSON form** is one document per session (``{sessionId, projectHash,
  startTime, lastUpdated, messages: [...]}``) that Gemini CLI rewrites whole
  as the session goes. Each message is kept as its own item, its bytes cut
  verbatim from the file (the header is kept without ``lastUpdated``, which
  every rewrite changes); the cursor is the number of messages mapped and the
  last one's id. The last message is mapped once complete (a user message, or
  a reply with its ``tokens`` and every tool call in a final status), earlier
  ones always. A file is read whole: one over 256 MiB is reported, not read.
* The **JSONL form** is append-only: a header line, message lines, and
  ``{"$set": ...}`` updates; read from a byte offset like any JSONL source. A
  message id seen again is an update: it adds only its usage's increase and
  is kept unmapped.

A session is named by its ``sessionId``; its project is the workspace in the
chat folder's ``.project_root`` file when Gemini CLI wrote one, else
``gemini-<first 12 of projectHash>``.

* ``user``: input (a prompt ends the open request);
* ``gemini`` / ``model``: a request (a new ``model`` writes a ``session_meta``);
  ``thoughts`` as thinking, ``content``/``parts`` text, ``toolCalls`` each a
  call and its result (``status`` ``error`` or ``cancelled`` as
  ``stop_reason: failed``);
* ``error``: a failed request; ``info``, ``warning`` and unknown types are
  kept unmapped.

Usage: each reply's ``tokens`` once by message id. ``cached`` is part of
``input``: input is the difference, cache read ``cached``, output ``output``
plus ``thoughts`` (billed as output); ``tool`` is kept in the row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import msgspec

from pentrace.infrastructure.agents.core import (
    ImportReport,
    Mapper,
    Track,
    UsageBook,
    compact_json,
)
from pentrace.infrastructure.agents.reading import (
    MALFORMED,
    Item,
    as_dict,
    as_str,
    count,
    file_identity,
    normal_stamp,
    parse_json,
    project_name,
    text_of,
    walk_files,
)
from pentrace.infrastructure.agents.state import Cursor, State

__all__ = ["GeminiJson", "GeminiMapper", "gemini_files", "gemini_roots"]

AGENT: Final = "gemini"
_MAX_FILE: Final = 256 * 1024 * 1024
_FINAL: Final = frozenset({"success", "error", "cancelled"})
_FAILED: Final = frozenset({"error", "cancelled"})


class _Chat(msgspec.Struct):
    """A JSON-form chat file: its messages as raw bytes, cut from the file as written."""

    messages: list[msgspec.Raw] = msgspec.field(default_factory=list)


_chat: Final = msgspec.json.Decoder(_Chat)
_fields: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])


class GeminiState(msgspec.Struct, kw_only=True):
    """What the mapping of one Gemini session needs to go on."""

    track: Track | None = None
    seen: list[str] = msgspec.field(default_factory=list)


def gemini_roots(environ: dict[str, str] | os._Environ[str] | None = None) -> list[Path]:
    """``$GEMINI_DATA_DIR`` (comma-separated), else ``~/.gemini/tmp``."""
    env = os.environ if environ is None else environ
    configured = env.get("GEMINI_DATA_DIR", "")
    if configured.strip():
        return [Path(part.strip()).expanduser() for part in configured.split(",") if part.strip()]
    return [Path.home() / ".gemini" / "tmp"]


def gemini_files(folder: Path, report: ImportReport | None = None) -> Iterator[Path]:
    """The chat files under ``folder``: ``*.json`` and ``*.jsonl``, in path order."""
    yield from walk_files(folder, (".json", ".jsonl"), report)


def _project(path: Path, project_hash: Any) -> str:
    marker = path.parent.parent / ".project_root"
    try:
        root = marker.read_text("utf-8").strip() if marker.is_file() else ""
    except (OSError, UnicodeDecodeError):
        root = ""
    if root:
        return project_name(root)
    return f"gemini-{as_str(project_hash, path.parent.parent.name)[:12]}"


def _complete(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("type") not in ("gemini", "model"):
        return True
    calls = message.get("toolCalls")
    final = all(
        isinstance(call, dict) and call.get("status") in _FINAL
        for call in (calls if isinstance(calls, list) else [])
    )
    return final and (message.get("tokens") is not None or message.get("type") == "model")


class GeminiJson:
    """A JSON-form chat file as a source (its cursor: messages mapped, and the last id)."""

    def __init__(self, path: Path) -> None:
        self.path, self.key = path, str(path)
        self.detail: Any = None
        self.held = 0
        self._identity = (0, 0, 0)

    def start(self, state: State, report: ImportReport) -> tuple[Cursor, bytes | None] | None:
        try:
            self._identity = file_identity(self.path)
        except OSError as exc:
            report.warn(f"stat:{self.key}", f"cannot read {self.key}: {exc.strerror or exc}")
            return None
        if self._identity[2] > _MAX_FILE:
            report.warn(f"size:{self.key}", f"{self.key} is {self._identity[2]} bytes, over the "
                        f"{_MAX_FILE} a Gemini chat file may have; not read")  # fmt: skip
            return None
        saved = state.cursor(AGENT, self.key)
        return (Cursor(), None) if saved is None else saved

    def items(self, cursor: Cursor) -> Iterator[tuple[Item, Cursor]]:
        with open(self.path, "rb") as handle:
            data = handle.read(_MAX_FILE + 1)
        try:
            chat = _chat.decode(data)
            # The header without what every rewrite changes (``lastUpdated``; the messages'
            # own timestamps say as much), so the header kept is the same whenever it is read.
            header = {
                k: v
                for k, v in _fields.decode(data).items()
                if k not in ("messages", "lastUpdated")
            }
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # being rewritten, or damaged: the next pass reads it again
        dev, ino, _ = self._identity
        if cursor.position == 0 and not cursor.marker:
            raw = msgspec.json.encode(header)
            yield Item(raw, "chat", 0, parse_json(raw)), Cursor(dev, ino, 0, 0, "|")
        messages = chat.messages
        start = cursor.position
        if cursor.marker not in ("", "|"):
            ids = [as_str(as_dict(parse_json(bytes(raw))).get("id")) for raw in messages]
            if cursor.marker in ids:
                start = ids.index(cursor.marker) + 1
        for index in range(start, len(messages)):
            raw = bytes(messages[index])
            value = parse_json(raw)
            if index == len(messages) - 1 and not _complete(value):
                self.held = 1
                return
            mid = as_str(as_dict(value).get("id"), str(index))
            yield Item(raw, f"message:{mid}", 0, value), Cursor(dev, ino, index + 1, 0, mid)

    def close(self) -> None:
        return None


class GeminiMapper(Mapper):
    """Maps one Gemini CLI session (see the module docstring)."""

    agent = AGENT
    provider = "google"

    def __init__(
        self, source: Any, book: UsageBook, state: bytes | None, *, project: str | None = None
    ) -> None:
        super().__init__(source.path, book)
        self._source = source
        self.override = project
        self.state = (
            msgspec.msgpack.decode(state, type=GeminiState) if state is not None else GeminiState()
        )

    def encoded_state(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    def waiting(self) -> int:
        return int(getattr(self._source, "held", 0))

    def _start(self, header: dict[str, Any], stamp: str) -> Track:
        path = Path(self.source)
        sid = as_str(header.get("sessionId"), path.stem)
        project = self.override or _project(path, header.get("projectHash"))
        track = self.open_track(project, sid, stamp, agent_state=str(path.parent), workspace="")
        self.state.track = track
        return track

    def feed(self, item: Item) -> None:
        """Map the chat's header or one message (or, in the JSONL form, an update)."""
        self.begin_item(item)
        value = item.value
        track = self.state.track
        header = isinstance(value, dict) and "sessionId" in value and "messages" not in value
        if track is None:
            first = value if header and isinstance(value, dict) else {}
            stamp = normal_stamp(first.get("startTime")) or normal_stamp(
                as_dict(value).get("timestamp")
            )
            track = self._start(first, stamp or "1970-01-01T00:00:00.000Z")
            if header:
                return
        stamp = normal_stamp(as_dict(value).get("timestamp")) or track.last_stamp
        if item.size or value is MALFORMED or not isinstance(value, dict):
            self.odd(track, stamp, item)
            return
        mid = as_str(value.get("id"))
        if mid and mid in self.state.seen:
            self._usage(track, stamp, mid, value)  # an update: only what it adds
        elif header or "$set" in value:
            pass
        else:
            if mid:
                self.state.seen.append(mid)
            self._message(track, stamp, mid, value)
        if not self.item_kept():
            kind = "update" if mid in self.state.seen else as_str(value.get("type"), "record")
            self.unmapped(track, stamp, "$set" if "$set" in value else kind)

    def _message(self, track: Track, stamp: str, mid: str, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "user":
            self.end(track, stamp)
            self.text(track, stamp, "user", _text(message), sender="user")
        elif kind in ("gemini", "model"):
            model = as_str(message.get("model"))
            if model:
                self.switch_model(track, stamp, model)
            self.begin(track, stamp, mid)
            for thought in message.get("thoughts") or []:
                if isinstance(thought, dict):
                    subject = as_str(thought.get("subject"))
                    text = as_str(thought.get("description"))
                    self.thinking(track, stamp, f"{subject}\n{text}" if subject else text)
            text = _text(message)
            if text:
                self.text(track, stamp, "assistant", text)
            for call in message.get("toolCalls") or []:
                if isinstance(call, dict):
                    self._call(track, stamp, call)
            self._usage(track, stamp, mid, message)
            self.end(track, stamp)
        elif kind == "error":
            self.failed_request(track, stamp, _text(message)[:500] or "error")

    def _call(self, track: Track, stamp: str, call: dict[str, Any]) -> None:
        at = normal_stamp(call.get("timestamp")) or stamp
        call_id = as_str(call.get("id"))
        self.tool_call(track, at, as_str(call.get("name"), "tool"),
                       compact_json(call.get("args", {})), call_id)  # fmt: skip
        status = call.get("status")
        if status not in _FINAL:
            return
        outputs = []
        for result in call.get("result") or []:
            response = as_dict(as_dict(as_dict(result).get("functionResponse")).get("response"))
            outputs.append(text_of(response.get("output", response.get("error", response))))
        output = "\n".join(outputs) or text_of(call.get("resultDisplay"))
        self.tool_output(track, at, call_id, output, failed=status in _FAILED)

    def _usage(self, track: Track, stamp: str, mid: str, message: dict[str, Any]) -> None:
        tokens = message.get("tokens")
        if not isinstance(tokens, dict):
            return
        inputs, cached = count(tokens.get("input")), count(tokens.get("cached"))
        output = count(tokens.get("output")) + count(tokens.get("thoughts"))
        key = f"{self.state.track.sid if self.state.track else ''}:{mid}"
        self.usage(track, stamp, key, (max(inputs - cached, 0), output, cached, 0))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content in (None, "") and isinstance(message.get("parts"), list):
        content = message["parts"]
    return text_of(content)
