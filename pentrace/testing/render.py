"""Turn a command sequence into the trace lines PenguinHarness would write.

Pure: the clock is an argument (``start`` plus one millisecond per command;
every record a command writes shares its timestamp), so the same commands
always give the same bytes.  A completed ``compaction_end``
makes the *next* record open a new shard that starts with copies of
``session_meta`` and ``tool_list_ready``, as the PenguinHarness writer does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, assert_never

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.testing import commands as cmd

__all__ = [
    "DEFAULT_SESSION_ID",
    "DEFAULT_START",
    "command_time",
    "envelope_line",
    "format_timestamp",
    "numbered_records",
    "payload_for",
    "render_shards",
]

DEFAULT_SESSION_ID: Final = "session-2026-07-18-11-10-22-3f8a1c2d"
DEFAULT_START: Final = datetime(2026, 7, 18, 3, 10, 22, 531000, tzinfo=UTC)
_encoder: Final = JsonEncoder()


def format_timestamp(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC, the way JavaScript's toISOString writes it."""
    utc = moment.astimezone(UTC)
    return f"{utc:%Y-%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def command_time(start: datetime, number: int) -> datetime:
    """When command ``number`` (0-based) happens: one millisecond after the previous one."""
    return start + timedelta(milliseconds=number)


def envelope_line(timestamp: str, kind: str, payload: dict[str, Any]) -> bytes:
    """One trace line (no newline): ``{"timestamp", "type", "payload"}`` in that order."""
    return _encoder.encode({"timestamp": timestamp, "type": kind, "payload": payload})


def numbered_records(lines: Iterable[bytes], first: int = 1) -> list[tuple[int, TraceRecord]]:
    """``(position, record)`` pairs of consecutive lines, as the live hook receives them."""
    return [(position, TraceRecord(line)) for position, line in enumerate(lines, start=first)]


def _meta(start: cmd.StartSession, session_id: str) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "provider": start.provider,
        "model_id": start.model_id,
        "model_context_window": start.model_context_window,
        "system_prompt": start.system_prompt,
        "agent_state": start.agent_state,
        "workspace": start.workspace,
    }


def _tools(start: cmd.StartSession) -> dict[str, Any]:
    tools = [{"name": name, "description": f"the {name} tool"} for name in start.tools]
    return {"type": "tool_list_ready", "tools": tools}


def payload_for(command: cmd.Command) -> tuple[str, dict[str, Any]]:
    """The envelope type and payload one command writes (``StartSession`` excepted)."""
    match command:
        case cmd.UserInput(text=text):
            return "model_msg", {"type": "text", "role": "user", "text": text}
        case cmd.BeginRequest():
            return "event_msg", {"type": "request_begin"}
        case cmd.AssistantText(text=text):
            payload = {"type": "text", "role": "assistant", "text": text}
            return "model_msg", {**payload, "stop_reason": "completed"}
        case cmd.Thinking(thinking=thinking):
            payload = {"type": "thinking", "role": "assistant", "thinking": thinking}
            return "model_msg", {**payload, "stop_reason": "completed"}
        case cmd.ToolCall(tool_call_id=call_id, name=name, arguments=arguments):
            payload = {"type": "tool_call", "role": "assistant", "name": name}
            payload.update(arguments=arguments, tool_call_id=call_id, stop_reason="completed")
            return "model_msg", payload
        case cmd.Approval(tool_call_id=call_id, decision=decision):
            return "event_msg", {
                "type": "approval_decision",
                "decision": decision,
                "tool_call_id": call_id,
            }
        case cmd.ToolOutput(tool_call_id=call_id, output=output):
            payload = {"type": "tool_call_output", "role": "user", "output": output}
            return "model_msg", {**payload, "tool_call_id": call_id}
        case cmd.Abort(reason=reason):
            return "event_msg", {"type": "abort", "reason": reason}
        case cmd.EndRequest(status=status):
            return "event_msg", {"type": "request_end", "status": status}
        case cmd.TokenUsage(session=session, request=request):
            usage = {"session": session.as_dict(), "request": request.as_dict()}
            return "event_msg", {"type": "token_usage", **usage}
        case cmd.CompactionBegin(reason=reason, mode=mode):
            span = {"context": 0, "turns": 0}
            return "event_msg", {"type": "compaction_begin", "reason": reason, "mode": mode, **span}
        case cmd.CompactionEnd(reason=reason, mode=mode, status=status):
            fields = {"reason": reason, "mode": mode, "status": status}
            return "event_msg", {"type": "compaction_end", **fields}
        case cmd.SubagentPointer(session_id=child):
            return "event_msg", {"type": "subagent", "session_id": child}
        case cmd.StartSession():
            raise TypeError("StartSession writes two records; render_shards() writes them")
        case _:
            assert_never(command)


def render_shards(
    commands: Iterable[cmd.Command],
    *,
    session_id: str = DEFAULT_SESSION_ID,
    start: datetime = DEFAULT_START,
) -> list[list[bytes]]:
    """The shards (each a list of lines without ``\\n``) the commands write, in index order.

    These are exactly the lines :func:`pentrace.testing.drive.drive_session`
    makes the Session aggregate write with the same clock.

    The first command must be :class:`StartSession`; a later one is refused.
    """
    shards: list[list[bytes]] = []
    header: Sequence[tuple[str, dict[str, Any]]] = ()
    rotate = False
    for number, command in enumerate(commands):
        stamp = format_timestamp(command_time(start, number))
        if isinstance(command, cmd.StartSession):
            if shards:
                raise ValueError("StartSession may only be the first command")
            header = (("session_meta", _meta(command, session_id)), ("event_msg", _tools(command)))
            shards.append([envelope_line(stamp, kind, body) for kind, body in header])
            continue
        if not shards:
            raise ValueError(f"expected StartSession first, found {type(command).__name__}")
        if rotate:
            shards.append([envelope_line(stamp, kind, body) for kind, body in header])
            rotate = False
        kind, payload = payload_for(command)
        shards[-1].append(envelope_line(stamp, kind, payload))
        rotate = isinstance(command, cmd.CompactionEnd) and command.status == "completed"
    return shards
