"""Claude Code: ``~/.claude/projects/<project>/<session>.jsonl`` read as pentrace sessions.

Where (``docs/agents.md``): ``$CLAUDE_CONFIG_DIR`` (a comma-separated list of
folders), else ``~/.config/claude`` and ``~/.claude``; in each, every ``*.jsonl``
under ``projects/``: sessions, ``<session>/subagents/agent-*.jsonl`` and the
old flat ``agent-*.jsonl`` subagent files.  Files are read in path order (the
order ccusage reads them in, which decides who counts a duplicate first).

What a row becomes:

* ``user``: text (a prompt closes the open request; ``isMeta`` and compact
  summaries are sent by the harness), images, and ``tool_result`` blocks as
  tool outputs (``is_error`` as ``stop_reason: failed``); when the last open
  call is answered the request ends.
* ``assistant``: a new ``message.id`` opens a request (a new model first
  writes a ``session_meta`` naming it); text, thinking (its signature as
  fidelity), tool calls; ``usage`` once per (``message.id``, ``requestId``),
  each kind at most its largest (a row repeated by streaming, a replayed
  sidechain or a resumed copy adds nothing); an API error message fails the
  request; ``end_turn`` with no open call ends it.
* ``system``: ``api_error`` is a failed request (attempt, retry delay),
  ``compact_boundary`` a completed compaction (the next shard starts);
  ``turn_duration`` and ``stop_hook_summary`` end an answered request.
* ``isSidechain`` rows (Task subagents written inline) go to child sessions
  ``sidechain-<root uuid>`` (``source: subagent``, ``parent_session_id``), with a
  ``subagent`` pointer in the parent; a subagent *file* is the child session
  ``agent-<id>``, pointed at by the parent's Task result (``toolUseResult.agentId``).
* The ``parentUuid`` chain: a prompt or answer whose parent is not the tip of
  its session is a rewind, and starts a fork ``fork-<uuid>`` whose
  ``session_meta`` names ``forked_from`` (the session, the row and its position).
* Everything else (summaries, snapshots, attachments, progress, titles, modes,
  unknown types) is kept as an unmapped record.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from pentrace.infrastructure.agents.core import (
    ImportReport,
    Mapper,
    Track,
    UsageBook,
    can_hold,
    compact_json,
)
from pentrace.infrastructure.agents.reading import (
    MALFORMED,
    Item,
    count,
    normal_stamp,
    parse_json,
    project_name,
    store_home,
    text_of,
    walk_files,
)

__all__ = ["ClaudeMapper", "claude_files", "claude_roots", "claude_session"]

AGENT: Final = "claude-code"
_TERMINAL: Final = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal"})
_TURN_ENDS: Final = frozenset({"turn_duration", "stop_hook_summary"})
_KNOWN_TYPES: Final = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "file-history-snapshot",
        "attachment",
        "progress",
        "queue-operation",
        "permission-mode",
        "mode",
        "custom-title",
        "ai-title",
        "agent-name",
        "last-prompt",
        "worktree-state",
        "pr-link",
    }
)
_KNOWN_FIELDS: Final = frozenset(
    {
        "parentUuid",
        "logicalParentUuid",
        "isSidechain",
        "userType",
        "cwd",
        "sessionId",
        "version",
        "gitBranch",
        "type",
        "subtype",
        "message",
        "uuid",
        "timestamp",
        "requestId",
        "toolUseResult",
        "isMeta",
        "isCompactSummary",
        "isApiErrorMessage",
        "isVisibleInTranscriptOnly",
        "agentId",
        "slug",
        "entrypoint",
        "error",
        "level",
        "content",
        "permissionMode",
        "promptId",
        "origin",
        "sourceToolUseID",
        "sourceToolAssistantUUID",
        "thinkingMetadata",
        "todos",
        "imagePasteIds",
        "compactMetadata",
        "retryInMs",
        "retryAttempt",
        "maxRetries",
        "durationMs",
        "messageCount",
        "toolUseID",
        "parentToolUseID",
        "data",
        "attachment",
        "summary",
        "leafUuid",
    }
)
_NOTE: Final = 500


class Links(Protocol):
    """Named values a mapper keeps in the state store (ADR 0096), per source."""

    def get(self, name: str) -> str | None: ...

    def elsewhere(self, source: str, name: str) -> str | None: ...

    def put(self, name: str, target: str) -> None: ...


class ClaudeState(msgspec.Struct, kw_only=True):
    """What the mapping of one Claude Code file needs to go on (stored with its cursor)."""

    project: str
    main: str
    parent: str = ""
    subagent_file: bool = False
    tracks: dict[str, Track] = msgspec.field(default_factory=dict)
    current: str = ""
    side: str = ""
    held: list[tuple[bytes, int, int]] = msgspec.field(default_factory=list)
    cwd: str = ""


def claude_roots(environ: dict[str, str] | os._Environ[str] | None = None) -> list[Path]:
    """The configuration folders to read: ``CLAUDE_CONFIG_DIR`` (comma-separated), else
    ``~/.config/claude`` and ``~/.claude``."""
    env = os.environ if environ is None else environ
    configured = env.get("CLAUDE_CONFIG_DIR", "")
    if configured.strip():
        return [Path(part.strip()).expanduser() for part in configured.split(",") if part.strip()]
    home = Path.home()
    return [home / ".config" / "claude", home / ".claude"]


def claude_files(folder: Path, report: ImportReport | None = None) -> Iterator[Path]:
    """The ``*.jsonl`` files of a configuration folder's ``projects/`` (or of ``folder``
    itself when it has none), in path order."""
    projects = folder / "projects"
    base = projects if projects.is_dir() else folder
    yield from walk_files(base, (".jsonl",), report)


def claude_session(path: Path) -> tuple[str, str, str]:
    """``(project, session id, parent session id)`` of a Claude Code file (ADR 0094)."""
    stem = path.stem
    parts = path.parts
    project_dir = path.parent
    parent = ""
    if path.parent.name == "subagents" and len(parts) >= 3:
        parent = path.parent.parent.name
        project_dir = path.parent.parent.parent
    elif "projects" in parts:
        index = len(parts) - 1 - parts[::-1].index("projects")
        if index + 1 < len(parts) - 1:
            project_dir = Path(*parts[: index + 2])
    return project_name(project_dir.name), stem, parent


def _usage_counts(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        count(usage.get("input_tokens")),
        count(usage.get("output_tokens")),
        count(usage.get("cache_read_input_tokens")),
        count(usage.get("cache_creation_input_tokens")),
    )


def _tool_result(content: Any) -> tuple[str, list[str]]:
    """A ``tool_result`` block's content as text, and its images as data URLs."""
    if not isinstance(content, list):
        return text_of(content), []
    texts: list[str] = []
    images: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "image":
            url = _image_url(block.get("source"))
            if url:
                images.append(url)
        else:
            texts.append(text_of([block]))
    return "\n".join(texts), images


