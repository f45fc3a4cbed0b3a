"""Small session stores of other agents, written by the tests (issue #28).

:class:`ClaudeLog` writes Claude Code rows as Claude Code 1.x/2.x does: a
``uuid``/``parentUuid`` chain, one row per streamed content block sharing the
message's ``id``, ``requestId`` and (growing) usage, tool results in user rows.
:func:`reference_folder` finds the real files of ``shared/reference/foreign-sessions``
next to the project (or next to the worktrees folder), read in place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CLAUDE_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def reference_folder(*parts: str) -> Path:
    """``shared/reference/foreign-sessions/<parts>`` beside the project, or skip the test."""
    for base in (PROJECT_ROOT.parent, *PROJECT_ROOT.parents[1:3]):
        found = base / "shared" / "reference" / "foreign-sessions"
        if found.is_dir():
            return found.joinpath(*parts)
    pytest.skip("../shared/reference/foreign-sessions is absent (the real agents' files)")


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    """Rows as JSON Lines, compact, as the agents write them."""
    return b"".join(json.dumps(row, separators=(",", ":")).encode() + b"\n" for row in rows)


@dataclass
class ClaudeLog:
    """A Claude Code session file being written (see the module docstring)."""

    session_id: str
    cwd: str = "/home/u/work/app"
    start: datetime = field(default_factory=lambda: datetime(2025, 9, 3, 10, 0, tzinfo=UTC))
    version: str = "1.0.98"
    rows: list[dict[str, Any]] = field(default_factory=list)
    tip: str | None = None
    step: int = 0

    def _stamp(self) -> str:
        self.step += 1
        moment = self.start + timedelta(seconds=self.step)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _row(self, kind: str, parent: str | bool | None, **extra: Any) -> dict[str, Any]:
        uuid = f"{self.session_id[:8]}-u{len(self.rows) + 1:04d}"
        parent_uuid = self.tip if parent is True else (None if parent is False else parent)
        row = {
            "parentUuid": parent_uuid,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": "",
            "type": kind,
            **extra,
            "uuid": uuid,
            "timestamp": self._stamp(),
        }
        self.rows.append(row)
        return row

    def prompt(self, text: str, *, parent: str | bool | None = True, **extra: Any) -> str:
        """A user prompt; returns its uuid (the new tip)."""
        row = self._row("user", parent, message={"role": "user", "content": text}, **extra)
        self.tip = row["uuid"]
        return str(row["uuid"])

    def answer(
        self,
        blocks: list[dict[str, Any]],
        *,
        message_id: str,
        request_id: str | None,
        usage: tuple[int, int, int, int] = (3, 10, 100, 20),
        model: str = "claude-sonnet-4-20250514",
        stop_reason: str | None = None,
        parent: str | bool | None = True,
        **extra: Any,
    ) -> str:
        """One assistant row (one streamed block of ``message_id``); usage as
        (input, output, cache read, cache write)."""
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": dict(zip(CLAUDE_USAGE_KEYS, usage, strict=True)),
        }
        fields: dict[str, Any] = {"message": message}
        if request_id is not None:
            fields["requestId"] = request_id
        row = self._row("assistant", parent, **fields, **extra)
        self.tip = row["uuid"]
        return str(row["uuid"])

    def result(self, call_id: str, content: str, *, is_error: bool = False, **extra: Any) -> str:
        """A user row answering ``call_id``."""
        block: dict[str, Any] = {"tool_use_id": call_id, "type": "tool_result", "content": content}
        if is_error:
            block["is_error"] = True
        row = self._row("user", True, message={"role": "user", "content": [block]}, **extra)
        self.tip = row["uuid"]
        return str(row["uuid"])

    def system(self, subtype: str, **extra: Any) -> str:
        row = self._row("system", True, subtype=subtype, **extra)
        return str(row["uuid"])

    def other(self, row: dict[str, Any]) -> None:
        """A row of another type, as given."""
        self.rows.append(row)

    def data(self) -> bytes:
        return jsonl(self.rows)

    def write(self, folder: Path, name: str | None = None) -> Path:
        """Write the file ``<folder>/<session id>.jsonl`` (or ``name``); return its path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / (name or f"{self.session_id}.jsonl")
        path.write_bytes(self.data())
        return path


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def thinking(value: str, signature: str = "sig-1") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": signature}


