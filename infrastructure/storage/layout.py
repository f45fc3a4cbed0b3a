"""The data layout: the one module that knows where every file of a data root lives.

``<root>/<project>/.project_config.toml`` and
``<root>/<project>/agents/<agent>/{agent_state,traces,scratchpad,shared_env,
workspaces,benchmarks,snapshots}/``, with trace shards at
``traces/<yyyy-mm-dd>/<sessionId>_<NNN>.jsonl``.  Every name that becomes part
of a path goes through :func:`validate_name` first, so nothing is written
outside the root.  Shard discovery scans *every* date folder: a rotated shard
may sit in a folder older than the first shard's (PenguinHarness PR #271).

The naming rules come first: which names may become path components, session
ids and shard file names.  Every project, agent, session id and workspace name
passes :func:`validate_name` before it is joined to a path, so no name can
climb out of the data root.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path, PureWindowsPath

from pentrace.domain.session.key import SessionKey
from pentrace.errors import InvalidNameError, TraceError, UsageError
from pentrace.infrastructure.storage.modes import make_private_dir, make_private_dirs, open_private

__all__ = [
    "MAX_NAME_BYTES",
    "SHARD_SUFFIX",
    "DataRoot",
    "SessionIdParts",
    "SessionRef",
    "ShardRef",
    "check_token",
    "is_session_id",
    "iter_sessions",
    "name_problem",
    "new_session_id",
    "parse_session_id",
    "parse_shard_name",
    "validate_name",
]

# A shard file name adds "_NNN.jsonl" to the session id, and NAME_MAX is 255 bytes.
MAX_NAME_BYTES = 200
SHARD_SUFFIX = ".jsonl"

_SESSION_ID = re.compile(r"session-(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-([0-9a-f]{8})")
_HEX8 = re.compile(r"[0-9a-f]{8}")
_NAME_HINT = (
    "use a plain name such as 'my-project' or 'agent_1': not '.' or '..', no '/', '\\', "
    f"NUL or control characters, at most {MAX_NAME_BYTES} bytes"
)


def _shown(value: str) -> str:
    return repr(value[:60]) + ("..." if len(value) > 60 else "")


def name_problem(value: str) -> str | None:
    """Why ``value`` is unsafe as one path component, or ``None`` when it is safe."""
    if not value:
        return "it is empty"
    if value in (".", ".."):
        return "it is a relative path component"
    if "/" in value or "\\" in value or (os.altsep is not None and os.altsep in value):
        return "it contains a path separator"
    if "\x00" in value:
        return "it contains a NUL character"
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        return "it contains a control character"
    if PureWindowsPath(value).drive:
        return "it names a drive"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a JSON escape or a non-UTF-8 file name) has no UTF-8
        # form, so PenguinHarness could not spell the path and no store could hold the name.
        return "it holds a lone surrogate, which has no UTF-8 form"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def validate_name(kind: str, value: str) -> str:
    """Return ``value`` if it is safe as one path component, else raise InvalidNameError.

    ``kind`` names what the value is ("project", "agent", "session id",
    "workspace") so the message says which argument was wrong.
    """
    problem = name_problem(value) if isinstance(value, str) else "it is not a string"
    if problem is not None:
        raise InvalidNameError(
            f"invalid {kind} name {_shown(str(value))}: {problem}", hint=_NAME_HINT
        )
    return value


@dataclass(frozen=True, slots=True)
class SessionIdParts:
    """The pieces of a native session id: creation time (as written) and its 8-hex token."""

    created: datetime
    token: str


def check_token(token: str) -> str:
    """Return ``token`` if it is 8 lowercase hex digits, else raise InvalidNameError."""
    if not _HEX8.fullmatch(token):
        raise InvalidNameError(
            f"invalid token {_shown(token)}: expected 8 lowercase hex digits",
            hint="omit the token to get a random one",
        )
    return token


def new_session_id(now: datetime, token: str | None = None) -> str:
    """A native id ``session-YYYY-MM-DD-HH-mm-ss-<8hex>`` for a session created at ``now``.

    ``now`` is formatted as given (PenguinHarness uses local wall-clock time);
    ``token`` defaults to 8 random hex digits.
    """
    hex8 = check_token(token) if token is not None else secrets.token_hex(4)
    return f"session-{now:%Y-%m-%d-%H-%M-%S}-{hex8}"


def parse_session_id(value: str) -> SessionIdParts:
    """Split a native session id into its parts; raise InvalidNameError for any other id."""
    match = _SESSION_ID.fullmatch(value)
    if match is not None:
        year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
        try:
            created = datetime(year, month, day, hour, minute, second)
        except ValueError:
            match = None
        else:
            return SessionIdParts(created, match.group(7))
    raise InvalidNameError(
        f"expected a session id like 'session-2026-07-18-11-10-22-3f8a1c2d', found {_shown(value)}",
        hint="imported sessions may keep other ids; check with is_session_id() first",
    )


def is_session_id(value: str) -> bool:
    """True when ``value`` is a native ``session-YYYY-MM-DD-HH-mm-ss-<8hex>`` id."""
    try:
        parse_session_id(value)
    except InvalidNameError:
        return False
    return True


def parse_shard_name(name: str) -> tuple[str, int] | None:
    """``(session_id, index)`` for a file named ``<sessionId>_<NNN>.jsonl``, else ``None``."""
    if not name.endswith(SHARD_SUFFIX):
        return None
    session_id, sep, digits = name[: -len(SHARD_SUFFIX)].rpartition("_")
    if not sep or not digits.isascii() or not digits.isdigit():
        return None
    index = int(digits)
    # Only the canonical spelling (%03d) counts, so each index has exactly one file name.
    if index < 1 or f"{index:03d}" != digits or name_problem(session_id) is not None:
        return None
    return session_id, index


PROJECT_CONFIG = ".project_config.toml"
# shared_env/ is a prompt convention in PenguinHarness; the code never creates it.
AGENT_SUBDIRS = ("agent_state", "traces", "scratchpad", "workspaces", "benchmarks", "snapshots")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _parse_day(name: str) -> date | None:
    if not _DAY.fullmatch(name):
        return None
    try:
        return date.fromisoformat(name)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class ShardRef:
    """One trace shard on disk: its path, its 1-based index and its date folder."""

    path: Path
    index: int
    day: date


@dataclass(frozen=True, slots=True)
class SessionRef:
    """One session found on disk, with its shards sorted by index."""

    project: str
    agent: str
    session_id: str
    shards: tuple[ShardRef, ...]

    @property
    def key(self) -> SessionKey:
        """The session's identity (project, agent, session id): what derived stores key by."""
        return SessionKey(self.project, self.agent, self.session_id)


