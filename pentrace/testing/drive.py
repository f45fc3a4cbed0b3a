"""Drive the real Session aggregate with generated commands.

Each command becomes one aggregate command (one or more trace lines), with
``now`` taken from the same clock :func:`~pentrace.testing.render.render_shards`
uses, so a driven session writes exactly the rendered lines.  Assistant
messages are recorded with ``stop_reason="completed"``: resume commits a tool
call only when its ``stop_reason`` says so (PenguinHarness writes it).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import assert_never

from pentrace.domain.session.aggregate import Session
from pentrace.testing import commands as cmd
from pentrace.testing.render import DEFAULT_SESSION_ID, DEFAULT_START, command_time

__all__ = ["apply_command", "drive_session", "start_session"]

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
