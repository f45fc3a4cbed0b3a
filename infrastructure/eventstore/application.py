"""SessionApplication: an eventsourcing Application whose event store is the trace.

Bound to one ``(data_root, project, agent)``.  :class:`TraceApplication` is the
eventsourcing plumbing: its factory is the trace persistence module, its
repository rebuilds sessions with the plain projector (from the newest shard's
checkpoint when it can), and its ``save`` writes a session's pending lines
straight to the trace recorder.  :class:`SessionApplication` adds the session
operations (start, resume, switch model, subagents); commands go through a
:class:`SessionHandle` that stamps them with the application's injectable
clock and saves per request (or per event).

After each successful trace write, ``on_recorded(session_id, [(position,
record), ...])`` is called best-effort with the records just written (each
event's :class:`~pentrace.domain.records.TraceRecord`, the one its ``apply``
read where it read one, so nothing is parsed twice): the ledger hangs here,
and its failures are logged (no payload text) and never fail the save.

The hook redacts what it indexes and publishes with the data root's rules
(ADR 0022).  When ``redaction.toml`` cannot be used, the trace is still
written but the hook is left out for the life of the application: nothing
redacted by the built-in rules alone may reach the ledger or a live
subscriber.  An error names the file (and the line or rule) with its hint;
``pentrace ledger sync`` indexes the records once the file is fixed.

Resume and ``/model`` read a session's runtime configuration from its latest
shard (:func:`read_latest_meta`), as PenguinHarness does: ``session_meta`` of
the highest-index shard (a rotated shard starts with a copy); it refuses to
resume when that is missing, names no provider or model, or when the workspace
or the model is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from eventsourcing.application import Application, ProcessingEvent, Repository
from eventsourcing.persistence import Recording
from eventsourcing.utils import Environment, EnvType

from pentrace.domain.records import TraceRecord
from pentrace.domain.session.aggregate import Session, ToolSpec, project_session
from pentrace.domain.session.events import ShardOpened
from pentrace.errors import ConfigError, NotFoundError, ResumeError
from pentrace.infrastructure.eventstore.persistence import Factory, TraceRecorder
from pentrace.infrastructure.eventstore.recorder import TraceMapper
from pentrace.infrastructure.redaction_policy import activate_policy
from pentrace.infrastructure.sessions.handle import SaveMode, SessionHandle
from pentrace.infrastructure.storage.layout import DataRoot, new_session_id
from pentrace.infrastructure.trace.checkpoints import (
    checkpoint_ahead,
    load_checkpoint,
    restore_session,
    write_checkpoint,
)
from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.reader import read_shard
from pentrace.infrastructure.trace.tool_output import DEFAULT_MAX_OUTPUT_CHARS
from pentrace.projections.resume import ResumeResult, resume_trace

__all__ = [
    "OnRecorded",
    "ResumedSession",
    "SaveMode",
    "SessionApplication",
    "SessionHandle",
    "SessionRepository",
    "TraceApplication",
]

logger = logging.getLogger("pentrace.infrastructure.eventstore.application")

OnRecorded = Callable[[str, Sequence[tuple[int, TraceRecord]]], None]
_SHARD_OPENED: Final = ShardOpened


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _redacting_hook(root: Path, on_recorded: OnRecorded | None) -> OnRecorded | None:
    """``on_recorded``, once the root's redaction rules are installed; None if they cannot be."""
    try:
        activate_policy(root)
    except ConfigError as error:
        if on_recorded is not None:
            logger.error(
                "recording the trace only: nothing is indexed into the ledger or published "
                "live, because the redaction rules cannot be used: %s (hint: %s; then run "
                "`pentrace ledger sync`)",
                error.message,
                error.hint or "fix or remove the file",
            )
        return None
    return on_recorded


