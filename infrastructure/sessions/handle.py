"""A thin handle on one live session: call commands without passing the time, and save.

The handle offers every command of the Session aggregate (those marked with
``@command``) under the same name and arguments, less ``now``: it reads the
application's clock for every command and saves the aggregate according to
its :class:`SaveMode`:

- ``EVENT``: one save (one atomic trace write) per command;
- ``REQUEST`` (default): one save after a command that closes a unit of work
  (``@command(closes=True)``: ``end_request``, ``end_compaction``), and on
  :meth:`SessionHandle.save` / :meth:`SessionHandle.close`; records written
  between requests (user input, ``token_usage``) travel with the next save;
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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from eventsourcing.application import AggregateNotFoundError

from pentrace.domain.session.aggregate import COMMANDS, Session
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

    # Every Session command (``Session.COMMANDS``) is called through the handle the same
    # way: the application's clock as ``now``, then the save rule.  Each is made once per
    # handle and kept on it, so a later call is a plain attribute read.  Two commands do
    # more than that and are written out below: tool calls and their (bounded) output.

    def __getattr__(self, name: str) -> Callable[..., None]:
        """The Session command ``name`` without its ``now`` argument, saved per ``mode``."""
        closes = COMMANDS.get(name)
        if closes is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

        def call(*args: Any, **options: Any) -> None:
            getattr(self._session, name)(*args, now=self._app.clock(), **options)
            self._written(boundary=closes)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = getattr(Session, name).__doc__
        self.__dict__[name] = call
        return call

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *COMMANDS})

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