def _scandir(path: Path | str) -> list[os.DirEntry[str]]:
    """The entries of a folder (none if it is missing); other OS errors become TraceError."""
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise TraceError(
            f"cannot list {path}: {exc.strerror or type(exc).__name__}",
            hint="check the folder's permissions",
        ) from exc


def _subdirs(path: Path) -> list[os.DirEntry[str]]:
    return sorted((e for e in _scandir(path) if e.is_dir()), key=lambda e: e.name)


def _scan_traces(traces: Path, only: str | None) -> dict[str, list[ShardRef]]:
    """Group every shard under ``traces/`` by session id: one scandir per date folder."""
    found: dict[str, list[ShardRef]] = {}
    for folder in _subdirs(traces):
        day = _parse_day(folder.name)
        if day is None:
            continue
        for entry in _scandir(folder.path):
            parsed = parse_shard_name(entry.name)
            if parsed is None or (only is not None and parsed[0] != only):
                continue
            if entry.is_file():
                ref = ShardRef(Path(entry.path), parsed[1], day)
                found.setdefault(parsed[0], []).append(ref)
    for shards in found.values():
        shards.sort(key=lambda s: (s.index, s.day))
    return found


@dataclass(frozen=True, slots=True)
class DataRoot:
    """A data root (``PENGUIN_HOME``) and every path inside it."""

    path: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DataRoot:
        """The root named by ``PENGUIN_HOME``, or ``~/.penguin/data`` when it is unset or empty."""
        env = os.environ if environ is None else environ
        configured = env.get("PENGUIN_HOME", "")
        path = Path(configured).expanduser() if configured else Path.home() / ".penguin" / "data"
        return cls(path.absolute())

    def project_dir(self, project: str) -> Path:
        """``<root>/<project>``."""
        return self.path / validate_name("project", project)

    def project_config_path(self, project: str) -> Path:
        """``<root>/<project>/.project_config.toml``."""
        return self.project_dir(project) / PROJECT_CONFIG

    def ensure_project_config(self, project: str) -> Path:
        """Create an empty project config with mode 0600 unless it exists; return its path."""
        path = self.project_config_path(project)
        make_private_dirs(path.parent)
        try:
            fd = open_private(path, os.O_WRONLY | os.O_EXCL)
        except FileExistsError:
            return path
        os.close(fd)
        return path

    def agent_dir(self, project: str, agent: str) -> Path:
        """``<root>/<project>/agents/<agent>``."""
        return self.project_dir(project) / "agents" / validate_name("agent", agent)

    def agent_state_dir(self, project: str, agent: str) -> Path:
        """``<agent>/agent_state``: config, memory, skills and tools of the agent."""
        return self.agent_dir(project, agent) / "agent_state"

    def traces_dir(self, project: str, agent: str) -> Path:
        """``<agent>/traces``: one folder per day holding the shards."""
        return self.agent_dir(project, agent) / "traces"

    def shard_path(self, project: str, agent: str, session_id: str, index: int, day: date) -> Path:
        """``traces/<yyyy-mm-dd>/<sessionId>_<NNN>.jsonl`` (``index`` >= 1, formatted %03d)."""
        if isinstance(index, bool) or not isinstance(index, int) or index < 1:
            raise UsageError(
                f"expected a shard index >= 1, found {index!r} for session {session_id!r}",
                hint="shards are numbered _001, _002, ...",
            )
        name = f"{validate_name('session id', session_id)}_{index:03d}{SHARD_SUFFIX}"
        return self.traces_dir(project, agent) / day.isoformat() / name

    def scratchpad_dir(self, project: str, agent: str, session_id: str) -> Path:
        """``<agent>/scratchpad/<sessionId>``: the session's temporary files."""
        sid = validate_name("session id", session_id)
        return self.agent_dir(project, agent) / "scratchpad" / sid

    def truncated_output_dir(self, project: str, agent: str, session_id: str) -> Path:
        """``scratchpad/<sessionId>/truncated-tool-output``: full text of truncated tool output."""
        return self.scratchpad_dir(project, agent, session_id) / "truncated-tool-output"

    def workspaces_dir(self, project: str, agent: str) -> Path:
        """``<agent>/workspaces``: temporary workspaces ``tmp-<8hex>``."""
        return self.agent_dir(project, agent) / "workspaces"

    def workspace_dir(self, project: str, agent: str, name: str) -> Path:
        """``<agent>/workspaces/<name>``."""
        return self.workspaces_dir(project, agent) / validate_name("workspace", name)

    def new_temp_workspace(self, project: str, agent: str, token: str | None = None) -> Path:
        """Create and return ``workspaces/tmp-<8hex>``; a given ``token`` must be unused."""
        for _ in range(16):
            hex8 = check_token(token) if token is not None else secrets.token_hex(4)
            path = self.workspace_dir(project, agent, f"tmp-{hex8}")
            make_private_dirs(path.parent)
            if not make_private_dir(path):
                if token is not None:
                    raise UsageError(
                        f"temporary workspace {path} already exists",
                        hint="omit the token to get a fresh random one",
                    )
                continue
            return path
        raise UsageError(  # pragma: no cover - 16 random collisions in a row
            f"could not find a free temporary workspace name under {path.parent}",
            hint="remove stale tmp-* folders under workspaces/",
        )

    def shared_env_dir(self, project: str, agent: str) -> Path:
        """``<agent>/shared_env``: shared interpreters and tool caches (created on demand)."""
        return self.agent_dir(project, agent) / "shared_env"

    def benchmarks_dir(self, project: str, agent: str) -> Path:
        """``<agent>/benchmarks``: capability benchmark cases and scores."""
        return self.agent_dir(project, agent) / "benchmarks"

    def snapshots_dir(self, project: str, agent: str) -> Path:
        """``<agent>/snapshots``: agent state version snapshots."""
        return self.agent_dir(project, agent) / "snapshots"

    def ensure_agent_dirs(self, project: str, agent: str) -> Path:
        """Create the agent folder and its standard subfolders; return the agent folder."""
        base = self.agent_dir(project, agent)
        for sub in AGENT_SUBDIRS:
            make_private_dirs(base / sub, within=self.path)
        return base

    def find_shards(self, project: str, agent: str, session_id: str) -> list[ShardRef]:
        """Every shard of a session, across all date folders, sorted by index."""
        sid = validate_name("session id", session_id)
        return _scan_traces(self.traces_dir(project, agent), sid).get(sid, [])

    def latest_shard(self, project: str, agent: str, session_id: str) -> ShardRef | None:
        """The highest-index shard of a session in any date folder (PR #271), or ``None``."""
        shards = self.find_shards(project, agent, session_id)
        return shards[-1] if shards else None

    def iter_sessions(
        self, project: str | None = None, agent: str | None = None
    ) -> Iterator[SessionRef]:
        """Same as :func:`iter_sessions` on this root."""
        return iter_sessions(self, project, agent)


def iter_sessions(
    root: DataRoot | Path, project: str | None = None, agent: str | None = None
) -> Iterator[SessionRef]:
    """Every session under ``root`` (optionally one project / agent), sorted by name.

    Folders whose names are not valid names are skipped, never followed.
    """
    base = root if isinstance(root, DataRoot) else DataRoot(root)
    if project is not None:
        projects = [validate_name("project", project)]
    else:
        projects = [e.name for e in _subdirs(base.path) if name_problem(e.name) is None]
    for proj in projects:
        if agent is not None:
            agents = [validate_name("agent", agent)]
        else:
            agents = [
                e.name
                for e in _subdirs(base.project_dir(proj) / "agents")
                if name_problem(e.name) is None
            ]
        for ag in agents:
            grouped = _scan_traces(base.traces_dir(proj, ag), None)
            for session_id in sorted(grouped):
                yield SessionRef(proj, ag, session_id, tuple(grouped[session_id]))