class SessionRepository(Repository[str]):
    """A Repository whose default projector is :func:`project_session`."""

    def get(
        self,
        aggregate_id: str,
        *,
        version: int | None = None,
        projector_func: Any = project_session,
        fastforward_skipping: bool = False,
        deepcopy_from_cache: bool = True,
    ) -> Any:
        """Rebuild a session from its trace (see ``Repository.get``).

        The plain whole-session read (no version, no cache, the default
        projector) starts from the newest shard's checkpoint when it is valid
        (:mod:`~pentrace.infrastructure.trace.checkpoints`) and writes one after a
        full read of a rotated session; the state is the same either way.
        """
        recorder = self.event_store.recorder
        if (
            version is None
            and projector_func is project_session
            and self.cache is None
            and isinstance(recorder, TraceRecorder)
        ):
            session = self._get_by_shards(recorder, aggregate_id)
            if session is not None:
                return session
        return super().get(
            aggregate_id,
            version=version,
            projector_func=projector_func,
            fastforward_skipping=fastforward_skipping,
            deepcopy_from_cache=deepcopy_from_cache,
        )

    def _get_by_shards(self, recorder: TraceRecorder, session_id: str) -> Session | None:
        shards = recorder.root.find_shards(recorder.project, recorder.agent, session_id)
        if len(shards) < 2:
            return None
        where = (recorder.root, recorder.project, recorder.agent)
        to_domain = self.event_store.mapper.to_domain_event
        checkpoint = load_checkpoint(*where, session_id, shards)
        if checkpoint is None:
            older = recorder.select_shard_events(session_id, shards[:-1], 0)
            session = project_session(None, map(to_domain, older))
            if not isinstance(session, Session):
                return None
            write_checkpoint(*where, session, shards[:-1], shards[-1].index)
            before = len(older)
        else:
            session, before = restore_session(checkpoint), checkpoint.before
        newest = recorder.select_shard_events(session_id, shards[-1:], before)
        project_session(session, map(to_domain, newest))
        return session


class TraceApplication(Application[str]):
    """An Application over the trace store of one agent (see the module docstring)."""

    def __init__(
        self,
        data_root: DataRoot | Path | str,
        project: str,
        agent: str,
        *,
        durability: Durability = Durability.PER_REQUEST,
        clock: Callable[[], datetime] = _utc_now,
        on_recorded: OnRecorded | None = None,
        lock_wait: float | None = None,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        env: EnvType | None = None,
    ) -> None:
        root = data_root if isinstance(data_root, DataRoot) else DataRoot(Path(data_root))
        self.root = DataRoot(root.path.expanduser().absolute())
        self.project = project
        self.agent = agent
        self.clock = clock
        self.on_recorded = _redacting_hook(self.root.path, on_recorded)
        # Tool output over this many UTF-16 units is archived and bounded; <= 0: no cap.
        self.max_output_chars = max_output_chars
        settings = {
            "PENTRACE_DATA_ROOT": str(self.root.path),
            "PENTRACE_PROJECT": project,
            "PENTRACE_AGENT": agent,
            "PENTRACE_DURABILITY": durability.value,
        }
        if lock_wait is not None:
            settings["PENTRACE_LOCK_WAIT"] = str(lock_wait)
        super().__init__({**settings, **dict(env or {})})
        # Sessions go straight to the trace recorder unless another store, another
        # mapper or an aggregate cache is configured (those take the library's path).
        self._direct = (
            isinstance(self.recorder, TraceRecorder)
            and isinstance(self.mapper, TraceMapper)
            and self.repository.cache is None
        )

    # -------------------------------------------------------- eventsourcing hooks

    def construct_factory(self, env: Environment) -> Factory:
        """The trace persistence module, with this application's clock."""
        return Factory(env, clock=self.clock)

    def construct_repository(self) -> Repository[str]:
        """A repository with the plain projector."""
        return SessionRepository(self.events)

    @property
    def trace_recorder(self) -> TraceRecorder:
        """The recorder writing this application's traces."""
        assert isinstance(self.recorder, TraceRecorder)
        return self.recorder

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[str]]:
        """Save sessions (and anything else ``Application.save`` takes).

        Same steps as ``Application.save``, minus what cannot apply to traces:
        Session aggregates are collected without the library's runtime
        Protocol ``isinstance`` checks (they cost more than writing a
        request's records), and the common case (one session on the trace
        store, no cache) hands the events' lines straight to the recorder, as
        one batch, without building StoredEvents.  Traces have no
        notification ids, so the list of recordings is always empty.
        """
        if len(objs) == 1 and not kwargs and type(objs[0]) is Session and self._direct:
            session = objs[0]
            events = session.collect_events()
            if events:
                rotations = [n for n, event in enumerate(events) if type(event) is _SHARD_OPENED]
                self.trace_recorder.insert_lines(
                    session.id,
                    events[0].originator_version,
                    [event.line for event in events],
                    rotations,
                )
                if self.on_recorded is not None:
                    self._tell_hook(events)
                if session.rotation_pending:
                    checkpoint_ahead(self.root, self.project, self.agent, session)
            return []
        processing_event: ProcessingEvent[str] = ProcessingEvent()
        others = []
        for obj in objs:
            if type(obj) is Session:
                processing_event.events.extend(obj.collect_events())
                processing_event.aggregates[obj.id] = obj
            else:
                others.append(obj)
        processing_event.collect_events(*others, **kwargs)
        recordings = self._record(processing_event)
        for aggregate in processing_event.aggregates.values():
            if type(aggregate) is Session and aggregate.rotation_pending:
                checkpoint_ahead(self.root, self.project, self.agent, aggregate)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        return recordings

    def _record(self, processing_event: ProcessingEvent[str]) -> list[Recording[str]]:
        recordings = super()._record(processing_event)
        self._tell_hook(processing_event.events)
        return recordings

    def _tell_hook(self, events: Sequence[Any]) -> None:
        """Give ``on_recorded`` what was written; its failures are logged, never raised."""
        hook = self.on_recorded
        if hook is None:
            return
        written: dict[str, list[tuple[int, TraceRecord]]] = {}
        for event in events:
            written.setdefault(event.originator_id, []).append(
                (event.originator_version, event.header())
            )
        for session_id, lines in written.items():
            try:
                hook(session_id, lines)
            except Exception as exc:  # noqa: BLE001  # best-effort by contract: never fail a save
                logger.warning(
                    "on_recorded hook failed for session %s positions %d-%d: %s "
                    "(the trace write succeeded; run `pentrace ledger sync` to catch up)",
                    session_id,
                    lines[0][0],
                    lines[-1][0],
                    type(exc).__name__,
                )

    def release(self, session_id: str) -> None:
        """Close a session's trace writer and release its lock."""
        self.trace_recorder.release(session_id)


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


