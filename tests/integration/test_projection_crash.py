"""Exactly once: SIGKILL a projection runner at random moments, restart it, and the read
model equals that of a run that was never interrupted (while new events keep arriving)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pentrace import testing as pt
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.builtin.tools import ToolCalls
from pentrace.infrastructure.analytics.checking import dump, run_in_batches
from pentrace.infrastructure.analytics.runner import catch_up, open_ledger
from pentrace.infrastructure.ledger.indexer import sync

pytestmark = pytest.mark.slow


def _write_sessions(root: Path, first: int, count: int) -> None:
    for number in range(first, first + count):
        commands: list[pt.Command] = [
            pt.StartSession(model_id=f"model-{number % 3}"),
            pt.UserInput(f"task {number}"),
        ]
        for turn in range(4):
            call = f"call_{number}_{turn}"
            size = number * 10 + turn
            commands += [
                pt.BeginRequest(),
                pt.ToolCall(call, "exec_command", "{}"),
                pt.Approval(call, "allow" if turn % 2 else "deny"),
                pt.ToolOutput(call, f"out {turn}"),
                pt.EndRequest("completed" if turn != 2 else "failed"),
                pt.TokenUsage(pt.TokenCounts(0, 0, 0, 0), pt.TokenCounts(size, 1, 2, size * 3)),
            ]
        pt.write_trace(root, commands, session_id=f"session-2026-07-18-11-10-22-{number:08x}")
    ledger = open_ledger(root)
    try:
        sync(ledger, root)
    finally:
        ledger.close()


def _runner(root: Path, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), "projections", "run", name],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _position(path: Path, name: str) -> int:
    """The committed tracking position in the killed runner's read model (0 before any)."""
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        try:
            row = db.execute(
                "SELECT notification_id FROM analytics_tracking WHERE application_name = ?", (name,)
            ).fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(row[0]) if row else 0


def _until_committed_past(
    process: subprocess.Popen[bytes], path: Path, name: str, before: int
) -> None:
    """Wait until the runner has committed a batch beyond ``before`` (it is really working)."""
    deadline = time.monotonic() + 60
    while _position(path, name) <= before:
        assert process.poll() is None, process.stderr
        assert time.monotonic() < deadline, "the runner never committed"
        time.sleep(0.01)


@pytest.mark.parametrize("projection", [TokenUse, ToolCalls], ids=["tokens", "tools"])
def test_a_runner_killed_at_random_moments_ends_with_the_read_model_of_an_uninterrupted_run(
    tmp_path: Path, projection: type[TokenUse] | type[ToolCalls]
) -> None:
    seed = random.randrange(1 << 30)
    print(f"crash seed: {seed}")
    rng = random.Random(seed)
    root = tmp_path / "root"
    env = dict(os.environ)
    env["PENTRACE_ANALYTICS_URL"] = f"sqlite:///{tmp_path / 'killed.db'}"
    # Small batches: many commits, so kills land before, during and after them.
    env["PENTRACE_ANALYTICS_BATCH_SIZE"] = "7"
    _write_sessions(root, 0, 40)
    killed_db = tmp_path / "killed.db"
    kills = 0
    for round_number in range(3):
        before = _position(killed_db, projection.name)
        process = _runner(root, projection.name, env)
        if round_number:
            _write_sessions(root, 40 + round_number * 4, 4)  # live events to follow
        _until_committed_past(process, killed_db, projection.name, before)
        # Round 0 dies mid catch-up; later rounds while they handle the fresh sessions.
        time.sleep(rng.uniform(0.0, 0.3))
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.wait()
        assert process.returncode in (-signal.SIGKILL, 0), process.stderr
        if process.stderr is not None:
            process.stderr.close()
    assert kills >= 2
    catch_up(projection, data_root=root, env=env)
    reference = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'whole.db'}"}
    run_in_batches(projection, root, env=reference)
    expected = dump(projection, root, reference)
    assert any(expected.values())
    assert dump(projection, root, env) == expected
