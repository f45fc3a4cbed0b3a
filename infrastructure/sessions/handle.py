"""A thin handle on one live session: call commands without passing the time, and save.

The handle reads the application's clock for every command and saves the
aggregate according to its :class:`SaveMode`:

- ``EVENT``: one save (one atomic trace write) per command;
- ``REQUEST`` (default): one save when a request ends (``end_request``), when a
  compaction ends, and on :meth:`SessionHandle.save` / :meth:`SessionHandle.close`;
  records written between requests (user input, ``token_usage``) travel with
  the next save;
- ``MANUAL``: only :meth:`SessionHandle.save` and :meth:`SessionHandle.close` save.

If a save fails, the handle reloads the session from its trace, so its state
matches what is on disk, and re-raises the error.

Tool output longer than the application's ``max_output_chars`` is archived in
the session's scratchpad and recorded as its head plus notes
(:mod:`pentrace.infrastructure.trace.tool_output`), so the trace holds what the model saw.
"""

from __future__ import annotations

import contextlib
import enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from eventsourcing.application import AggregateNotFoundError

from pentrace.domain.session.aggregate import Session
from pentrace.infrastructure.trace.tool_output import bound_tool_output, utf16_length

if TYPE_CHECKING:
    from pentrace.infrastructure.eventstore.application import SessionApplication

__all__ = ["SaveMode", "SessionHandle"]


class SaveMode(enum.Enum):
    """When a :class:`SessionHandle` saves its pending records (see the module docstring)."""

    EVENT = "event"
    REQUEST = "request"
    MANUAL = "manual"


_EVENT: Final = SaveMode.EVENT
_MANUAL: Final = SaveMode.MANUAL


