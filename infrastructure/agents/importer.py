"""Importing other agents' stores into a data root: discovery, the pass, the trace sink.

One pass (:func:`import_agent`) reads every source of one agent from its
cursor and writes the records its mapper makes into the data root, batch by
batch: the records are appended and fsynced, then the state (cursor, mapper
state, usage keys, session marks) commits (ADR 0096). Small sources share a
batch, each behind a savepoint of the state, and a batch's sessions are
written by several threads (ADR 0106).  A second pass adds
only what is new; a line appended to a session already imported continues
that session.

After a crash the trace may hold a batch the state never committed.  The
sink then compares the records the pass makes again with what the trace
holds past the session's mark, skips those that are there (the same bytes),
and writes the rest; records that differ stop that source with a warning
(the trace is the truth, and is never rewritten).

Discovery never writes or locks anything in the agents' stores: files are
opened read-only, folders are walked without following a symlink into a
folder already seen (a loop is reported once), unreadable files and folders
are reported and skipped.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Final, Protocol

from pentrace.errors import AgentSourceError, PentraceError, UsageError
from pentrace.infrastructure.agents.core import (
    AGENTS,
    ImportReport,
    Mapper,
    Out,
)
from pentrace.infrastructure.agents.reading import (
    MALFORMED,
    Item,
    file_identity,
    line_items,
)
from pentrace.infrastructure.agents.state import Cursor, SessionMark, State, open_state
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.writer import open_session_writer

__all__ = ["AgentFeed", "ImportReport", "import_agent", "parse_agents"]

_BATCH_ITEMS: Final = 2000
_BATCH_BYTES: Final = 8 * 1024 * 1024
_RECENT_LINKS: Final = 4096
_WRITERS: Final = 8


class Source(Protocol):
    """One thing an agent's store holds that pentrace reads on from a cursor: a file, or
    one session of a database."""

    key: str  # the state's name for it
    path: Path  # what records name as their source
    detail: Any  # what the mapper needs to know of it beyond its items (or None)

    def start(self, state: State, report: ImportReport) -> tuple[Cursor, bytes | None] | None:
        """The cursor and mapper state to go on from, or None when there is nothing new."""
        ...

    def items(self, cursor: Cursor) -> Iterator[tuple[Item, Cursor]]:
        """The items after ``cursor``, each with the cursor after it."""
        ...

    def close(self) -> None:
        """Let go of what reading it opened (a database connection)."""
        ...


@dataclass(frozen=True)
class AgentReader:
    """How pentrace finds and maps one agent's store."""

    name: str
    roots: Callable[[], list[Path]]
    sources: Callable[[Sequence[Path], ImportReport], list[Source]]
    mapper: Callable[[Source, State, Any, bytes | None, str | None], Mapper]


class _Links:
    """A mapper's named values for one source, kept in the state store; the ones written
    last are also kept in memory (a row's parent is nearly always a row just before)."""

    def __init__(self, state: State, agent: str, source: str) -> None:
        self._state, self._agent, self._source = state, agent, source
        self._recent: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        found = self._recent.get(name)
        if found is None:
            found = self._state.link(self._agent, self._source, name)
        return found

    def elsewhere(self, source: str, name: str) -> str | None:
        """A name another source of the same agent keeps (a subagent file's parent file):
        its target, ``""`` when that source was never read, None when it lacks the name."""
        if self._state.cursor(self._agent, source) is None:
            return ""
        found: str | None = self._state.link(self._agent, source, name)
        return found

    def put(self, name: str, target: str) -> None:
        self._state.set_link(self._agent, self._source, name, target)
        if len(self._recent) >= _RECENT_LINKS:
            self._recent.clear()  # bounded: older names are read from the store again
        self._recent[name] = target


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class _Gone(Exception):
    """A session this state wrote is no longer in the data root as it was left."""


