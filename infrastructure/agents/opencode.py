"""OpenCode: its SQLite database and its older ``storage/`` JSON tree, as pentrace sessions.

Where (``docs/agents.md``): ``$OPENCODE_DATA_DIR``, else
``$XDG_DATA_HOME/opencode`` (default ``~/.local/share/opencode``). A data folder
holds ``opencode.db`` (tables ``session``, ``message`` and ``part``, each
message and part a JSON ``data`` column) and/or the older tree
``storage/session/<project>/<session>.json``, ``storage/message/<session>/<message>.json``
and ``storage/part/<message>/<part>.json``. A session in both is read from
the database; either way its cursor is the same (ADR 0096), so a session
OpenCode migrated from the tree to the database goes on where it stopped.

The database is opened read-only (``mode=ro``; never ``immutable`` on a live
file), each query is its own short read, and a busy database (a running
OpenCode holding its write lock) is skipped with a warning and read again on
the next pass: pentrace never holds a lock OpenCode would notice.

A session's messages are read in order of creation; an assistant message is
mapped once it is complete (``time.completed``, ``finish`` or ``error``, or a
later message exists), so parts are never read half written. Per message:

* user: each ``text`` part is input (``synthetic`` text the harness's); an
  image ``file`` part is an ``image_url``;
* assistant: a request (a new ``modelID`` first writes a ``session_meta``);
  ``text``, ``reasoning`` (thinking), ``tool`` parts as a call and its output
  (``status: error`` as ``stop_reason: failed``), a ``retry`` part a failed
  request, a ``compaction`` part a completed compaction; ``error`` ends the
  request (``MessageAbortedError`` as ``aborted``, else ``failed``);
* a ``task`` tool whose metadata names a ``sessionId`` points at that child
  session, whose ``session_meta`` names its ``parentID``;
* ``step-start``, ``step-finish``, ``patch``, ``snapshot``, ``agent``, other
  files and unknown parts are kept unmapped.

Usage: each assistant message's ``tokens`` once, by message id: ``input``,
``output``, ``cache.read``, ``cache.write`` (``reasoning`` is kept in the row
and not added, as ccusage does).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple
from urllib.parse import quote

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
    normal_stamp,
    parse_json,
    project_name,
    text_of,
)
from pentrace.infrastructure.agents.state import Cursor, State
from pentrace.infrastructure.storage.sqlite import is_busy

__all__ = ["OpenCodeMapper", "opencode_roots", "opencode_sources"]

AGENT: Final = "opencode"
_BUSY_MS: Final = 200
_PAGE: Final = 200
_ABORTED: Final = "MessageAbortedError"


class Message(NamedTuple):
    """One OpenCode message: its info and its parts (each an :class:`Item` of its own)."""

    info: dict[str, Any]
    parts: list[Item]


class OpenCodeState(msgspec.Struct, kw_only=True):
    """What the mapping of one OpenCode session needs to go on."""

    track: Track | None = None


def opencode_roots(environ: dict[str, str] | os._Environ[str] | None = None) -> list[Path]:
    """``$OPENCODE_DATA_DIR``, else ``$XDG_DATA_HOME/opencode`` (``~/.local/share/opencode``)."""
    env = os.environ if environ is None else environ
    configured = env.get("OPENCODE_DATA_DIR", "")
    if configured:
        return [Path(configured).expanduser()]
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return [Path(data).expanduser() / "opencode"]


# -- the two stores ---------------------------------------------------------------


class _Database:
    """A read-only view of ``opencode.db``: short queries, a short busy timeout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        uri = f"file:{quote(str(path))}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_MS / 1000, isolation_level=None)
        self._conn.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
        tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master")}
        self.usable = {"session", "message", "part"} <= tables

    def sessions(self) -> list[tuple[str, bytes]]:
        cursor = self._conn.execute("SELECT * FROM session ORDER BY time_created, id")
        names = [column[0] for column in cursor.description]
        out = []
        for row in cursor.fetchall():
            values = dict(zip(names, row, strict=True))
            out.append((str(values["id"]), json.dumps(values, separators=(",", ":")).encode()))
        return out

    def messages(self, session: str, after: tuple[int, str]) -> list[tuple[str, int, bytes]]:
        rows = self._conn.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? AND "
            "(time_created > ? OR (time_created = ? AND id > ?)) ORDER BY time_created, id "
            f"LIMIT {_PAGE}",
            (session, after[0], after[0], after[1]),
        ).fetchall()
        return [(str(i), int(t), _bytes(d)) for i, t, d in rows]

    def parts(self, message: str) -> list[tuple[str, bytes]]:
        rows = self._conn.execute(
            "SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (message,)
        ).fetchall()
        return [(str(i), _bytes(d)) for i, d in rows]

    def close(self) -> None:
        self._conn.close()


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