@dataclass(frozen=True, slots=True)
class LatestMeta:
    """The runtime configuration a session resumes with, and where it was read."""

    session_id: str
    provider: str
    model_id: str
    model_context_window: Any
    workspace: str
    trace_path: Path
    line: int


def _text_field(payload: dict[str, Any], key: str, where: str, hint: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        found = "nothing" if value is None else f"a {type(value).__name__}"
        raise ResumeError(
            f"{where}: expected session_meta.{key} to name the {key.replace('_', ' ')}, "
            f"found {found}",
            hint=hint,
        )
    return value


def read_latest_meta(
    root: DataRoot,
    project: str,
    agent: str,
    session_id: str,
    model_available: Callable[[str, str], bool] | None = None,
) -> LatestMeta:
    """The session_meta of a session's highest-index shard, checked as resume needs it."""
    latest = root.latest_shard(project, agent, session_id)
    if latest is None:
        raise NotFoundError(
            f"session {session_id} has no trace under {root.traces_dir(project, agent)}",
            hint="check the session id, project and agent",
        )
    path = latest.path.absolute()
    record = next((r for r in read_shard(path) if r.kind == "session_meta"), None)
    if record is None:
        raise ResumeError(
            f"{path}: expected a session_meta record in the latest shard of session "
            f"{session_id}, found none",
            hint="the trace cannot say which model and workspace to use; "
            "start a new session that points at it (switch_model)",
        )
    where = f"{path}:{record.line}"
    payload = record.payload()
    fix = "the trace is damaged; start a new session instead"
    provider = _text_field(payload, "provider", where, fix)
    model_id = _text_field(payload, "model_id", where, fix)
    workspace = _text_field(payload, "workspace", where, fix)
    if not Path(workspace).is_dir():
        raise ResumeError(
            f"{where}: session {session_id} works in {workspace}, which no longer exists",
            hint="restore the workspace folder, or continue in a new session with switch_model",
        )
    if model_available is not None and not model_available(provider, model_id):
        raise ResumeError(
            f"{where}: session {session_id} uses model {provider}/{model_id}, "
            "which is no longer configured",
            hint="configure the model again, or continue with another one via switch_model",
        )
    return LatestMeta(
        session_id=session_id,
        provider=provider,
        model_id=model_id,
        model_context_window=payload.get("model_context_window"),
        workspace=workspace,
        trace_path=path,
        line=record.line,
    )


def switch_block(source: LatestMeta) -> str:
    """The ``[model_switch_from]`` block that opens a model-switched session's first input."""
    return (
        "[model_switch_from]\n"
        f"session_id: {source.session_id}\n"
        f"trace: {source.trace_path}\n"
        f"workspace: {source.workspace}\n"
        f"previous_model: {source.provider}/{source.model_id}\n"
        "[/model_switch_from]\n\n"
    )