class SessionHandle:
    """Commands on one session, stamped with the application's clock and saved per ``mode``."""

    def __init__(
        self, app: SessionApplication, session: Session, mode: SaveMode = SaveMode.REQUEST
    ) -> None:
        self._app = app
        self._session = session
        self.mode = mode
        # Names of calls recorded through this handle, to name their output archives.
        self._tool_names: dict[str, str] = {}

    @property
    def session(self) -> Session:
        """The aggregate (read its counters; call commands through the handle)."""
        return self._session

    @property
    def session_id(self) -> str:
        """The session id."""
        return self._session.id

    @property
    def trace_path(self) -> Path:
        """The absolute path of the session's latest shard."""
        return self._app.trace_path(self.session_id)

    @property
    def pending(self) -> int:
        """How many records wait for the next save."""
        return len(self._session.pending_events)

    def save(self) -> None:
        """Write the pending records as one atomic batch (nothing to do when there are none)."""
        if not self._session.pending_events:
            return
        try:
            self._app.save(self._session)
        except BaseException:
            # The aggregate applied records that did not reach the trace: reload from disk.
            # Nothing of a brand-new session may have reached the disk: keep its state then.
            with contextlib.suppress(AggregateNotFoundError):
                self._session = self._app.repository.get(self.session_id)
            raise

    def close(self) -> None:
        """Save what is pending, then release the session's writer and lock."""
        try:
            self.save()
        finally:
            self._app.release(self.session_id)

    def __enter__(self) -> SessionHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _written(self, *, boundary: bool = False) -> None:
        """Save after a command: always in EVENT mode, at a ``boundary`` in REQUEST mode too."""
        if self.mode is _EVENT or (boundary and self.mode is not _MANUAL):
            self.save()

    # The commands: see Session for each one's arguments and refusals.  Each calls
    # the aggregate itself (no generic dispatcher): recording is the hot path.

    def record_user_input(self, text: str, **options: Any) -> None:
        """User input, written before ``request_begin`` (``images=``, ``sender=``)."""
        self._session.record_user_input(text, now=self._app.clock(), **options)
        self._written()

    def begin_request(self) -> None:
        """``request_begin``."""
        self._session.begin_request(now=self._app.clock())
        self._written()

    def end_request(self, status: str, **options: Any) -> None:
        """``request_end``; saves in EVENT and REQUEST mode."""
        self._session.end_request(status, now=self._app.clock(), **options)
        self._written(boundary=True)

    def record_text(self, text: str, **options: Any) -> None:
        """An assistant (or ``role=``) ``text`` message."""
        self._session.record_text(text, now=self._app.clock(), **options)
        self._written()

    def record_thinking(self, thinking: str, **options: Any) -> None:
        """A ``thinking`` message."""
        self._session.record_thinking(thinking, now=self._app.clock(), **options)
        self._written()

    def record_inline_thinking(self, data: str, mime_type: str, **options: Any) -> None:
        """An ``inline_thinking`` message."""
        self._session.record_inline_thinking(data, mime_type, now=self._app.clock(), **options)
        self._written()

    def record_tool_call(
        self, name: str, arguments: str, tool_call_id: str, **options: Any
    ) -> None:
        """A ``tool_call``."""
        self._session.record_tool_call(
            name, arguments, tool_call_id, now=self._app.clock(), **options
        )
        self._written()
        self._tool_names[tool_call_id] = name

    def record_tool_output(
        self, tool_call_id: str, output: str, *, tool_name: str | None = None, **options: Any
    ) -> None:
        """A ``tool_call_output``, bounded to the application's ``max_output_chars``.

        Longer output is archived under ``scratchpad/<session>/truncated-tool-output/``
        first and recorded as its head plus the truncation and archive notes.
        ``tool_name`` names the archive file; by default it is the name the call
        was recorded with through this handle (``"tool"`` if unknown).
        """
        cap = self._app.max_output_chars
        # An output the aggregate will refuse must not leave an archive behind.
        if (
            cap > 0
            and utf16_length(output) > cap
            and not self._session.deleted
            and tool_call_id in self._session.awaiting_output()
        ):
            app = self._app
            output = bound_tool_output(
                output,
                tool_name=tool_name or self._tool_names.get(tool_call_id, "tool"),
                tool_call_id=tool_call_id,
                archive_dir=app.root.truncated_output_dir(app.project, app.agent, self.session_id),
                max_chars=cap,
            )
        self._session.record_tool_output(tool_call_id, output, now=self._app.clock(), **options)
        self._written()
        self._tool_names.pop(tool_call_id, None)

    def record_image_url(self, image_url: str, **options: Any) -> None:
        """An ``image_url`` message."""
        self._session.record_image_url(image_url, now=self._app.clock(), **options)
        self._written()

    def record_inline_data(self, data: str, mime_type: str, **options: Any) -> None:
        """An ``inline_data`` message."""
        self._session.record_inline_data(data, mime_type, now=self._app.clock(), **options)
        self._written()

    def record_model_message(self, payload: Any) -> None:
        """Any complete OmniMessage model payload."""
        self._session.record_model_message(payload, now=self._app.clock())
        self._written()

    def decide_approval(self, tool_call_id: str, decision: str) -> None:
        """``approval_decision``."""
        self._session.decide_approval(tool_call_id, decision, now=self._app.clock())
        self._written()

    def abort(self, reason: str | None = None) -> None:
        """``abort``."""
        self._session.abort(now=self._app.clock(), reason=reason)
        self._written()

    def record_token_usage(self, session: Any, request: Any) -> None:
        """``token_usage`` (TokenCounts or mappings)."""
        self._session.record_token_usage(session, request, now=self._app.clock())
        self._written()

    def begin_compaction(self, reason: str, mode: str, **options: Any) -> None:
        """``compaction_begin`` (``context=``, ``turns=``)."""
        self._session.begin_compaction(reason, mode, now=self._app.clock(), **options)
        self._written()

    def end_compaction(self, status: str, **options: Any) -> None:
        """``compaction_end``; saves in EVENT and REQUEST mode."""
        self._session.end_compaction(status, now=self._app.clock(), **options)
        self._written(boundary=True)

    def finish_goal(self, outcome: str, *, rounds: int, tokens_used: int) -> None:
        """``goal_finished``."""
        self._session.finish_goal(
            outcome, now=self._app.clock(), rounds=rounds, tokens_used=tokens_used
        )
        self._written()

    def begin_mcp_connect(self, servers: Any) -> None:
        """``mcp_connect_begin``."""
        self._session.begin_mcp_connect(servers, now=self._app.clock())
        self._written()

    def end_mcp_connect(self, status: str, results: Any) -> None:
        """``mcp_connect_end``."""
        self._session.end_mcp_connect(status, results, now=self._app.clock())
        self._written()

    def record_subagent(self, child_session_id: str) -> None:
        """``subagent`` pointer (``SessionApplication.spawn_subagent`` writes it for you)."""
        self._session.record_subagent(child_session_id, now=self._app.clock())
        self._written()
