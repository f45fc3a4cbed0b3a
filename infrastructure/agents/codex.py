"""Codex CLI: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`` as pentrace sessions.

Where (``docs/agents.md``): ``$CODEX_HOME`` (default ``~/.codex``), every
``*.jsonl`` under ``sessions/`` and ``archived_sessions/``, in path order. A
rollout archived by Codex (moved) is recognised by its inode and goes on
where it was.

A rollout is one session, named by the uuid in its file name (else its
``session_meta`` id); its project is the ``cwd`` of its ``session_meta``.
Lines are ``{timestamp, type, payload}``; the old layout (before the
wrapper: a first line ``{id, timestamp, instructions}``, then bare response
items) is read too.

* ``response_item``: the conversation as the model saw it. ``message``
  (user input, developer and environment text as the harness's, assistant
  output), ``reasoning`` (summaries; ``encrypted_content`` kept as
  fidelity), ``function_call``/``custom_tool_call``/``local_shell_call``/
  ``tool_search_call`` and their ``*_output`` by ``call_id`` (a failed output
  as ``stop_reason: failed``), ``web_search_call`` and
  ``image_generation_call`` (a call and its result in one item). A model
  item opens a request; the request ends when its calls are answered, at
  the turn's ``token_count`` with no call open, at ``task_complete``, or
  (``aborted``) at ``turn_aborted``.
* ``event_msg``: ``token_count`` is usage; ``error`` and ``stream_error``
  fail a request; ``collab_agent_spawn_end`` points at the subagent's own
  rollout; the UI's copies of the conversation (``user_message``,
  ``agent_message``, ``agent_reasoning``, ...) are kept unmapped.
* ``turn_context`` names the model (a change is a new ``session_meta``);
  ``compacted`` is a completed compaction (the next shard starts with its
  summary).

Usage: ``token_count.info`` holds cumulative totals. A turn's figures are
the difference of the totals from the previous event (``last_token_usage``
when the totals went back); an event that repeats the totals adds nothing.
``input_tokens`` includes ``cached_input_tokens``: fresh input is the
difference; cache read is ``cached_input_tokens``, cache write
``cache_write_input_tokens``, output ``output_tokens`` (reasoning included).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

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
    as_dict,
    as_str,
    count,
    normal_stamp,
    parse_json,
    project_name,
    store_home,
    text_of,
    walk_files,
)

__all__ = ["CodexMapper", "codex_files", "codex_roots"]

AGENT: Final = "codex"
_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_CALLS: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
_OUTPUTS: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)
_ONE_SHOT: Final = frozenset({"web_search_call", "image_generation_call"})
_HARNESS_TEXT: Final = ("<environment_context>", "<user_instructions>", "# AGENTS.md")
_RAW_KEYS: Final = (
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
)


class CodexState(msgspec.Struct, kw_only=True):
    """What the mapping of one rollout needs to go on (stored with its cursor)."""

    stem: str
    project: str = ""
    track: Track | None = None
    previous: list[int] | None = None
    held: list[tuple[bytes, int, int]] = msgspec.field(default_factory=list)
    # A fork's replay of its parent: "" (none), "forked" (may come), "replay" (in it), "done".
    fork: str = ""
    replay_until: str = ""


def codex_roots(environ: dict[str, str] | os._Environ[str] | None = None) -> list[Path]:
    """``$CODEX_HOME`` (default ``~/.codex``): its ``sessions`` and ``archived_sessions``."""
    env = os.environ if environ is None else environ
    home = Path(env.get("CODEX_HOME") or Path.home() / ".codex").expanduser()
    return [home / "sessions", home / "archived_sessions"]


def codex_files(folder: Path, report: ImportReport | None = None) -> Iterator[Path]:
    """The rollouts under ``folder`` (or under its ``sessions``/``archived_sessions``)."""
    parts = [folder / "sessions", folder / "archived_sessions"]
    bases = [part for part in parts if part.is_dir()] or [folder]
    for base in bases:
        yield from walk_files(base, (".jsonl",), report)


def _raw(usage: Any) -> list[int] | None:
    if not isinstance(usage, dict):
        return None
    return [count(usage.get(key)) for key in _RAW_KEYS]


def _kinds(raw: list[int]) -> tuple[int, int, int, int]:
    inputs, cached, written, output = raw[0], raw[1], raw[2], raw[3]
    return max(inputs - cached, 0), output, cached, written


class CodexMapper(Mapper):
    """Maps the lines of one Codex rollout (see the module docstring)."""

    agent = AGENT
    provider = "openai"

    def __init__(
        self, source: Path, book: UsageBook, state: bytes | None, *, project: str | None = None
    ) -> None:
        super().__init__(source, book)
        self.override = project
        if state is not None:
            self.state = msgspec.msgpack.decode(state, type=CodexState)
        else:
            self.state = CodexState(stem=source.stem)

    def encoded_state(self) -> bytes:
        return msgspec.msgpack.encode(self.state)

    def waiting(self) -> int:
        return len(self.state.held) if self.state.track is None else 0

    # -- the session ---------------------------------------------------------------

    def _start(self, value: dict[str, Any], stamp: str) -> Track:
        state = self.state
        payload = value.get("payload") if isinstance(value.get("payload"), dict) else value
        info: dict[str, Any] = payload if _is_meta(value) and isinstance(payload, dict) else {}
        found = _UUID.search(state.stem)
        given = info.get("id")
        sid = found.group(0) if found else given if isinstance(given, str) and given else state.stem
        cwd = _text(info.get("cwd"))
        if not cwd and isinstance(payload, dict):
            cwd = _text(payload.get("cwd"))
        state.project = self.override or project_name(cwd)
        extra: dict[str, Any] = {}
        parent = as_str(info.get("parent_thread_id"))
        if parent or "subagent" in as_dict(info.get("source")):
            extra["source"] = "subagent"
            if parent:
                extra["parent_session_id"] = parent
        if forked := as_str(info.get("forked_from_id")):
            extra["forked_from"] = {"session_id": forked}
            state.fork, state.replay_until = "forked", stamp
        state.track = self.open_track(
            state.project,
            sid,
            stamp,
            agent_state=store_home(self.source, ("sessions", "archived_sessions")),
            workspace=cwd,
            provider=as_str(info.get("model_provider")),
            system_prompt=_instructions(info),
            extra=extra,
        )
        return state.track

    def feed(self, item: Item) -> None:
        """Map one line of the rollout."""
        state = self.state
        value = item.value
        stamp = normal_stamp(value.get("timestamp")) if isinstance(value, dict) else None
        if state.track is None:
            if stamp is None and can_hold(state.held, item):
                state.held.append((item.raw, int(item.at), item.end))
                return
            first = stamp or "1970-01-01T00:00:00.000Z"
            self.begin_item(item)
            meta = isinstance(value, dict) and _is_meta(value)
            track = self._start(value if isinstance(value, dict) else {}, first)
            held, state.held = state.held, []
            for raw, line, end in held:
                self._map(track, Item(raw, line, end, parse_json(raw)), first)
            if not meta:  # its row rides on the session_meta; its own records follow
                self._map(track, item, first, kept=True)
            return
        self._map(state.track, item, stamp or state.track.last_stamp)

    def _map(self, track: Track, item: Item, stamp: str, *, kept: bool = False) -> None:
        self.begin_item(item, kept=kept)
        value = item.value
        if item.size or value is MALFORMED or not isinstance(value, dict):
            self.odd(track, stamp, item)
            return
        kind = value.get("type")
        payload = value.get("payload")
        if "payload" not in value and kind not in (None, "session_meta"):
            kind, payload = "response_item", value  # the old layout: bare response items
        if not isinstance(payload, dict):
            payload = {}
        ptype = _text(payload.get("type"))
        before = len(self.out)
        if kind == "response_item":
            self._response(track, stamp, ptype, payload)
        elif kind == "event_msg":
            self._event(track, stamp, ptype, payload)
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                self.switch_model(track, stamp, model)
        elif kind == "session_meta":
            self._replayed_meta(payload, stamp)
        elif kind == "compacted":
            self.compaction(track, stamp, "context", 0)
            summary = payload.get("message")
            if isinstance(summary, str) and summary:
                self.text(track, stamp, "user", summary, sender="harness")
        if not self.item_kept() or (kept and len(self.out) == before):
            name = f"{kind}.{ptype}" if kind in ("response_item", "event_msg") else str(kind)
            self.unmapped(track, stamp, name if kind else "record")

    def _response(self, track: Track, stamp: str, ptype: str, item: dict[str, Any]) -> None:
        if ptype == "message":
            role = item.get("role")
            text = text_of(item.get("content"))
            if role == "assistant":
                self._open(track, stamp)
                self.text(track, stamp, "assistant", text)
            elif role in ("user", "developer", "system"):
                harness = role != "user" or text.lstrip().startswith(_HARNESS_TEXT)
                if not harness:
                    self.end(track, stamp)
                self.text(track, stamp, "user", text, sender="harness" if harness else "user")
            return
        if ptype == "reasoning":
            self._open(track, stamp)
            summary = text_of(item.get("summary")) or text_of(item.get("content"))
            secret = item.get("encrypted_content")
            fidelity = {"encrypted_content": secret} if isinstance(secret, str) else None
            self.thinking(track, stamp, summary, fidelity)
        elif ptype in _CALLS:
            self._open(track, stamp)
            arguments = item.get("arguments", item.get("input", item.get("action", {})))
            if not isinstance(arguments, str):
                arguments = compact_json(arguments)
            name = item.get("name") if isinstance(item.get("name"), str) else ptype
            self.tool_call(track, stamp, str(name), arguments, _call_id(item))
        elif ptype in _OUTPUTS:
            output = item.get("output")
            failed = isinstance(output, dict) and output.get("success") is False
            text = text_of(output.get("content") if isinstance(output, dict) and "content"
                           in output else output)  # fmt: skip
            self.tool_output(track, stamp, _call_id(item), text, failed=failed)
            if track.in_request and not track.open_calls:
                self.end(track, stamp)
        elif ptype in _ONE_SHOT:
            self._open(track, stamp)
            call = _call_id(item) or ptype
            self.tool_call(track, stamp, ptype.removesuffix("_call"),
                           compact_json(item.get("action", {})), call)  # fmt: skip
            result = {key: item[key] for key in ("status", "result") if key in item}
            self.tool_output(track, stamp, call, compact_json(result),
                             failed=item.get("status") == "failed")  # fmt: skip

    def _open(self, track: Track, stamp: str) -> None:
        if not track.in_request:
            self.begin(track, stamp)

    def _event(self, track: Track, stamp: str, ptype: str, payload: dict[str, Any]) -> None:
        if ptype == "token_count":
            self._usage(track, stamp, payload.get("info"))
            if track.in_request and not track.open_calls:
                self.end(track, stamp)
        elif ptype == "task_complete":
            self.end(track, stamp)
        elif ptype == "turn_aborted":
            if track.in_request:
                self.end(track, stamp, "aborted")
            reason = payload.get("reason")
            self.event(track, stamp, {"type": "abort", "reason": reason if isinstance(reason, str)
                                      else None})  # fmt: skip
        elif ptype in ("error", "stream_error"):
            error = payload.get("error")
            message = payload.get("message")
            text = message if isinstance(message, str) else compact_json(error or payload)
            self.failed_request(track, stamp, text[:500])
        elif ptype == "collab_agent_spawn_end":
            child = payload.get("new_thread_id")
            if isinstance(child, str) and child:
                self.subagent(track, stamp, child)

    def _replayed_meta(self, payload: dict[str, Any], stamp: str) -> None:
        """A fork's rollout copies its parent's history after its own ``session_meta``,
        starting with the parent's: from there, the replay runs (see :meth:`_replayed`)."""
        state = self.state
        track = state.track
        own = track.sid if track is not None else ""
        if state.fork == "forked" and as_str(payload.get("id")) != own:
            state.fork = "replay"
            state.replay_until = max(state.replay_until, stamp)

    def _replayed(self, stamp: str) -> bool:
        """True while a ``token_count`` is the parent's, copied into the fork: the copy is
        written at once when the fork is made (or keeps the parent's earlier times), so it
        is stamped within a second of the fork's creation or of the copied line before it.
        The fork's own first count comes after a model call, later than that."""
        state = self.state
        if state.fork != "replay":
            return False
        if stamp <= _plus_second(state.replay_until):
            state.replay_until = max(state.replay_until, stamp)
            return True
        state.fork = "done"
        return False

    def _usage(self, track: Track, stamp: str, info: Any) -> None:
        if not isinstance(info, dict):
            return
        model = info.get("model")
        if isinstance(model, str) and not track.in_request:
            # Some versions name the model here only: a change between turns is a new
            # session_meta, as after a turn_context (inside a request it would split it).
            self.switch_model(track, stamp, model)
        state = self.state
        total = _raw(info.get("total_token_usage"))
        last = _raw(info.get("last_token_usage"))
        if self._replayed(stamp):
            # The parent's usage, counted in the parent's own rollout: a baseline only.
            if total is not None:
                state.previous = total
            return
        previous = state.previous
        raw: list[int] | None = None
        if total is not None:
            if total == previous:
                return  # a repeated event
            base = previous or [0] * len(_RAW_KEYS)
            difference = [now - before for now, before in zip(total, base, strict=True)]
            raw = difference if min(difference) >= 0 else last if last is not None else total
            state.previous = total
        elif last is not None:
            raw = last
        if raw is not None:
            self.spent(track, stamp, _kinds(raw))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _plus_second(stamp: str) -> str:
    """``stamp`` (normalised, UTC) one second later, in the same form."""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    later = moment + timedelta(seconds=1)
    return later.strftime("%Y-%m-%dT%H:%M:%S.") + f"{later.microsecond // 1000:03d}Z"


def _is_meta(value: dict[str, Any]) -> bool:
    """A ``session_meta`` line, or the old layout's first line ``{id, timestamp, ...}``."""
    old = "payload" not in value and "id" in value and "type" not in value
    return value.get("type") == "session_meta" or old


def _call_id(item: dict[str, Any]) -> str:
    for key in ("call_id", "id"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _instructions(info: dict[str, Any]) -> str:
    value = info.get("instructions", info.get("base_instructions"))
    if isinstance(value, dict):
        value = value.get("text")
    return value if isinstance(value, str) else ""
