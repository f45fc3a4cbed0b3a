"""The Session aggregate: commands that write a legal trace, one event per line.

Commands take the time as ``now`` (the domain never reads a clock), check
legality, build the OmniMessage payload and trigger the event whose ``line``
is the encoded envelope; :class:`~pentrace.domain.session.state.SessionState`
holds the small state and the write plumbing.  This module has the lifecycle
and ``event_msg`` commands; the model-message ones (text, thinking, tool calls
and their output, images, inline data) are inherited from
:class:`~pentrace.domain.session.messages.SessionMessages`.

Refusals raise a :class:`~pentrace.errors.IllegalCommandError` subclass naming
the session and the sequence (position) the write would have taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final, get_args

import msgspec
from eventsourcing.utils import register_topic

from pentrace.domain import omnimessage as om
from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import PayloadHead
from pentrace.domain.session import events as ev
from pentrace.domain.session.lines import (
    Fidelity,
    ToolSpec,
    optional,
    stamp,
    token_counts,
    tool_definition,
)
from pentrace.domain.session.messages import SessionMessages
from pentrace.domain.session.state import project_session
from pentrace.errors import (
    CompactionStateError,
    RequestAlreadyOpenError,
    UnknownStatusError,
)

__all__ = ["Fidelity", "Session", "ToolSpec", "project_session"]

_EVENT: Final = "event_msg"
_REQUEST_STATUSES: Final = get_args(om.StopReason)
_encode: Final = JsonEncoder().encode


class Session(SessionMessages):
    """One recorded agent session; its id is the session id, its version the record count."""

    @classmethod
    def start(
        cls,
        session_id: str,
        *,
        now: datetime,
        provider: str,
        model_id: str,
        model_context_window: float | str,
        system_prompt: str,
        agent_state: str,
        workspace: str,
        tools: Sequence[ToolSpec] = (),
        source: str | None = None,
    ) -> Session:
        """Start a session: writes ``session_meta`` then ``tool_list_ready``."""
        meta = om.SessionMeta(
            session_id=session_id,
            provider=provider,
            model_id=model_id,
            model_context_window=model_context_window,
            system_prompt=system_prompt,
            agent_state=agent_state,
            workspace=workspace,
            source=optional(source),
        )
        text, exact = stamp(now)
        line = _encode(om.Envelope(timestamp=text, type="session_meta", payload=meta))
        session = cls._create(ev.SessionStarted, id=session_id, timestamp=exact, line=line)
        tool_list = om.ToolListReady(tools=tuple(tool_definition(t) for t in tools))
        session._write(ev.ToolsListed, _EVENT, tool_list, now)
        return session

    # ---------------------------------------------------------------- commands

    def begin_request(self, *, now: datetime) -> None:
        """``request_begin``; refused while a request is open."""
        self._check_writable("request_begin")
        if self.open_request:
            raise RequestAlreadyOpenError(
                self._where("request_begin") + "expected no open request, found one open",
                hint="end the open request with end_request() first",
            )
        self._write(ev.RequestBegan, _EVENT, om.RequestBegin(), now)

    def end_request(
        self,
        status: str,
        *,
        now: datetime,
        error_message: str | None = None,
        attempt: int | None = None,
        retry_in_ms: int | None = None,
    ) -> None:
        """``request_end(status, ...)``; ``completed`` commits the request.

        ``status`` must be a StopReason value (readers treat any other as a failure).
        """
        self._require_open_request("request_end")
        if status not in _REQUEST_STATUSES:
            raise UnknownStatusError(
                self._where("request_end")
                + f"expected a status in {'|'.join(_REQUEST_STATUSES)}, found {str(status)[:40]!r}",
                hint="pass one of the StopReason values, e.g. 'completed' or 'failed'",
            )
        payload = om.RequestEnd(
            status=status,
            error_message=msgspec.UNSET if error_message is None else error_message,
            attempt=msgspec.UNSET if attempt is None else attempt,
            retry_in_ms=msgspec.UNSET if retry_in_ms is None else retry_in_ms,
        )
        head = PayloadHead("request_end", None, None, status, None)
        self._write(ev.RequestEnded, _EVENT, payload, now, head)

    def decide_approval(self, tool_call_id: str, decision: str, *, now: datetime) -> None:
        """``approval_decision`` (allow, deny or forbidden) for a tool call."""
        payload = om.ApprovalDecision(decision=decision, tool_call_id=tool_call_id)
        self._write(ev.ApprovalDecided, _EVENT, payload, now)

    def abort(self, *, now: datetime, reason: str | None = None) -> None:
        """``abort``; like PenguinHarness, a missing reason is written as ``null``."""
        self._write(ev.Aborted, _EVENT, om.abort(reason), now)

    def record_token_usage(
        self,
        session: om.TokenCounts | Mapping[str, int],
        request: om.TokenCounts | Mapping[str, int],
        *,
        now: datetime,
    ) -> None:
        """``token_usage``: session totals and this request's counts."""
        payload = om.TokenUsage(session=token_counts(session), request=token_counts(request))
        self._write(ev.TokenUsageRecorded, _EVENT, payload, now)

    def begin_compaction(
        self, reason: str, mode: str, *, now: datetime, context: int = 0, turns: int = 0
    ) -> None:
        """``compaction_begin``; refused while another compaction is open."""
        if self.compaction is not None:
            raise CompactionStateError(
                self._where("compaction_begin") + "expected no open compaction, found one open",
                hint="end it with end_compaction() first",
            )
        payload = om.CompactionBegin(reason=reason, mode=mode, context=context, turns=turns)
        self._write(ev.CompactionBegan, _EVENT, payload, now)

    def end_compaction(
        self,
        status: str,
        *,
        now: datetime,
        attempt: int | None = None,
        error_message: str | None = None,
    ) -> None:
        """``compaction_end`` with the open compaction's reason and mode."""
        if self.compaction is None:
            raise CompactionStateError(
                self._where("compaction_end") + "expected an open compaction, found none",
                hint="call begin_compaction() first",
            )
        reason, mode = self.compaction
        payload = om.CompactionEnd(
            reason=reason,
            mode=mode,
            status=status,
            attempt=optional(attempt),
            error_message=optional(error_message),
        )
        self._write(ev.CompactionEnded, _EVENT, payload, now)

    def record_subagent(self, child_session_id: str, *, now: datetime) -> None:
        """``subagent``: the pointer to a child session's own trace."""
        self._write(ev.SubagentSpawned, _EVENT, om.Subagent(session_id=child_session_id), now)

    def finish_goal(self, outcome: str, *, now: datetime, rounds: int, tokens_used: int) -> None:
        """``goal_finished`` with its outcome."""
        payload = om.GoalFinished(outcome=outcome, rounds=rounds, tokens_used=tokens_used)
        self._write(ev.GoalFinished, _EVENT, payload, now)

    def begin_mcp_connect(self, servers: Sequence[str], *, now: datetime) -> None:
        """``mcp_connect_begin`` for the named servers."""
        self._write(ev.McpConnectBegan, _EVENT, om.McpConnectBegin(servers=tuple(servers)), now)

    def end_mcp_connect(
        self, status: str, results: Sequence[om.McpServerResult], *, now: datetime
    ) -> None:
        """``mcp_connect_end`` with one result per server."""
        payload = om.McpConnectEnd(status=status, results=tuple(results))
        self._write(ev.McpConnectEnded, _EVENT, payload, now)


# The aggregate's topic before the module moved into this package (ADR 0029).
register_topic("pentrace.domain.session:Session", Session)
