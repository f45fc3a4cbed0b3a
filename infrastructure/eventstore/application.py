"""SessionApplication: an eventsourcing Application whose event store is the trace.

Bound to one ``(data_root, project, agent)``; ``Repository.get(session_id)``
rebuilds a :class:`~pentrace.domain.session.aggregate.Session` from its shards with a
plain projector.  Commands go through a :class:`SessionHandle` that stamps
them with the application's injectable clock and saves per request (or per
event).  After each successful trace write, ``on_recorded(session_id,
[(position, record), ...])`` is called best-effort: the ledger hangs here, and
its failures are logged (no payload text) and never fail the save.  That
plumbing (factory, repository, save, hook) is
:class:`~pentrace.infrastructure.eventstore.plumbing.TraceApplication`'s; this
module has the session operations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pentrace.domain.session.aggregate import Session, ToolSpec
from pentrace.errors import NotFoundError
from pentrace.infrastructure.eventstore.plumbing import OnRecorded, TraceApplication
from pentrace.infrastructure.sessions.handle import SaveMode, SessionHandle
from pentrace.infrastructure.sessions.meta import read_latest_meta, switch_block
from pentrace.infrastructure.storage.layout import new_session_id
from pentrace.infrastructure.trace.reader import read_shard
from pentrace.projections.resume import ResumeResult, resume_trace

__all__ = ["OnRecorded", "ResumedSession", "SaveMode", "SessionApplication", "SessionHandle"]

DANGLING_COMPACTION_ERROR = "compaction interrupted: the process exited before it ended"


@dataclass(frozen=True, slots=True)
class ResumedSession:
    """What :meth:`SessionApplication.resume_session` returns."""

    result: ResumeResult
    handle: SessionHandle
    trace_path: Path


class SessionApplication(TraceApplication):
    """Record, reload and resume the sessions of one agent (see the module docstring)."""

    name = "pentrace"

    # ------------------------------------------------------------------ sessions

    def start_session(
        self,
        *,
        provider: str,
        model_id: str,
        model_context_window: float | str,
        system_prompt: str,
        workspace: Path | str | None = None,
        tools: Sequence[ToolSpec] = (),
        source: str | None = None,
        session_id: str | None = None,
        mode: SaveMode = SaveMode.REQUEST,
    ) -> SessionHandle:
        """Create a session (``session_meta`` + ``tool_list_ready`` saved at once).

        ``workspace`` must exist; ``None`` creates a temporary ``workspaces/tmp-<8hex>``.
        """
        if workspace is None:
            folder = self.root.new_temp_workspace(self.project, self.agent)
        else:
            folder = Path(workspace).expanduser().absolute()
            if not folder.is_dir():
                raise NotFoundError(
                    f"workspace {folder} does not exist (starting a session of agent "
                    f"{self.agent!r} in project {self.project!r})",
                    hint="create the folder first, or omit workspace for a temporary one",
                )
        self.root.ensure_project_config(self.project)  # the seed's layout: mode 0600
        self.root.ensure_agent_dirs(self.project, self.agent)
        session = Session.start(
            session_id or new_session_id(self.clock()),
            now=self.clock(),
            provider=provider,
            model_id=model_id,
            model_context_window=model_context_window,
            system_prompt=system_prompt,
            agent_state=str(self.root.agent_state_dir(self.project, self.agent)),
            workspace=str(folder),
            tools=tools,
            source=source,
        )
        handle = SessionHandle(self, session, mode)
        handle.save()
        return handle

    def open_session(self, session_id: str, mode: SaveMode = SaveMode.REQUEST) -> SessionHandle:
        """A handle on an existing session, rebuilt from its trace (no resume checks)."""
        return SessionHandle(self, self.repository.get(session_id), mode)

    def trace_path(self, session_id: str) -> Path:
        """The absolute path of a session's highest-index shard."""
        latest = self.root.latest_shard(self.project, self.agent, session_id)
        if latest is None:
            raise NotFoundError(
                f"session {session_id} has no trace under "
                f"{self.root.traces_dir(self.project, self.agent)}",
                hint="check the session id, project and agent",
            )
        return latest.path.absolute()

    def resume_session(
        self,
        session_id: str,
        *,
        model_available: Callable[[str, str], bool] | None = None,
        mode: SaveMode = SaveMode.REQUEST,
    ) -> ResumedSession:
        """Resume from the highest-index shard, as PenguinHarness's ``resumeSession`` does.

        Checks session_meta, provider, model (``model_available(provider,
        model_id)``) and workspace (:class:`~pentrace.errors.ResumeError`);
        forgets a request left open (replay drops it; nothing is written);
        closes a dangling compaction with ``compaction_end(status="failed")``
        first (once: a second resume finds nothing to close); folds the
        latest shard with :func:`~pentrace.projections.resume.resume_trace`.
        """
        read_latest_meta(self.root, self.project, self.agent, session_id, model_available)
        handle = SessionHandle(self, self.repository.get(session_id), mode)
        handle.session.abandon_open_request()
        if handle.session.compaction is not None:
            handle.session.end_compaction(
                "failed", now=self.clock(), error_message=DANGLING_COMPACTION_ERROR
            )
            handle.save()
        path = self.trace_path(session_id)
        return ResumedSession(resume_trace(read_shard(path)), handle, path)

    def switch_model(
        self,
        source_session_id: str,
        *,
        provider: str,
        model_id: str,
        model_context_window: int | str,
        system_prompt: str,
        text: str,
        tools: Sequence[ToolSpec] = (),
        mode: SaveMode = SaveMode.REQUEST,
    ) -> SessionHandle:
        """A new session in the source's workspace whose first input opens with the
        ``[model_switch_from]`` block; the source session is not touched."""
        meta = read_latest_meta(self.root, self.project, self.agent, source_session_id)
        handle = self.start_session(
            provider=provider,
            model_id=model_id,
            model_context_window=model_context_window,
            system_prompt=system_prompt,
            workspace=meta.workspace,
            tools=tools,
            mode=mode,
        )
        handle.record_user_input(switch_block(meta) + text)
        handle.save()
        return handle

    def spawn_subagent(
        self,
        parent: SessionHandle | str,
        *,
        system_prompt: str,
        provider: str | None = None,
        model_id: str | None = None,
        model_context_window: float | str | None = None,
        tools: Sequence[ToolSpec] = (),
        mode: SaveMode = SaveMode.REQUEST,
    ) -> SessionHandle:
        """A child session (``source: "subagent"``) with its own trace, in the parent's
        workspace; the parent gets one ``subagent`` pointer, saved after the child exists.

        Pass the parent's handle when you hold one; given an id, the parent is
        loaded from its trace (a handle held elsewhere then becomes stale).
        """
        if isinstance(parent, str):
            parent = self.open_session(parent)
        meta = read_latest_meta(self.root, self.project, self.agent, parent.session_id)
        child = self.start_session(
            provider=provider or meta.provider,
            model_id=model_id or meta.model_id,
            model_context_window=model_context_window or meta.model_context_window,
            system_prompt=system_prompt,
            workspace=meta.workspace,
            tools=tools,
            source="subagent",
            mode=mode,
        )
        parent.record_subagent(child.session_id)
        parent.save()
        return child