def _image_url(source: Any) -> str:
    if not isinstance(source, dict):
        return ""
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type") if isinstance(source.get("media_type"), str) else ""
        return f"data:{media or 'image/png'};base64,{source['data']}"
    url = source.get("url")
    return url if isinstance(url, str) else ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class ClaudeMapper(Mapper):
    """Maps the rows of one Claude Code file (see the module docstring)."""

    agent = AGENT
    provider = "anthropic"

    def __init__(
        self,
        source: Path,
        book: UsageBook,
        links: Links,
        state: bytes | None,
        *,
        project: str | None = None,
    ) -> None:
        super().__init__(source, book)
        self.links = links
        if state is not None:
            self.state = msgspec.msgpack.decode(state, type=ClaudeState)
        else:
            default_project, sid, parent = claude_session(source)
            subagent_file = sid.startswith("agent-")
            self.state = ClaudeState(
                project=project or default_project,
                main=sid,
                parent=parent,
                subagent_file=subagent_file,
            )

    def encoded_state(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    def waiting(self) -> int:
        return len(self.state.held) if self.state.main not in self.state.tracks else 0

    # -- tracks ------------------------------------------------------------------

    def _track(self, sid: str, stamp: str, extra: dict[str, Any], model: str = "") -> Track:
        home = store_home(self.source, ("projects",))
        track = self.open_track(self.state.project, sid, stamp, agent_state=home,
                                workspace=self.state.cwd, model=model, extra=extra)  # fmt: skip
        self.state.tracks[sid] = track
        return track

    def _main(self, stamp: str) -> Track:
        state = self.state
        track = state.tracks.get(state.main)
        if track is None:
            extra: dict[str, Any] = {}
            if state.subagent_file:
                extra["source"] = "subagent"
                if state.parent:
                    extra["parent_session_id"] = state.parent
            track = self._track(state.main, stamp, extra)
            state.current = state.main
        return track

    def _current(self, stamp: str) -> Track:
        main = self._main(stamp)
        return self.state.tracks.get(self.state.current, main)

    def _remember(self, uuid: Any, track: Track, anchor: str) -> None:
        if isinstance(uuid, str) and uuid:
            self.links.put(uuid, f"{track.sid}\t{anchor}\t{track.written}")

    def _linked(self, parent: Any) -> tuple[Track, str, int] | None:
        if not isinstance(parent, str) or not parent:
            return None
        found = self.links.get(parent)
        if found is None:
            return None
        sid, anchor, position = found.split("\t")
        track = self.state.tracks.get(sid)
        return None if track is None else (track, anchor, int(position))

    def _side(self, row: dict[str, Any], stamp: str) -> Track:
        """The child session of an inline sidechain row (a root starts one)."""
        state = self.state
        linked = self._linked(row.get("parentUuid"))
        if linked is not None:
            return linked[0]
        uuid = row.get("uuid")
        if row.get("parentUuid") is None and isinstance(uuid, str) and uuid:
            parent = self._current(stamp)
            sid = f"sidechain-{uuid}"
            if sid in state.tracks:
                return state.tracks[sid]
            extra = {"source": "subagent", "parent_session_id": parent.sid}
            child = self._track(sid, stamp, extra, parent.model)
            state.side = sid
            self.subagent(parent, stamp, sid)
            return child
        found = state.tracks.get(state.side)
        return found if found is not None else self._current(stamp)

    def _route(self, row: dict[str, Any], stamp: str, message: bool, prompt: bool) -> Track:
        """The session a row belongs to: a sidechain child, a fork after a rewind, or the
        session its parent row went to."""
        state = self.state
        if row.get("isSidechain") is True and not state.subagent_file:
            return self._side(row, stamp)
        linked = self._linked(row.get("parentUuid"))
        if linked is None:
            current = self._current(stamp)
            if message and prompt and row.get("parentUuid", "") is None and current.tip:
                return self._fork(row, stamp, current, "", 0)  # a rewind to the very start
            return current
        track, anchor, position = linked
        if not (message and prompt) or not anchor or anchor == track.tip:
            if message:
                state.current = track.sid
            return track
        return self._fork(row, stamp, track, anchor, position)

    def _fork(self, row: dict[str, Any], stamp: str, source: Track, anchor: str, at: int) -> Track:
        uuid = row.get("uuid")
        sid = f"fork-{uuid}" if isinstance(uuid, str) and uuid else f"fork-{source.sid}-{at}"
        if sid in self.state.tracks:
            return self.state.tracks[sid]
        extra = {
            key: value
            for key, value in source.meta.items()
            if key in ("source", "parent_session_id")
        }
        extra["forked_from"] = {"session_id": source.sid, "uuid": anchor or None, "position": at}
        fork = self._track(sid, stamp, extra, source.model)
        fork.tip = anchor
        self.state.current = sid
        return fork

    # -- items -------------------------------------------------------------------

    def feed(self, item: Item) -> None:
        """Map one line of the file."""
        state = self.state
        value = item.value
        stamp = normal_stamp(value.get("timestamp")) if isinstance(value, dict) else None
        if state.main not in state.tracks:
            if stamp is None and can_hold(state.held, item):
                state.held.append((item.raw, int(item.at), item.end))
                return  # a session starts at its first timestamped line
            if isinstance(value, dict) and isinstance(value.get("cwd"), str):
                state.cwd = value["cwd"]
            if state.subagent_file and not state.parent and isinstance(value, dict):
                # An old flat ``agent-*.jsonl`` names its parent only in its rows.
                owner = _text(value.get("sessionId"))
                state.parent = owner if owner != state.main else ""
            first = stamp or "1970-01-01T00:00:00.000Z"
            held, state.held = state.held, []
            for raw, line, end in held:
                self._map(Item(raw, line, end, parse_json(raw)), first)
            self._map(item, first)
            return
        self._map(item, stamp or self._current("").last_stamp)

    def _map(self, item: Item, stamp: str) -> None:
        self.begin_item(item)
        value = item.value
        if item.size or value is MALFORMED or not isinstance(value, dict):
            self.odd(self._current(stamp), stamp, item)
            return
        if not self.state.cwd and isinstance(value.get("cwd"), str):
            self.state.cwd = value["cwd"]
        kind = value.get("type")
        kind = kind if isinstance(kind, str) else ""
        if not kind and isinstance(value.get("message"), dict):
            kind = "assistant" if value["message"].get("role") == "assistant" else kind
        problems = self._chain_problems(value, item)
        if kind == "user":
            self._user(value, stamp)
        elif kind == "assistant":
            self._assistant(value, stamp)
        elif kind == "system":
            self._system(value, stamp)
        if not self.item_kept():
            track = self._route(value, stamp, False, False)
            self._remember(value.get("uuid"), track, track.tip)
            note = _text(value.get("summary"))[:_NOTE] if kind == "summary" else ""
            self.unmapped(track, stamp, kind or "record", note)
            if kind and kind not in _KNOWN_TYPES and self.report is not None:
                self.report.warn(
                    f"{AGENT}:type:{kind}",
                    f"{AGENT}: records of type {kind!r} are kept unmapped (first at "
                    f"{self.source}:{item.at})",
                )
        for code, note in problems:
            self.problem(self._current(stamp), stamp, code, note)
        self._fields(value, item)

    def _chain_problems(self, row: dict[str, Any], item: Item) -> list[tuple[str, str]]:
        """What in this row breaks Claude Code's own resume, which walks the ``parentUuid``
        chain: a parent no earlier row has, a ``uuid`` an earlier row already had."""
        problems = []
        where = f"{self.source}:{item.at}"
        parent, uuid = row.get("parentUuid"), row.get("uuid")
        if (
            isinstance(parent, str)
            and parent
            and self.links.get(parent) is None
            and not self._in_parent_file(row, parent)
        ):
            problems.append(("broken_parent_link",
                             f"{where}: parentUuid {parent!r} names no earlier row"))  # fmt: skip
        if isinstance(uuid, str) and uuid and self.links.get(uuid) is not None:
            problems.append(("duplicate_uuid", f"{where}: uuid {uuid!r} was used before"))
        return problems

    def _fields(self, value: dict[str, Any], item: Item) -> None:
        if self.report is None or value.get("type") not in ("user", "assistant"):
            return
        for key in value:
            if key not in _KNOWN_FIELDS:
                self.report.warn(
                    f"{AGENT}:field:{key}",
                    f"{AGENT}: field {key!r} is kept in the source row but not mapped "
                    f"(first at {self.source}:{item.at})",
                )

    def _in_parent_file(self, row: dict[str, Any], parent: str) -> bool:
        """A subagent file's row may chain to its parent session's rows (a sidechain that
        replays them): those live in the parent's file (not yet read: given the benefit)."""
        state = self.state
        if not state.subagent_file:
            return False
        here = Path(self.source)
        owner = state.parent or _text(row.get("sessionId"))
        if not owner:
            return False
        folder = here.parent.parent.parent if here.parent.name == "subagents" else here.parent
        return self.links.elsewhere(str(folder / f"{owner}.jsonl"), parent) is not None

    def _user(self, row: dict[str, Any], stamp: str) -> None:
        message = row.get("message")
        if not isinstance(message, dict):
            return
        content = message.get("content")
        blocks: list[Any] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else content
        ) if isinstance(content, str | list) else []  # fmt: skip
        harness = row.get("isMeta") is True or row.get("isCompactSummary") is True
        prompt = not harness and any(
            isinstance(block, dict) and block.get("type") in ("text", "image") for block in blocks
        )
        track = self._route(row, stamp, True, prompt)
        answered = False
        for block in blocks:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "tool_result":
                output, images = _tool_result(block.get("content"))
                call = _text(block.get("tool_use_id"))
                self.tool_output(
                    track, stamp, call, output, images=images, failed=block.get("is_error") is True
                )
                answered = True
            elif btype == "text":
                self._prompt(track, stamp, _text(block.get("text")), harness)
            elif btype == "image":
                self._image(track, stamp, block.get("source"))
            else:
                self.unmapped(track, stamp, f"user.{btype}")
        if answered and track.in_request and not track.open_calls:
            self.end(track, stamp)
        result = row.get("toolUseResult")
        if isinstance(result, dict) and isinstance(result.get("agentId"), str):
            self.subagent(track, stamp, f"agent-{result['agentId']}")
        self._advance(row, track)

    def _prompt(self, track: Track, stamp: str, text: str, harness: bool) -> None:
        if text.startswith("[Request interrupted"):
            self.end(track, stamp, "aborted")
            self.text(track, stamp, "user", text, sender="harness")
        elif harness:
            self.text(track, stamp, "user", text, sender="harness")
        else:
            self.end(track, stamp)
            self.text(track, stamp, "user", text, sender="user")

    def _image(self, track: Track, stamp: str, source: Any) -> None:
        if isinstance(source, dict) and source.get("type") == "base64":
            media = _text(source.get("media_type")) or "image/png"
            payload = {
                "type": "inline_data",
                "role": "user",
                "data": _text(source.get("data")),
                "mime_type": media,
                "stop_reason": "completed",
            }
            self.message(track, stamp, payload)
        elif url := _image_url(source):
            self.message(
                track,
                stamp,
                {"type": "image_url", "role": "user", "image_url": url, "stop_reason": "completed"},
            )
        else:
            self.unmapped(track, stamp, "user.image")

    def _assistant(self, row: dict[str, Any], stamp: str) -> None:
        message = row.get("message")
        if not isinstance(message, dict):
            return
        track = self._route(row, stamp, True, True)
        message_id = _text(message.get("id"))
        model = _text(message.get("model"))
        if message_id == "" or not track.in_request or track.request_key != message_id:
            if model and model != "<synthetic>":
                self.switch_model(track, stamp, model)
            self.begin(track, stamp, message_id)
        error = row.get("isApiErrorMessage") is True
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        error_text = ""
        last = ""
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            last = btype if isinstance(btype, str) else ""
            if btype == "text":
                text = _text(block.get("text"))
                error_text = error_text or text
                self.text(
                    track, stamp, "assistant", text, status="failed" if error else "completed"
                )
            elif btype == "thinking":
                signature = block.get("signature")
                fidelity = {"signature": signature} if isinstance(signature, str) else None
                self.thinking(track, stamp, _text(block.get("thinking")), fidelity)
            elif btype == "redacted_thinking":
                self.message(
                    track,
                    stamp,
                    {
                        "type": "inline_thinking",
                        "role": "assistant",
                        "data": _text(block.get("data")),
                        "mime_type": "application/vnd.anthropic.redacted-thinking",
                        "stop_reason": "completed",
                    },
                )
            elif btype in ("tool_use", "server_tool_use"):
                arguments = compact_json(block.get("input", {}))
                self.tool_call(track, stamp, _text(block.get("name")), arguments,
                               _text(block.get("id")))  # fmt: skip
            else:
                self.unmapped(track, stamp, f"assistant.{btype}")
        usage = message.get("usage")
        if isinstance(usage, dict):
            request = _text(row.get("requestId"))
            if message_id:
                key = f"{message_id}:{request}" if request else message_id
            else:
                key = f"{self.source}:{self._line()}"
            self.usage(track, stamp, key, _usage_counts(usage))
        if error:
            self.end(track, stamp, "failed", error=error_text or "API error")
        elif not track.open_calls and (message.get("stop_reason") in _TERMINAL or last == "text"):
            # A row ending in text with no call open may be the answer's last: end the request
            # now (rows of the same message after it open another, ADR 0094).
            self.end(track, stamp)
        self._advance(row, track)

    def _line(self) -> str:
        item = self._item
        return str(item.at) if item is not None else ""

    def _system(self, row: dict[str, Any], stamp: str) -> None:
        subtype = _text(row.get("subtype"))
        track = self._route(row, stamp, False, False)
        if subtype == "api_error":
            error = row.get("error")
            text = text_of(row.get("content")) or (compact_json(error) if error else "API error")
            attempt = row.get("retryAttempt")
            delay = row.get("retryInMs")
            self.failed_request(
                track,
                stamp,
                text[:_NOTE],
                attempt=attempt if isinstance(attempt, int) and attempt >= 0 else None,
                retry_in_ms=int(delay) if isinstance(delay, int | float) and delay >= 0 else None,
            )
        elif subtype == "compact_boundary":
            metadata = row.get("compactMetadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            trigger = metadata.get("trigger", row.get("trigger"))
            self.compaction(
                track,
                stamp,
                "manual" if trigger == "manual" else "context",
                count(metadata.get("preTokens")),
            )
        elif subtype in _TURN_ENDS and track.in_request and not track.open_calls:
            self.end(track, stamp)
        if not self.item_kept():
            self.unmapped(track, stamp, f"system.{subtype}" if subtype else "system")
        self._remember(row.get("uuid"), track, track.tip)

    def _advance(self, row: dict[str, Any], track: Track) -> None:
        uuid = row.get("uuid")
        if isinstance(uuid, str) and uuid:
            track.tip = uuid
            self._remember(uuid, track, uuid)