def claude_turn(log: ClaudeLog, index: int, *, calls: int = 1) -> None:
    """One turn: a prompt, an answer streamed as a text row and ``calls`` tool rows (usage
    growing row by row), the results, and a closing answer."""
    log.prompt(f"task {index}")
    message, request = f"msg_{log.session_id[:4]}_{index}a", f"req_{index}a"
    log.answer([text(f"working on {index}")], message_id=message, request_id=request,
               usage=(3, 5, 100, 20))  # fmt: skip
    for call in range(calls):
        log.answer(
            [tool_use(f"toolu_{index}_{call}", "Bash", {"command": f"echo {call}"})],
            message_id=message,
            request_id=request,
            usage=(3, 40 + call, 100, 20),
        )
    for call in range(calls):
        log.result(f"toolu_{index}_{call}", f"{call}\n")
    log.answer(
        [text(f"done {index}")],
        message_id=f"msg_{log.session_id[:4]}_{index}b",
        request_id=f"req_{index}b",
        usage=(2, 7, 150, 0),
        stop_reason="end_turn",
    )


def source_lines(folder: Path) -> list[bytes]:
    """The non-blank lines of every ``*.jsonl`` under ``folder``, in path order."""
    return [
        line
        for path in sorted(folder.rglob("*.jsonl"))
        for line in path.read_bytes().splitlines()
        if line.strip()
    ]


def trace_lines(root: Path) -> list[dict[str, Any]]:
    """Every record of every trace under data root ``root``, parsed, in path order."""
    out: list[dict[str, Any]] = []
    for path in sorted(root.glob("*/agents/*/traces/*/*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def kept_rows(root: Path) -> list[bytes]:
    """The verbatim source rows the traces under ``root`` carry, as raw JSON bytes."""
    rows: list[bytes] = []
    for path in sorted(root.glob("*/agents/*/traces/*/*.jsonl")):
        for line in path.read_bytes().splitlines():
            marker = line.find(b',"foreign":')
            if marker < 0:
                continue
            foreign = json.loads(line[marker + len(b',"foreign":') : -1])
            if "row" in foreign:
                start = line.index(b'"row":', marker) + len(b'"row":')
                rows.append(line[start:-2])
    return rows


@dataclass
class CodexLog:
    """A Codex rollout being written: ``{timestamp, type, payload}`` lines; ``token_count``
    carries cumulative totals (and repeats them, as real rollouts do)."""

    session_id: str
    cwd: str = "/home/u/work/app"
    start: datetime = field(default_factory=lambda: datetime(2025, 10, 1, 9, 0, tzinfo=UTC))
    rows: list[dict[str, Any]] = field(default_factory=list)
    totals: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])
    step: int = 0

    def line(self, kind: str, payload: dict[str, Any]) -> None:
        self.step += 1
        moment = self.start + timedelta(seconds=self.step)
        stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.rows.append({"timestamp": stamp, "type": kind, "payload": payload})

    def meta(self, **extra: Any) -> None:
        self.line("session_meta", {"id": self.session_id, "timestamp": "2025-10-01T09:00:00Z",
                                   "cwd": self.cwd, "originator": "codex_cli_rs",
                                   "cli_version": "0.46.0", "source": "cli",
                                   "model_provider": "openai", **extra})  # fmt: skip

    def context(self, model: str) -> None:
        self.line("turn_context", {"cwd": self.cwd, "approval_policy": "on-request",
                                   "model": model, "effort": "medium"})  # fmt: skip

    def user(self, text: str) -> None:
        self.line("event_msg", {"type": "user_message", "message": text, "images": []})
        content = [{"type": "input_text", "text": text}]
        self.line("response_item", {"type": "message", "role": "user", "content": content})

    def assistant(self, text: str) -> None:
        content = [{"type": "output_text", "text": text}]
        self.line("response_item", {"type": "message", "role": "assistant", "content": content})
        self.line("event_msg", {"type": "agent_message", "message": text})

    def reasoning(self, text: str) -> None:
        summary = [{"type": "summary_text", "text": text}]
        item = {"type": "reasoning", "summary": summary, "encrypted_content": "gAAAA=="}
        self.line("response_item", item)

    def call(self, call_id: str, command: str) -> None:
        arguments = json.dumps({"command": ["bash", "-lc", command]})
        item = {"type": "function_call", "name": "shell", "arguments": arguments}
        self.line("response_item", {**item, "call_id": call_id})

    def output(self, call_id: str, text: str) -> None:
        output = json.dumps({"output": text, "metadata": {}})
        item = {"type": "function_call_output", "call_id": call_id, "output": output}
        self.line("response_item", item)

    def tokens(self, fresh: int, cached: int, output: int, *, repeat: bool = True) -> None:
        """One API call's usage: the cumulative totals grow by it (and the event repeats)."""
        last = [fresh + cached, cached, output, output // 2, fresh + cached + output]
        self.totals = [a + b for a, b in zip(self.totals, last, strict=True)]
        names = ("input_tokens", "cached_input_tokens", "output_tokens",
                 "reasoning_output_tokens", "total_tokens")  # fmt: skip
        info = {"total_token_usage": dict(zip(names, self.totals, strict=True)),
                "last_token_usage": dict(zip(names, last, strict=True)),
                "model_context_window": 272000}  # fmt: skip
        for _ in range(2 if repeat else 1):
            self.line("event_msg", {"type": "token_count", "info": info})

    def task_complete(self) -> None:
        self.line("event_msg", {"type": "task_complete", "last_agent_message": None})

    def data(self) -> bytes:
        return jsonl(self.rows)

    def path_in(self, home: Path, *, archived: bool = False) -> Path:
        day = self.start.strftime("%Y/%m/%d")
        stamp = self.start.strftime("%Y-%m-%dT%H-%M-%S")
        folder = home / "archived_sessions" if archived else home / "sessions" / day
        return folder / f"rollout-{stamp}-{self.session_id}.jsonl"

    def write(self, home: Path, *, archived: bool = False) -> Path:
        path = self.path_in(home, archived=archived)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.data())
        return path