class Sink:
    """Writes a batch's records into the data root, skipping what a crash left there already."""

    def __init__(self, root: DataRoot, state: State, agent: str, report: ImportReport) -> None:
        self.root, self.state, self.agent, self.report = root, state, agent, report
        self._ahead: dict[tuple[str, str], Iterator[bytes]] = {}
        self._marks: dict[tuple[str, str], SessionMark] = {}
        self._gone: set[tuple[str, str]] = set()
        self._projects: set[str] = set()

    def write(self, outs: Sequence[Out]) -> dict[tuple[str, str], SessionMark]:
        """Write ``outs``; return the new marks of the sessions written (commit them after).
        Several threads write sessions at once (own locks and files; their fsyncs overlap)."""
        groups: dict[tuple[str, str], list[Out]] = {}
        for out in outs:
            groups.setdefault((out.project, out.session), []).append(out)
        keys = [key for key in groups if key not in self._gone]
        marks = {key: self._mark(key) for key in keys}  # the state is read in this thread
        for project in {project for project, _ in keys} - self._projects:
            self.root.ensure_project_config(project)
            self._projects.add(project)

        def one(key: tuple[str, str]) -> tuple[SessionMark, int, bool] | Exception:
            try:
                return self._session(key, groups[key], marks[key])
            except (_Gone, *_FAILURES) as exc:
                return exc

        if len(keys) > 1:
            with ThreadPoolExecutor(min(_WRITERS, len(keys))) as pool:
                done = list(pool.map(one, keys))
        else:
            done = [one(key) for key in keys]
        written: dict[tuple[str, str], SessionMark] = {}
        failed: Exception | None = None
        for key, result in zip(keys, done, strict=True):
            if isinstance(result, _Gone):
                self._gone.add(key)
                self.report.warn(f"gone:{key}", str(result))
                continue
            if isinstance(result, Exception):
                failed = failed or result
                continue
            mark, records, new = result
            written[key] = self._marks[key] = mark
            reference = f"{key[0]}/{self.agent}/{key[1]}"
            self.report.sessions.add(reference)
            self.report.records += records
            if new:
                self.report.new_sessions.add(reference)
        if failed is not None:
            raise failed  # what the others wrote is counted, and found in place next time
        return written

    def _mark(self, key: tuple[str, str]) -> SessionMark | None:
        held = self._marks.get(key)
        if held is not None:
            return held
        return self.state.session_mark(key[0], self.agent, key[1])

    def _session(
        self, key: tuple[str, str], outs: list[Out], mark: SessionMark | None
    ) -> tuple[SessionMark, int, bool]:
        """Write one session's part of a batch (in a worker thread): its new mark, the
        records written, and whether the session is new."""
        project, sid = key
        ahead = self._ahead.get(key)
        if ahead is None:
            ahead = self._ahead[key] = self._records_past(project, sid, mark)
        records = mark.records if mark is not None else 0
        pending: list[Out] = []
        for out in outs:
            records += 1
            if not pending:
                held = next(ahead, None)
                if held is not None:
                    if held != out.record:
                        raise AgentSourceError(
                            f"the trace of {project}/{self.agent}/{sid} holds other records "
                            f"than its source maps to at position {records}; the source is "
                            "left alone",
                            hint="the session was written by something else after its import; "
                            "fork it with `pentrace fork` before writing to it",
                        )
                    continue
            pending.append(out)
        if pending:
            return self._append(project, sid, pending, records)
        latest = self.root.latest_shard(project, self.agent, sid)
        shard, size = (latest.index, latest.path.stat().st_size) if latest else (0, 0)
        return SessionMark(records, shard, size), 0, False

    def _records_past(self, project: str, sid: str, mark: SessionMark | None) -> Iterator[bytes]:
        shards = self.root.find_shards(project, self.agent, sid)
        where = f"{project}/{self.agent}/{sid}"
        if not shards:
            if mark is not None and mark.records > 0:
                raise _Gone(
                    f"{where} was deleted from the data root after it was imported; "
                    "new records of its source are not written"
                )
            return iter(())
        latest = shards[-1]
        size = latest.path.stat().st_size
        if mark is not None:
            if (latest.index, size) == (mark.shard, mark.size):
                return iter(())
            if latest.index < mark.shard or (latest.index == mark.shard and size < mark.size):
                raise _Gone(
                    f"{where} was truncated in the data root after it was imported; "
                    "new records of its source are not written"
                )
        start_shard, start_at = (mark.shard, mark.size) if mark is not None else (1, 0)

        def records() -> Iterator[bytes]:
            for shard in shards:
                if shard.index < start_shard:
                    continue
                offset = start_at if shard.index == start_shard else 0
                for item in line_items(shard.path, offset, 0):
                    if item.value is not MALFORMED:  # a healed torn fragment takes no place
                        yield item.raw

        return records()

    def _append(
        self, project: str, sid: str, outs: list[Out], records: int
    ) -> tuple[SessionMark, int, bool]:
        day = [date.fromisoformat(outs[0].day)]
        new = self.root.latest_shard(project, self.agent, sid) is None
        writer = open_session_writer(
            self.root, project, self.agent, sid, wait=10.0, today=lambda: day[0]
        )
        try:
            run: list[bytes] = []
            for out in outs:
                if out.rotate:
                    if run:
                        writer.append_many(run, sync=False)
                        run = []
                    day[0] = date.fromisoformat(out.day)
                    writer.rotate([out.record])
                else:
                    run.append(out.record)
            if run:
                writer.append_many(run, sync=False)
            writer.sync()
            mark = SessionMark(records, writer.index, writer.size)
        finally:
            writer.close()
        return mark, len(outs), new


