"""Shard checkpoints: the Session state at the start of its newest shard (derived data).

A checkpoint lives at ``<agent>/traces/.checkpoints/<session_id>_<NNN>.json``
(a name the shard scanner never takes: it is not in a date folder and does not
end in ``.jsonl``).  It holds the number of records in the shards before shard
``NNN``, each older shard's name and size, and the aggregate's small state
after the last of those records.  A rebuild then folds shard ``NNN`` alone,
starting at position ``before + 1``, so positions stay exact.

A checkpoint is never trusted blindly: :func:`load_checkpoint` returns
``None`` (the caller reads every shard) when it is missing, unreadable,
for another shard, or when any older shard's name or size changed.  Deleting
``.checkpoints/`` is always safe: the next full rebuild writes it again.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Final

import msgspec

from pentrace.domain.json_codec import JsonDecoder, JsonEncoder
from pentrace.domain.session.aggregate import Session
from pentrace.errors import PentraceError
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.layout import DataRoot, ShardRef
from pentrace.infrastructure.storage.modes import make_private_dirs

__all__ = [
    "Checkpoint",
    "checkpoint_path",
    "load_checkpoint",
    "restore_session",
    "write_checkpoint",
]

logger = logging.getLogger(__name__)

# The Session attributes a checkpoint holds unchanged, under the same name.
_AS_IS: Final = (
    "started",
    "deleted",
    "shard_index",
    "requests",
    "turns",
    "open_request",
    "compaction",
    "rotation_pending",
    "meta_payload",
    "tools_payload",
)


# Every attribute a Session holds; a checkpoint of anything else is refused.
_FIELDS: Final = frozenset(
    {
        "_id",
        "_version",
        "_created_on",
        "_modified_on",
        "_pending_events",
        "open_calls",
        "unanswered",
        "answered_recent",
        *_AS_IS,
    }
)


def _session_fields() -> frozenset[str]:
    blank = object.__new__(Session)
    Session.__init__(blank)
    return frozenset(vars(blank))


# A Session that gained an attribute the checkpoint does not carry: never use one.
_KNOWN: Final = _session_fields() <= _FIELDS


class _State(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    created_on: datetime
    modified_on: datetime
    started: bool
    deleted: bool
    shard_index: int
    requests: int
    turns: int
    open_request: bool
    open_calls: dict[str, bool]
    unanswered: list[str]
    answered_recent: list[str]
    compaction: tuple[str, str] | None
    rotation_pending: bool
    meta_payload: bytes
    tools_payload: bytes | None


class Checkpoint(msgspec.Struct, forbid_unknown_fields=True):
    """Where shard ``index`` starts: records before it, older shard sizes, state there."""

    session_id: str
    index: int
    before: int
    older: list[tuple[str, int]]
    state: _State


_decoder: Final = JsonDecoder(Checkpoint)
_encoder: Final = JsonEncoder()


def checkpoint_path(root: DataRoot, project: str, agent: str, session_id: str, index: int) -> Path:
    """``<agent>/traces/.checkpoints/<session_id>_<NNN>.json``."""
    return root.traces_dir(project, agent) / ".checkpoints" / f"{session_id}_{index:03d}.json"


def _older(shards: list[ShardRef]) -> list[tuple[str, int]] | None:
    sizes = []
    for shard in shards:
        try:
            sizes.append((shard.path.name, shard.path.stat().st_size))
        except OSError:
            return None
    return sizes


def load_checkpoint(
    root: DataRoot, project: str, agent: str, session_id: str, shards: list[ShardRef]
) -> Checkpoint | None:
    """The valid checkpoint for the newest of ``shards``, or ``None`` (read them all then)."""
    if len(shards) < 2 or not _KNOWN:
        return None
    newest = shards[-1]
    path = checkpoint_path(root, project, agent, session_id, newest.index)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        checkpoint = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if checkpoint.session_id != session_id or checkpoint.index != newest.index:
        return None
    if checkpoint.before < 1 or checkpoint.state.version != checkpoint.before:
        return None
    if _older(shards[:-1]) != [tuple(pair) for pair in checkpoint.older]:
        return None
    return checkpoint


def write_checkpoint(
    root: DataRoot,
    project: str,
    agent: str,
    session: Session,
    older_shards: list[ShardRef],
    index: int,
) -> bool:
    """Record ``session`` (its state after the last record of ``older_shards``) for shard ``index``.

    Best-effort, as derived data: a failed write is logged and the next full
    rebuild tries again.  Returns whether a checkpoint was written.
    """
    fields = vars(session)
    older = _older(older_shards)
    if not older or set(fields) != _FIELDS or session._pending_events:
        return False
    state = _State(
        version=session.version,
        created_on=session.created_on,
        modified_on=session.modified_on,
        open_calls=dict(session.open_calls),
        unanswered=list(session.unanswered),
        answered_recent=sorted(session.answered_recent),
        **{name: getattr(session, name) for name in _AS_IS},
    )
    checkpoint = Checkpoint(session.id, index, session.version, older, state)
    path = checkpoint_path(root, project, agent, session.id, index)
    try:
        make_private_dirs(path.parent, within=root.path)
        publish_file(path, [_encoder.encode(checkpoint)], overwrite=True)
    except (OSError, PentraceError) as exc:
        logger.warning(
            "cannot write checkpoint %s (%s); resume reads every shard until it can",
            path,
            type(exc).__name__,
        )
        return False
    return True


def checkpoint_ahead(root: DataRoot, project: str, agent: str, session: Session) -> bool:
    """After a save that leaves a rotation pending, checkpoint the shard about to open.

    The saved state is exactly the state at the end of the current shard,
    and that shard takes no more records, so the next shard's rebuild can
    start here.  Best-effort like :func:`write_checkpoint`.
    """
    try:
        shards = root.find_shards(project, agent, session.id)
    except PentraceError as exc:
        logger.warning("cannot list the shards of %s (%s)", session.id, type(exc).__name__)
        return False
    if not shards or shards[-1].index != session.shard_index:
        return False
    return write_checkpoint(root, project, agent, session, shards, session.shard_index + 1)


def restore_session(checkpoint: Checkpoint) -> Session:
    """A Session in the state the checkpoint recorded, with no pending events."""
    state = checkpoint.state
    session = object.__new__(Session)
    session._id = checkpoint.session_id
    session._version = state.version
    session._created_on = state.created_on
    session._modified_on = state.modified_on
    session._pending_events = []
    session.open_calls = dict(state.open_calls)
    session.unanswered = dict.fromkeys(state.unanswered)
    session.answered_recent = set(state.answered_recent)
    for name in _AS_IS:
        setattr(session, name, getattr(state, name))
    return session