def codex_turn(log: CodexLog, index: int, *, calls: int = 1) -> None:
    """A prompt, reasoning, ``calls`` shell calls with their outputs, an answer."""
    log.user(f"task {index}")
    log.reasoning(f"thinking about {index}")
    if calls:
        for call in range(calls):
            log.call(f"call_{index}_{call}", f"echo {call}")
        log.tokens(100 * (index + 1), 1000, 20)
        for call in range(calls):
            log.output(f"call_{index}_{call}", f"{call}\n")
    log.assistant(f"done {index}")
    log.tokens(50, 1100, 30)
    log.task_complete()


_OPENCODE_SCHEMA = (
    "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, slug TEXT, "
    "directory TEXT, title TEXT, version TEXT, time_created INTEGER, time_updated INTEGER)",
    "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, "
    "time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL)",
    "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL, "
    "time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL)",
)


@dataclass
class OpenCodeDb:
    """An OpenCode data folder's ``opencode.db`` being written (WAL, as OpenCode runs it)."""

    folder: Path
    clock: int = 1_759_300_000_000  # 2025-10-01T06:26:40Z
    counter: int = 0

    def __post_init__(self) -> None:
        import sqlite3

        self.folder.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.folder / "opencode.db", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        for statement in _OPENCODE_SCHEMA:
            self.conn.execute(statement)

    def _next(self, prefix: str) -> str:
        self.counter += 1
        self.clock += 1000
        return f"{prefix}_{self.counter:06d}"

    def session(
        self, sid: str, directory: str = "/home/u/work/app", parent: str | None = None
    ) -> None:
        self.conn.execute(
            "INSERT INTO session VALUES (?, 'prj', ?, 'slug', ?, 'title', '1.0.0', ?, ?)",
            (sid, parent, directory, self.clock, self.clock),
        )

    def _message(self, sid: str, data: dict[str, Any]) -> str:
        mid = self._next("msg")
        data = {"id": mid, "sessionID": sid, **data, "time": {"created": self.clock,
                **data.get("time", {})}}  # fmt: skip
        self.conn.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (mid, sid, self.clock, self.clock, json.dumps(data)),
        )
        return mid

    def part(self, sid: str, mid: str, data: dict[str, Any]) -> str:
        pid = self._next("prt")
        body = {"id": pid, "sessionID": sid, "messageID": mid, **data}
        self.conn.execute(
            "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
            (pid, mid, sid, self.clock, self.clock, json.dumps(body)),
        )
        return pid

    def user(self, sid: str, text: str) -> str:
        mid = self._message(sid, {"role": "user", "agent": "build"})
        self.part(sid, mid, {"type": "text", "text": text})
        return mid

    def assistant(
        self,
        sid: str,
        parts: list[dict[str, Any]],
        *,
        tokens: tuple[int, int, int, int] = (100, 20, 500, 50),
        model: str = "claude-sonnet-4-5",
        complete: bool = True,
        error: dict[str, Any] | None = None,
    ) -> str:
        fresh, output, read, write = tokens
        data: dict[str, Any] = {
            "role": "assistant",
            "modelID": model,
            "providerID": "anthropic",
            "mode": "build",
            "path": {"cwd": "/home/u/work/app", "root": "/home/u/work/app"},
            "cost": 0.01,
            "tokens": {
                "input": fresh,
                "output": output,
                "reasoning": 3,
                "cache": {"read": read, "write": write},
            },
        }
        if complete:
            data["time"] = {"completed": self.clock + 500}
            data["finish"] = "stop"
        if error is not None:
            data["error"] = error
        mid = self._message(sid, data)
        for part in parts:
            self.part(sid, mid, part)
        return mid

    def complete(self, mid: str) -> None:
        """Mark a message complete, as OpenCode does when its stream ends."""
        (data,) = self.conn.execute("SELECT data FROM message WHERE id = ?", (mid,)).fetchone()
        value = json.loads(data)
        value["time"]["completed"] = value["time"]["created"] + 900
        value["finish"] = "stop"
        self.conn.execute("UPDATE message SET data = ? WHERE id = ?", (json.dumps(value), mid))

    def close(self) -> None:
        self.conn.close()