class FileSource:
    """A JSONL file of an agent's store, read from a byte offset (Claude Code, Codex)."""

    def __init__(self, agent: str, path: Path) -> None:
        self.agent, self.path, self.key = agent, path, str(path)
        self.detail: Any = None
        self._identity = (0, 0)

    def start(self, state: State, report: ImportReport) -> tuple[Cursor, bytes | None] | None:
        """Where this pass starts (the saved cursor, or the start of a replaced file), or
        None when there is nothing new."""
        key = self.key
        try:
            dev, ino, size = file_identity(self.path)
            if not _regular(self.path):
                report.warn(f"kind:{key}", f"{key} is not a regular file; skipped")
                return None
        except OSError as exc:
            report.warn(f"stat:{key}", f"cannot read {key}: {exc.strerror or exc}; skipped")
            return None
        self._identity = (dev, ino)
        saved = state.cursor(self.agent, key)
        if saved is None and (moved := state.moved_source(self.agent, dev, ino, key)):
            report.warn(f"moved:{key}", f"{key} is {moved} moved; read on from where that stopped")
            saved = state.cursor(self.agent, key)
        if saved is None:
            return Cursor(dev, ino), None
        cursor, blob = saved
        if (cursor.dev, cursor.ino) != (dev, ino) or size < cursor.position:
            said = f"{key} was replaced or truncated since it was read; read again from its "
            report.warn(f"replaced:{key}", said + "start (records already imported are kept)")
            return Cursor(dev, ino), None
        if cursor.position == size:
            return None
        return cursor, blob

    def items(self, cursor: Cursor) -> Iterator[tuple[Item, Cursor]]:
        """The new lines, each with the cursor just after it."""
        dev, ino = self._identity
        for item in line_items(self.path, cursor.position, cursor.line):
            yield item, Cursor(dev, ino, item.next or item.end, int(item.at))

    def close(self) -> None:
        return None


class _Batch:
    """Records and cursors of one or more sources, written and committed together: the
    traces first (fsynced), then the state in one transaction (ADR 0096, ADR 0106).

    Small sources share a batch, so a store of a thousand files is not a thousand
    commits; each source's changes to the state since its start are a savepoint, so a
    source that fails is forgotten alone."""

    def __init__(self, root: DataRoot, state: State, agent: str, report: ImportReport) -> None:
        self.root, self.state, self.agent, self.report = root, state, agent, report
        self.sink = Sink(root, state, agent, report)
        self.outs: list[Out] = []
        self.cursors: dict[str, tuple[Cursor, bytes]] = {}
        self.items = self.weight = 0

    def full(self) -> bool:
        return self.items >= _BATCH_ITEMS or self.weight >= _BATCH_BYTES

    def add(self, key: str, mapper: Mapper, cursor: Cursor) -> None:
        """Take what ``mapper`` made since the last call, and where its source got to."""
        self.outs.extend(mapper.take())
        self.cursors[key] = (cursor, mapper.encoded_state())

    def flush(self) -> None:
        """Write the records, then commit the state (a failure raises; nothing commits)."""
        state = self.state
        if not self.cursors and not self.outs:
            state.commit()  # what the sources' starts changed (a moved file's cursor)
            return
        try:
            marks = self.sink.write(self.outs)
            for (project, sid), mark in marks.items():
                state.set_session_mark(project, self.agent, sid, mark)
            for key, (cursor, blob) in self.cursors.items():
                state.save_cursor(self.agent, key, cursor, blob)
            state.commit()
        except BaseException:
            state.rollback()
            self.sink = Sink(self.root, state, self.agent, self.report)  # its marks are stale
            raise
        finally:
            self.outs, self.cursors = [], {}
            self.items = self.weight = 0


def _failure(exc: BaseException) -> str:
    if isinstance(exc, PentraceError):
        return exc.message
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