class _Storage:
    """The older ``storage/`` tree of JSON files (read-only)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def sessions(self) -> list[tuple[str, bytes]]:
        out = []
        for file in sorted((self.path / "session").glob("*/*.json")):
            data = _read(file)
            value = parse_json(data) if data is not None else None
            sid = value.get("id") if isinstance(value, dict) else None
            out.append((sid if isinstance(sid, str) and sid else file.stem, data or b""))
        return out

    def messages(self, session: str, after: tuple[int, str]) -> list[tuple[str, int, bytes]]:
        found = []
        for file in (self.path / "message" / session).glob("*.json"):
            data = _read(file)
            if data is None:
                continue
            value = parse_json(data)
            mid = value.get("id") if isinstance(value, dict) else None
            mid = mid if isinstance(mid, str) and mid else file.stem
            created = _created(value)
            if (created, mid) > after:
                found.append((mid, created, data))
        found.sort(key=lambda row: (row[1], row[0]))
        return found[:_PAGE]

    def parts(self, message: str) -> list[tuple[str, bytes]]:
        out = []
        # In file-name order: OpenCode names a part's file by its id, which grows with time.
        for file in sorted((self.path / "part" / message).glob("*.json")):
            data = _read(file)
            if data is not None:
                value = parse_json(data)
                pid = value.get("id") if isinstance(value, dict) else None
                out.append((pid if isinstance(pid, str) and pid else file.stem, data))
        return out

    def close(self) -> None:
        return None


def _read(file: Path) -> bytes | None:
    try:
        with open(file, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _created(value: Any) -> int:
    time = value.get("time") if isinstance(value, dict) else None
    created = time.get("created") if isinstance(time, dict) else None
    return int(created) if isinstance(created, int | float) and not isinstance(created, bool) else 0


def _complete(info: Any) -> bool:
    if not isinstance(info, dict) or info.get("role") != "assistant":
        return True
    time = info.get("time")
    done = isinstance(time, dict) and time.get("completed") is not None
    return done or info.get("error") is not None or info.get("finish") is not None


class OpenCodeSession:
    """One OpenCode session as a source (its cursor: the last message mapped)."""

    def __init__(
        self, data_dir: Path, store: _Database | _Storage, sid: str, session_row: bytes
    ) -> None:
        self.key = f"{data_dir}#{sid}"
        self.path = store.path
        self.sid = sid
        self.store = store
        self.detail = session_row
        self.held = 0

    def start(self, state: State, report: ImportReport) -> tuple[Cursor, bytes | None] | None:
        saved = state.cursor(AGENT, self.key)
        return (Cursor(), None) if saved is None else saved

    def items(self, cursor: Cursor) -> Iterator[tuple[Item, Cursor]]:
        position = cursor.position
        if position == 0 and not cursor.marker:
            value = parse_json(self.detail) if self.detail else {}
            yield Item(self.detail, f"session:{self.sid}", 0, value), Cursor(0, 0, 0, 0, "|")
        after = _after(cursor.marker)
        while True:
            page = self.store.messages(self.sid, after)
            if not page:
                return
            for index, (mid, created, data) in enumerate(page):
                info = parse_json(data)
                last = index == len(page) - 1 and len(page) < _PAGE
                if last and not _complete(info):
                    self.held = 1
                    return  # still being written: the next pass maps it
                parts = [
                    Item(raw, f"part:{pid}", 0, parse_json(raw))
                    for pid, raw in self.store.parts(mid)
                ]
                position += 1
                after = (created, mid)
                value = Message(info if isinstance(info, dict) else {}, parts)
                item = Item(data, f"message:{mid}", 0, value if info is not MALFORMED else info)
                yield item, Cursor(0, 0, position, 0, f"{created}|{mid}")

    def close(self) -> None:
        self.store.close()


def _after(marker: str) -> tuple[int, str]:
    created, _, mid = marker.partition("|")
    return (int(created) if created.isdigit() else 0, mid)


def opencode_sources(paths: Sequence[Path], report: ImportReport) -> list[Any]:
    """Every session of the OpenCode data folders (or databases, or storage trees) given."""
    sources: list[Any] = []
    for given in paths:
        folder = Path(given).expanduser().absolute()
        stores: list[_Database | _Storage] = []
        databases = [folder] if folder.suffix == ".db" else _databases(folder)
        for path in databases:
            try:
                database = _Database(path)
            except sqlite3.Error as exc:
                report.warn(f"db:{path}", f"cannot read {path}: {exc}; retried on the next pass")
                continue
            if database.usable:
                stores.append(database)
            else:
                database.close()
                report.warn(f"schema:{path}", f"{path} has no session/message/part tables; skipped")
        storage = folder if (folder / "session").is_dir() else folder / "storage"
        if (storage / "session").is_dir():
            stores.append(_Storage(storage))
        if not stores and folder.exists() and folder.suffix != ".db":
            report.warn(f"empty:{folder}", f"{folder} holds no OpenCode database or storage")
        elif not folder.exists():
            report.warn(f"missing:{folder}", f"{folder} does not exist; skipped")
        seen: set[str] = set()
        data_dir = folder.parent if folder.suffix == ".db" or folder.name == "storage" else folder
        for store in stores:
            try:
                listed = store.sessions()
            except sqlite3.Error as exc:
                listed = []
                why = "a running OpenCode holds it" if is_busy(exc) else "it cannot be read"
                said = f"{store.path}: {exc} ({why}); its sessions are read on the next pass"
                report.warn(f"busy:{store.path}", said)
            fresh = [(sid, row) for sid, row in listed if sid not in seen]
            if not fresh:
                store.close()
            for sid, row in fresh:
                seen.add(sid)
                sources.append(OpenCodeSession(data_dir, store, sid, row))
    return sources


def _databases(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = sorted(folder.glob("opencode*.db"))
    main = folder / "opencode.db"
    return [main] if main in found else found[:1]


# -- the mapping --------------------------------------------------------------------


class OpenCodeMapper(Mapper):
    """Maps one OpenCode session's messages and parts (see the module docstring)."""

    agent = AGENT
    provider = "unknown"

    def __init__(
        self, source: Any, book: UsageBook, state: bytes | None, *, project: str | None = None
    ) -> None:
        super().__init__(source.path, book)
        self._source = source
        self.sid: str = source.sid
        self.override = project
        self.state = (
            msgspec.msgpack.decode(state, type=OpenCodeState)
            if state is not None
            else OpenCodeState()
        )

    def encoded_state(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    def waiting(self) -> int:
        return int(self._source.held)

    def _start(self, info: dict[str, Any], stamp: str) -> Track:
        directory = info.get("directory")
        directory = directory if isinstance(directory, str) else ""
        extra: dict[str, Any] = {}
        parent = info.get("parentID", info.get("parent_id"))
        if isinstance(parent, str) and parent:
            extra = {"source": "subagent", "parent_session_id": parent}
        project = self.override or project_name(directory)
        track = self.open_track(project, self.sid, stamp, agent_state=self.source,
                                workspace=directory, extra=extra)  # fmt: skip
        self.state.track = track
        return track

    def feed(self, item: Item) -> None:
        """Map the session's info, or one message with its parts."""
        self.begin_item(item)
        value = item.value
        track = self.state.track
        if isinstance(item.at, str) and item.at.startswith("session:"):
            info = value if isinstance(value, dict) else {}
            time = info.get("time")
            created = time.get("created") if isinstance(time, dict) else info.get("time_created")
            track = self._start(info, normal_stamp(created) or "1970-01-01T00:00:00.000Z")
            if not isinstance(value, dict):
                self.odd(track, track.last_stamp, item)
            return
        if not isinstance(value, Message):
            if track is None:
                track = self._start({}, "1970-01-01T00:00:00.000Z")
            self.odd(track, track.last_stamp, item)
            return
        info = value.info
        time = info.get("time")
        stamp = normal_stamp(time.get("created") if isinstance(time, dict) else None)
        if track is None:
            track = self._start({}, stamp or "1970-01-01T00:00:00.000Z")
        stamp = stamp or track.last_stamp
        if info.get("role") == "assistant":
            self._assistant(track, stamp, info, value.parts)
        else:
            self._user(track, stamp, value.parts)

    def _part_stamp(self, part: Any, stamp: str) -> str:
        time = part.get("time") if isinstance(part, dict) else None
        return normal_stamp(time.get("start") if isinstance(time, dict) else None) or stamp

    def _user(self, track: Track, stamp: str, parts: list[Item]) -> None:
        self.end(track, stamp)
        if not self.item_kept():  # the message's own row (its info), kept before its parts
            self.unmapped(track, stamp, "message.user")
        for part_item in parts:
            self.begin_item(part_item)
            part = part_item.value
            kind = part.get("type") if isinstance(part, dict) else None
            at = self._part_stamp(part, stamp)
            if kind == "text" and isinstance(part.get("text"), str):
                harness = part.get("synthetic") is True
                self.text(track, at, "user", part["text"], sender="harness" if harness else "user")
            elif kind == "file" and str(part.get("mime", "")).startswith("image/"):
                url = part.get("url") if isinstance(part.get("url"), str) else ""
                image = {"type": "image_url", "role": "user", "image_url": url}
                self.message(track, at, {**image, "stop_reason": "completed"})
            else:
                self.unmapped(track, at, f"part.{kind or 'unknown'}")

    def _assistant(self, track: Track, stamp: str, info: dict[str, Any], parts: list[Item]) -> None:
        model = info.get("modelID")
        provider = info.get("providerID")
        if isinstance(provider, str) and provider and track.meta.get("provider") != provider:
            track.meta["provider"] = provider
            if track.model and isinstance(model, str) and model == track.model:
                self.meta_copy(track, stamp)
        if isinstance(model, str) and model:
            self.switch_model(track, stamp, model)
        self.begin(track, stamp, str(info.get("id", "")))
        for part_item in parts:
            self.begin_item(part_item)
            part = part_item.value
            at = self._part_stamp(part, stamp)
            if isinstance(part, dict):
                self._part(track, at, part)
            if not self.item_kept():
                kind = part.get("type") if isinstance(part, dict) else None
                self.unmapped(track, at, f"part.{kind or 'unknown'}")
        tokens = info.get("tokens")
        if isinstance(tokens, dict):
            cache = as_dict(tokens.get("cache"))
            counts = (
                count(tokens.get("input")),
                count(tokens.get("output")),
                count(cache.get("read")),
                count(cache.get("write")),
            )
            self.usage(track, stamp, f"message:{info.get('id')}", counts)
        error = info.get("error")
        if isinstance(error, dict):
            name = error.get("name")
            data = error.get("data")
            text = data.get("message") if isinstance(data, dict) else None
            text = text if isinstance(text, str) else str(name or "error")
            self.end(track, stamp, "aborted" if name == _ABORTED else "failed", error=text)
        else:
            self.end(track, stamp)

    def _part(self, track: Track, stamp: str, part: dict[str, Any]) -> None:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            self.text(track, stamp, "assistant", part["text"])
        elif kind == "reasoning" and isinstance(part.get("text"), str):
            self.thinking(track, stamp, part["text"])
        elif kind == "tool":
            self._tool(track, stamp, part)
        elif kind == "retry":
            attempt = part.get("attempt")
            error = part.get("error")
            text = error.get("message") if isinstance(error, dict) else None
            self.failed_request(
                track,
                stamp,
                text if isinstance(text, str) else compact_json(error),
                attempt=attempt if isinstance(attempt, int) else None,
            )
            self.begin(track, stamp)
        elif kind == "compaction":
            self.compaction(track, stamp, "context" if part.get("auto") else "manual", 0)
            self.begin(track, stamp)

    def _tool(self, track: Track, stamp: str, part: dict[str, Any]) -> None:
        state = as_dict(part.get("state"))
        call = as_str(part.get("callID"), as_str(part.get("id")))
        name = as_str(part.get("tool"), "tool")
        self.tool_call(track, stamp, name, compact_json(state.get("input", {})), call)
        status = state.get("status")
        if status == "completed":
            self.tool_output(track, stamp, call, text_of(state.get("output")))
        elif status == "error":
            self.tool_output(track, stamp, call, text_of(state.get("error")), failed=True)
        child = as_str(as_dict(state.get("metadata")).get("sessionId"))
        if name == "task" and child:
            self.subagent(track, stamp, child)