def opencode_tool(call_id: str, tool: str, output: str, *, error: bool = False,
                  metadata: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    state: dict[str, Any] = {"status": "error" if error else "completed",
                             "input": {"command": "ls"}, "metadata": metadata or {}}  # fmt: skip
    state["error" if error else "output"] = output
    return {"type": "tool", "callID": call_id, "tool": tool, "state": state}


@dataclass
class GeminiChat:
    """A Gemini CLI chat: the JSON form (rewritten whole, pretty-printed) or the JSONL form."""

    session_id: str
    project_hash: str = "ab" * 32
    start: datetime = field(default_factory=lambda: datetime(2025, 11, 5, 8, 0, tzinfo=UTC))
    messages: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0

    def _stamp(self) -> str:
        self.step += 1
        moment = self.start + timedelta(seconds=self.step)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def user(self, text: str) -> None:
        self.messages.append({"id": f"u{len(self.messages)}", "timestamp": self._stamp(),
                              "type": "user", "content": text})  # fmt: skip

    def reply(
        self,
        text: str,
        *,
        tokens: tuple[int, int, int, int] = (1000, 50, 400, 7),
        calls: list[dict[str, Any]] | None = None,
        model: str = "gemini-2.5-pro",
    ) -> dict[str, Any]:
        inputs, output, cached, thoughts = tokens
        message: dict[str, Any] = {
            "id": f"g{len(self.messages)}",
            "timestamp": self._stamp(),
            "type": "gemini",
            "content": text,
            "thoughts": [
                {"subject": "Plan", "description": "think first", "timestamp": self._stamp()}
            ],
            "tokens": {
                "input": inputs,
                "output": output,
                "cached": cached,
                "thoughts": thoughts,
                "tool": 0,
                "total": inputs + output + thoughts,
            },
            "model": model,
        }
        if calls:
            message["toolCalls"] = calls
        self.messages.append(message)
        return message

    def header(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "projectHash": self.project_hash,
                "startTime": self.start.isoformat().replace("+00:00", "Z"),
                "lastUpdated": self._stamp(), "kind": "main"}  # fmt: skip

    def json_form(self) -> bytes:
        return json.dumps({**self.header(), "messages": self.messages}, indent=2).encode()

    def write(self, folder: Path) -> Path:
        """Write (rewrite) the JSON form ``<folder>/chats/session-....json``."""
        path = folder / "chats" / f"session-{self.session_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.json_form())
        return path


def gemini_call(call_id: str, output: str, status: str = "success") -> dict[str, Any]:
    response = {"output": output} if status == "success" else {"error": output}
    return {"id": call_id, "name": "run_shell_command", "args": {"command": "ls"},
            "status": status, "result": [{"functionResponse": {
                "id": call_id, "name": "run_shell_command", "response": response}}]}  # fmt: skip