_FAILURES: Final = (PentraceError, OSError, sqlite3.Error)


class _SharedFlushFailed(Exception):  # writing a batch of several sources failed
    pass


def _read_source(
    batch: _Batch, reader: AgentReader, source: Source, project: str | None, *, alone: bool
) -> None:
    """Map what is new in one source into ``batch``, flushing it whenever it is full
    (``alone``: flush at the end too, and let a failure stop only this source)."""
    state, report = batch.state, batch.report
    agent, key = reader.name, source.key
    state.mark()
    try:
        started = source.start(state, report)
        if started is None:
            return
        cursor, blob = started
        mapper = reader.mapper(source, state, _Links(state, agent, key), blob, project)
        mapper.report = report
        report.files += 1
        for item, after in source.items(cursor):
            mapper.feed(item)
            cursor = after
            batch.items += 1
            batch.weight += len(item.raw)
            report.items += 1
            if batch.full():
                batch.add(key, mapper, cursor)
                if alone:
                    batch.flush()
                else:
                    try:
                        batch.flush()
                    except _FAILURES as exc:
                        raise _SharedFlushFailed from exc  # each source again, alone
                state.mark()
        batch.add(key, mapper, cursor)
        if alone:
            batch.flush()
        if waiting := mapper.waiting():
            report.warn(f"wait:{key}", f"{key}: {waiting} item(s) wait (a session starts at its "
                        "first timestamped line; a message is read once complete)")  # fmt: skip
    except _FAILURES as exc:
        try:
            if alone:
                raise
            state.back()  # the others in the batch go on; this one's records were not taken
        except _FAILURES:
            state.rollback()
            batch.outs, batch.cursors = [], {}
            batch.items = batch.weight = 0
        report.warn(f"fail:{key}", f"{key}: {_failure(exc)}; this source stops here for now")


def _reader(agent: str) -> AgentReader:
    if agent not in AGENTS:
        raise UsageError(
            f"unknown agent {agent!r}: expected one of {', '.join(AGENTS)}",
            hint="pentrace import --from claude-code",
        )
    from pentrace.infrastructure.agents import claude, codex, gemini, opencode

    def files(
        name: str, find: Callable[[Path, ImportReport], Iterator[Path]]
    ) -> Callable[[Sequence[Path], ImportReport], list[Source]]:
        def sources(paths: Sequence[Path], report: ImportReport) -> list[Source]:
            return [FileSource(name, path) for path in source_files(find, paths, report)]

        return sources

    def chats(paths: Sequence[Path], report: ImportReport) -> list[Source]:
        found = source_files(gemini.gemini_files, paths, report)
        return [
            FileSource("gemini", path) if path.suffix == ".jsonl" else gemini.GeminiJson(path)
            for path in found
        ]

    readers = {
        "claude-code": AgentReader(
            "claude-code",
            claude.claude_roots,
            files("claude-code", claude.claude_files),
            lambda source, state, links, blob, project: claude.ClaudeMapper(
                source.path, state, links, blob, project=project
            ),
        ),
        "codex": AgentReader(
            "codex",
            codex.codex_roots,
            files("codex", codex.codex_files),
            lambda source, state, links, blob, project: codex.CodexMapper(
                source.path, state, blob, project=project
            ),
        ),
        "opencode": AgentReader(
            "opencode",
            opencode.opencode_roots,
            opencode.opencode_sources,
            lambda source, state, links, blob, project: opencode.OpenCodeMapper(
                source, state, blob, project=project
            ),
        ),
        "gemini": AgentReader(
            "gemini",
            gemini.gemini_roots,
            chats,
            lambda source, state, links, blob, project: gemini.GeminiMapper(
                source, state, blob, project=project
            ),
        ),
    }
    found = readers.get(agent)
    if found is None:
        raise UsageError(
            f"reading {agent} stores is not available in this version",
            hint="pentrace import --from claude-code",
        )
    return found


def source_files(
    find: Callable[[Path, ImportReport], Iterator[Path]],
    paths: Sequence[Path],
    report: ImportReport,
) -> list[Path]:
    """The source files of ``paths`` (files as given, folders walked), in path order."""
    files: list[Path] = []
    for given in paths:
        path = Path(given).expanduser().absolute()
        if path.is_dir():
            files.extend(find(path, report))
        elif _regular(path):
            files.append(path)
        elif path.exists():
            report.warn(f"kind:{path}", f"{path} is not a regular file or folder; skipped")
        else:
            report.warn(f"missing:{path}", f"{path} does not exist; skipped")
    return sorted(set(files), key=str)


