"""Where a session's spans hang: under its parent for a subagent, linked to its source for a
model switch (ADR 0097).

A subagent session's trace names no parent: the parent's trace holds one
``subagent`` pointer with the child's id.  The parent is looked for in the
child's project (the child may run under another agent), the child's own agent
first, then by name, so every exporter picks the same one; the pointer's
position in the parent's fold gives the spawning span.  A session that is not a
subagent, or whose pointer is nowhere (yet), is a root: its tasks are traces of
their own.  A model-switched session names its source in its first input; the
link goes to the source's last task begun before the switch.

What it reads is remembered per session with the shards' sizes, and read again
when they change.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.errors import PentraceError
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import ParentLink, SwitchResolver, TaskRef
from pentrace.infrastructure.storage.layout import DataRoot, ShardRef
from pentrace.infrastructure.trace.reader import read_session, read_shard

__all__ = ["Lineage", "session_records", "signature"]

Signature = tuple[tuple[str, int], ...]
_NOTHING: Final = sys.maxsize  # a fold floor that builds no span: only pointers and tasks
_RESCAN_S: Final = 5.0  # the least time between two reads of one project's pointers


def signature(shards: Iterable[ShardRef]) -> Signature:
    """The shards' paths and sizes: what changes when a session is written to."""
    sizes: list[tuple[str, int]] = []
    for shard in shards:
        try:
            sizes.append((str(shard.path), os.stat(shard.path).st_size))
        except FileNotFoundError:
            continue
    return tuple(sizes)


def session_records(shards: Iterable[ShardRef]) -> Iterator[tuple[int, TraceRecord]]:
    """A session's records with their positions (1-based, across its shards)."""
    return enumerate(read_session(shards), start=1)


@dataclass(frozen=True, slots=True)
class _Facts:
    signature: Signature
    spawns: dict[tuple[str, int], ParentLink]
    tasks: tuple[TaskRef, ...]


class Lineage:
    """Parents of subagent sessions and sources of model switches in one data root."""

    def __init__(self, root: DataRoot) -> None:
        self.root = root
        self._facts: dict[SessionKey, _Facts] = {}
        self._pointers: dict[str, tuple[Signature, dict[str, list[tuple[SessionKey, int]]]]] = {}
        self._parents: dict[SessionKey, ParentLink] = {}
        # Pointers the folds met, by (project, child id): found without reading a project.
        self._spawned: dict[tuple[str, str], dict[tuple[SessionKey, int], ParentLink]] = {}
        self._scanned: dict[str, float] = {}  # when each project's pointers were last read
        self._resolving: set[SessionKey] = set()
        self._cycles: set[SessionKey] = set()

    def is_subagent(self, shards: tuple[ShardRef, ...]) -> bool:
        """True when the session's first record says ``source: subagent``."""
        if not shards:
            return False
        try:
            first = next(iter(read_shard(shards[0].path)), None)
        except PentraceError:
            return False
        if first is None or first.kind != "session_meta":
            return False
        return first.payload().get("source") == "subagent"

    def remember(self, key: SessionKey, shards: tuple[ShardRef, ...], fold: SessionFold) -> None:
        """Keep what a fold over the whole session found (its pointers and tasks)."""
        spawns = {(spawn.child_id, spawn.position): spawn.link for spawn in fold.spawns}
        self._facts[key] = _Facts(signature(shards), spawns, tuple(fold.tasks))
        for (child, position), link in spawns.items():
            self._spawned.setdefault((key.project, child), {})[(key, position)] = link

    def parent_of(self, key: SessionKey) -> ParentLink | None:
        """The span a subagent session hangs under, or None (not found, or a pointer cycle)."""
        known = self._parents.get(key)
        if known is not None:
            return known
        if key in self._resolving:
            self._cycles.add(key)  # its parent chain comes back to it: it is the root
            return None
        self._resolving.add(key)
        try:
            found = self._find_parent(key)
        finally:
            self._resolving.discard(key)
        if key in self._cycles:
            self._cycles.discard(key)
            return None
        if found is not None:
            self._parents[key] = found
        return found

    def switch_resolver(self, key: SessionKey) -> SwitchResolver:
        """For :class:`SessionFold`: the source task of a model switch out of ``key``'s agent."""

        def resolve(source_id: str, at_ns: int) -> TaskRef | None:
            facts = self._facts_of(SessionKey(key.project, key.agent, source_id))
            if facts is None:
                return None
            before = [task for task in facts.tasks if task.start_ns <= at_ns]
            return before[-1] if before else None

        return resolve

    # -- reading -----------------------------------------------------------------------
    def _shards(self, key: SessionKey) -> list[ShardRef]:
        try:
            return self.root.find_shards(*key)
        except PentraceError:
            return []  # a name no session can have (it came from a trace)

    def _facts_of(self, key: SessionKey) -> _Facts | None:
        shards = self._shards(key)
        if not shards:
            return None
        now = signature(shards)
        known = self._facts.get(key)
        if known is not None and known.signature == now:
            return known
        parent = self.parent_of(key) if self.is_subagent(tuple(shards)) else None
        fold = SessionFold(key, parent=parent, floor=_NOTHING)
        try:
            for position, record in session_records(shards):
                fold.feed(position, record)
        except PentraceError:
            return None
        self.remember(key, tuple(shards), fold)
        return self._facts[key]

    def _find_parent(self, key: SessionKey) -> ParentLink | None:
        def order(pointer: tuple[SessionKey, int]) -> tuple[bool, str, str, int]:
            parent, position = pointer  # the child's own agent first, then by name
            return parent.agent != key.agent, parent.agent, parent.session_id, position

        met = self._spawned.get((key.project, key.session_id), {})
        known = sorted((pointer for pointer in met if pointer[0] != key), key=order)
        if known:
            return met[known[0]]
        candidates = sorted((p for p in self._pointers_to(key) if p[0] != key), key=order)
        for parent, position in candidates:
            facts = self._facts_of(parent)
            link = None if facts is None else facts.spawns.get((key.session_id, position))
            if link is not None:
                return link
        return None

    def _pointers_to(self, key: SessionKey) -> list[tuple[SessionKey, int]]:
        """The ``subagent`` pointers to ``key``'s id in its project (read again on a change)."""
        held = self._pointers.get(key.project)
        if held is not None and key.session_id in held[1]:
            return held[1][key.session_id]
        if time.monotonic() - self._scanned.get(key.project, -_RESCAN_S) < _RESCAN_S:
            return []  # read a moment ago: a project being written is not read on every pass
        self._scanned[key.project] = time.monotonic()
        try:
            refs = list(self.root.iter_sessions(key.project))
        except PentraceError:
            return []
        now = tuple(item for ref in refs for item in signature(ref.shards))
        if held is None or held[0] != now:
            index: dict[str, list[tuple[SessionKey, int]]] = {}
            for ref in refs:
                try:
                    for position, record in session_records(ref.shards):
                        if record.kind == "event_msg" and record.ptype == "subagent":
                            child = record.payload().get("session_id")
                            if isinstance(child, str):
                                index.setdefault(child, []).append((ref.key, position))
                except PentraceError:
                    continue  # an unreadable session points nowhere
            held = self._pointers[key.project] = (now, index)
        return held[1].get(key.session_id, [])
