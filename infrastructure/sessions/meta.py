"""Reading a session's runtime configuration from its latest shard, for resume and /model.

PenguinHarness reads ``session_meta`` from the highest-index shard (a rotated
shard starts with a copy), and refuses to resume when it is missing, names no
provider or model, or when the workspace or the model is gone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pentrace.errors import NotFoundError, ResumeError
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.reader import read_shard

__all__ = ["LatestMeta", "read_latest_meta", "switch_block"]


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