def import_agent(
    root: DataRoot,
    agent: str,
    paths: Sequence[Path] | None = None,
    *,
    project: str | None = None,
    state: State | None = None,
) -> ImportReport:
    """Import (or continue importing) ``agent``'s sessions into ``root``.

    ``paths`` are files or folders of the agent's store; None reads its default
    locations and environment variables.  ``project`` files every session under
    that project instead of the one its workspace names (ADR 0094).  Safe to
    run again at any time: only what is new is added.
    """
    reader = _reader(agent)
    report = ImportReport(agent)
    if paths is None:
        paths = [folder for folder in reader.roots() if folder.exists()]
    sources = reader.sources(paths, report)
    owned = state is None
    held = state if state is not None else open_state(root.path)
    try:
        batch = _Batch(root, held, agent, report)
        shared: list[Source] = []
        for source in sources:
            shared.append(source)
            try:
                _read_source(batch, reader, source, project, alone=False)
                if batch.full() or source is sources[-1]:
                    batch.flush()
                    shared = []
            except (_SharedFlushFailed, *_FAILURES):
                # Which source's records the traces refused, each alone tells: read them again
                # one by one from their committed cursors (what was written is there, skipped).
                for again in shared:
                    _read_source(batch, reader, again, project, alone=True)
                shared = []
    finally:
        for source in sources:
            source.close()
        if owned:
            held.close()
    return report


def parse_agents(text: str) -> list[str]:
    """``claude-code,codex`` (or ``all``) as agent names; an unknown name is a UsageError."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if names == ["all"]:
        return list(AGENTS)
    for name in names:
        _reader(name)
    return names


class AgentFeed:
    """Keeps other agents' stores imported while the ingest follower runs (issue #28).

    :meth:`import_all` reads every store of ``agents`` where the agent keeps it
    (the follower's first pass, its periodic rescan, and each poll);
    :meth:`import_changed` reads only the sources that filesystem notifications
    named. Both return the sessions they wrote, as ``(project, agent, session id)``,
    so the follower indexes them at once. Each warning is returned once per
    process (a message still being written is not said on every pass).
    """

    def __init__(self, root: DataRoot, agents: Sequence[str]) -> None:
        self.root = root
        self.readers = [_reader(agent) for agent in agents]
        self._said: set[str] = set()

    def watched(self) -> list[Path]:
        """The agents' folders that exist now (to watch for changes)."""
        found: list[Path] = []
        for reader in self.readers:
            found.extend(path.absolute() for path in reader.roots() if path.is_dir())
        return sorted(set(found))

    def _pass(self, reader: AgentReader, paths: Sequence[Path]) -> tuple[set[Key], list[str]]:
        report = import_agent(self.root, reader.name, paths)
        fresh = [warning for warning in report.warnings if warning not in self._said]
        self._said.update(fresh)
        written = {_key(reference) for reference in report.sessions}
        return written, fresh

    def import_all(self) -> tuple[set[Key], list[str]]:
        """Import what is new in every store; the sessions written and new warnings."""
        written: set[Key] = set()
        warnings: list[str] = []
        for reader in self.readers:
            roots = [path for path in reader.roots() if path.exists()]
            if roots:
                sessions, said = self._pass(reader, roots)
                written |= sessions
                warnings += said
        return written, warnings

    def import_changed(self, changed: Sequence[str]) -> tuple[set[Key], list[str]]:
        """Import the sources under the changed paths (OpenCode: its whole data folder)."""
        written: set[Key] = set()
        warnings: list[str] = []
        for reader in self.readers:
            roots = [path.absolute() for path in reader.roots()]
            mine = [Path(raw) for raw in changed if any(_under(raw, root) for root in roots)]
            if reader.name == "opencode":
                paths = [root for root in roots if root.exists()] if mine else []
            else:
                paths = [path for path in mine if path.suffix in (".jsonl", ".json")]
            if paths:
                sessions, said = self._pass(reader, sorted(set(paths)))
                written |= sessions
                warnings += said
        return written, warnings


Key = tuple[str, str, str]


def _key(reference: str) -> Key:
    project, agent, session = reference.split("/", 2)
    return project, agent, session


def _under(raw: str, root: Path) -> bool:
    return raw == str(root) or raw.startswith(f"{root}{os.sep}")
