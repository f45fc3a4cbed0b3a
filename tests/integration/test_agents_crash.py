"""The import survives SIGKILL and a lost or stale state: the traces end as one import's (ADR 0096).

A real ``pentrace import --from claude-code`` process is killed at several
moments; the next run finishes the work, and the traces are byte for byte
those of an import that was never interrupted: nothing lost, nothing twice.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.agents.state import state_path
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import ClaudeLog, claude_turn
from tests.support import clean_env

pytestmark = pytest.mark.usefixtures("own_stores")


def _store(tmp_path: Path, files: int, turns: int) -> Path:
    store = tmp_path / "claude" / "projects" / "-home-u-app"
    for number in range(files):
        log = ClaudeLog(f"{number:08d}-0000-4000-8000-000000000000")
        for turn in range(turns):
            claude_turn(log, turn, calls=turn % 3)
        log.write(store)
    return store


def _traces(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.glob("*/agents/*/traces/*/*.jsonl"))
    }


def _same_records(got: dict[str, bytes], want: dict[str, bytes]) -> None:
    assert got.keys() == want.keys()
    for name, data in want.items():
        # A kill mid-write may leave a torn fragment that the next append heals onto
        # its own line; the records around it are the same.
        lines = [line for line in got[name].split(b"\n") if line.strip()]
        kept = [line for line in lines if line.endswith(b"}}")]
        assert kept == data.splitlines(), name


def test_a_stale_or_lost_state_finds_the_records_already_written(tmp_path: Path) -> None:
    store = _store(tmp_path, 2, 6)
    whole = {path: path.read_bytes() for path in store.glob("*.jsonl")}
    one = tmp_path / "one"
    import_agent(DataRoot(one), "claude-code", [store])
    root = tmp_path / "data"
    for path, data in whole.items():
        path.write_bytes(data[: len(data) // 2])
    import_agent(DataRoot(root), "claude-code", [store])
    stale = tmp_path / "stale.db"
    shutil.copy(state_path(root), stale)
    for path, data in whole.items():
        path.write_bytes(data)
    import_agent(DataRoot(root), "claude-code", [store])

    # The state goes back to before the last pass (as if its commit never happened).
    shutil.copy(stale, state_path(root))
    for side in ("-wal", "-shm"):
        Path(f"{state_path(root)}{side}").unlink(missing_ok=True)
    again = import_agent(DataRoot(root), "claude-code", [store])
    assert again.records == 0
    assert _traces(root) == _traces(one)

    # The state is lost: every source is mapped again, and every record is found in place.
    state_path(root).unlink()
    lost = import_agent(DataRoot(root), "claude-code", [store])
    assert lost.records == 0
    assert _traces(root) == _traces(one)


def test_records_that_differ_from_the_trace_stop_the_source_with_a_warning(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, 1, 3)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])
    [shard] = root.glob("*/agents/claude-code/traces/*/*.jsonl")
    lines = shard.read_bytes().splitlines()
    changed = max(i for i, line in enumerate(lines) if b'"text":"done' in line)
    lines[changed] = lines[changed].replace(b'"text":"done', b'"text":"DONE')
    shard.write_bytes(b"\n".join(lines) + b"\n")
    state_path(root).unlink()

    report = import_agent(DataRoot(root), "claude-code", [store])

    assert report.records == 0
    assert any("holds other records than its source maps to" in w for w in report.warnings)


def test_a_source_the_trace_refuses_stops_alone_when_small_sources_share_a_batch(
    tmp_path: Path,
) -> None:
    """Small files are written and committed together (ADR 0106); when the trace refuses one
    of them, each is read again alone: the others go on, only that one stops."""
    store = _store(tmp_path, 3, 2)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])
    [refused] = root.glob("*/agents/claude-code/traces/*/00000001-*.jsonl")
    refused.write_bytes(refused.read_bytes().replace(b'"text":"done', b'"text":"DONE'))
    state_path(root).unlink()
    before = {name: text for name, text in _traces(root).items() if "00000001-" not in name}
    for number in range(3):
        log = ClaudeLog(f"{number:08d}-0000-4000-8000-000000000000")
        for turn in range(3):
            claude_turn(log, turn, calls=turn % 3)
        log.write(store)
    one = tmp_path / "one"
    import_agent(DataRoot(one), "claude-code", [store])

    report = import_agent(DataRoot(root), "claude-code", [store])

    [warning] = [w for w in report.warnings if "holds other records" in w]
    assert "00000001-" in warning
    grown = sum(len(_traces(one)[name].splitlines()) - len(text.splitlines())
                for name, text in before.items())  # fmt: skip
    assert report.records == grown > 0  # written in the shared batch, or alone after it
    theirs, ours = _traces(one), _traces(root)
    assert theirs.keys() == ours.keys()
    for name in theirs:
        assert (ours[name] == theirs[name]) == ("00000001-" not in name), name


def test_sigkill_at_any_moment_loses_nothing_and_writes_nothing_twice(tmp_path: Path) -> None:
    store = _store(tmp_path, 3, 120)
    one = tmp_path / "one"
    import_agent(DataRoot(one), "claude-code", [store])
    root = tmp_path / "data"
    env = clean_env(HOME=str(tmp_path / "home"))
    command = [sys.executable, "-m", "pentrace", "--data-root", str(root), "import",
               "--from", "claude-code", str(store)]  # fmt: skip
    killed = 0
    for delay in (0.4, 0.9, 1.5, 2.2, 3.0):
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(delay)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            killed += 1
        child.wait(timeout=60)
    finished = subprocess.run(command, env=env, capture_output=True, timeout=300, check=False)
    assert finished.returncode == 0, finished.stderr
    assert killed >= 1, "the import finished before the first kill: make the store larger"
    _same_records(_traces(root), _traces(one))
