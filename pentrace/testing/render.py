"""Turn a command sequence into the trace lines PenguinHarness would write.

Pure: the clock is an argument (``start`` plus one millisecond per command;
every record a command writes shares its timestamp), so the same commands
always give the same bytes.  A completed ``compaction_end``
makes the *next* record open a new shard that starts with copies of
``session_meta`` and ``tool_list_ready``, as the PenguinHarness writer does.

The same commands also drive the real Session aggregate (:func:`drive_session`):
each becomes one aggregate command (one or more trace lines), with ``now`` from
the same clock, so a driven session writes exactly the rendered lines.
Assistant messages are recorded with ``stop_reason="completed"``: resume
commits a tool call only when its ``stop_reason`` says so (PenguinHarness
writes it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, assert_never

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.aggregate import Session
from pentrace.testing import commands as cmd

__all__ = [
    "DEFAULT_SESSION_ID",
    "DEFAULT_START",
    "apply_command",
    "command_time",
    "drive_session",
    "envelope_line",
    "format_timestamp",
    "numbered_records",
    "payload_for",
    "render_shards",
    "start_session",
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

    These are exactly the lines :func:`drive_session`
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


_DONE = "completed"


def start_session(command: cmd.StartSession, *, session_id: str, now: datetime) -> Session:
    """``Session.start`` with the command's meta fields and one description per tool."""
    tools = [{"name": name, "description": f"the {name} tool"} for name in command.tools]
    return Session.start(
        session_id,
        now=now,
        provider=command.provider,
        model_id=command.model_id,
        model_context_window=command.model_context_window,
        system_prompt=command.system_prompt,
        agent_state=command.agent_state,
        workspace=command.workspace,
        tools=tools,
    )


def apply_command(session: Session, command: cmd.Command, *, now: datetime) -> None:
    """Apply one (non-start) command to ``session``; refusals propagate as raised."""
    match command:
        case cmd.UserInput(text=text):
            session.record_user_input(text, now=now)
        case cmd.BeginRequest():
            session.begin_request(now=now)
        case cmd.AssistantText(text=text):
            session.record_text(text, now=now, stop_reason=_DONE)
        case cmd.Thinking(thinking=thinking):
            session.record_thinking(thinking, now=now, stop_reason=_DONE)
        case cmd.ToolCall(tool_call_id=call_id, name=name, arguments=arguments):
            session.record_tool_call(name, arguments, call_id, now=now, stop_reason=_DONE)
        case cmd.Approval(tool_call_id=call_id, decision=decision):
            session.decide_approval(call_id, decision, now=now)
        case cmd.ToolOutput(tool_call_id=call_id, output=output):
            session.record_tool_output(call_id, output, now=now)
        case cmd.Abort(reason=reason):
            session.abort(now=now, reason=reason)
        case cmd.EndRequest(status=status):
            session.end_request(status, now=now)
        case cmd.TokenUsage(session=totals, request=request):
            session.record_token_usage(totals.as_dict(), request.as_dict(), now=now)
        case cmd.CompactionBegin(reason=reason, mode=mode):
            session.begin_compaction(reason, mode, now=now, context=0, turns=0)
        case cmd.CompactionEnd(status=status):
            session.end_compaction(status, now=now)
        case cmd.SubagentPointer(session_id=child):
            session.record_subagent(child, now=now)
        case cmd.StartSession():
            raise ValueError("StartSession starts a session; use start_session()")
        case _:
            assert_never(command)


def drive_session(
    commands: Iterable[cmd.Command],
    *,
    session_id: str = DEFAULT_SESSION_ID,
    start: datetime = DEFAULT_START,
) -> Session:
    """A new Session aggregate with every command applied (not saved anywhere).

    The first command must be :class:`StartSession`.  Collect the lines with
    ``session.collect_events()`` (each event's ``line``), or save the
    aggregate with an application.
    """
    session: Session | None = None
    for number, command in enumerate(commands):
        now = command_time(start, number)
        if session is None:
            if not isinstance(command, cmd.StartSession):
                raise ValueError(f"expected StartSession first, found {type(command).__name__}")
            session = start_session(command, session_id=session_id, now=now)
        else:
            apply_command(session, command, now=now)
    if session is None:
        raise ValueError("expected at least a StartSession command, found none")
    return session
