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
from collections.abc import Callable
from pathlib import Path

import pytest

from pentrace import testing as pt
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.builtin.tools import ToolCalls
from pentrace.infrastructure.analytics.examples import dump, run_in_batches
from pentrace.infrastructure.analytics.failures import EventFailure, read_failures
from pentrace.infrastructure.analytics.runner import catch_up, open_ledger, open_projection
from pentrace.infrastructure.ledger.bulk import sync
from tests.integration.fragile_projection import POISON, Fragile

REPO = Path(__file__).resolve().parents[2]

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
    _index(root)


def _index(root: Path) -> None:
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


def _kill_while_running(
    root: Path, target: str, name: str, env: dict[str, str], more: Callable[[int], None]
) -> None:
    """Three runs of ``projections run target``, each SIGKILLed at a random moment after a
    commit; ``more(n)`` writes live sessions during run ``n`` (from the second on)."""
    seed = random.randrange(1 << 30)
    print(f"crash seed: {seed}")
    rng = random.Random(seed)
    killed_db = Path(env["PENTRACE_ANALYTICS_URL"].removeprefix("sqlite:///"))
    kills = 0
    for round_number in range(3):
        before = _position(killed_db, name)
        process = _runner(root, target, env)
        if round_number:
            more(round_number)  # live events to follow
        _until_committed_past(process, killed_db, name, before)
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


@pytest.mark.parametrize("projection", [TokenUse, ToolCalls], ids=["tokens", "tools"])
def test_a_runner_killed_at_random_moments_ends_with_the_read_model_of_an_uninterrupted_run(
    tmp_path: Path, projection: type[TokenUse] | type[ToolCalls]
) -> None:
    root = tmp_path / "root"
    env = dict(os.environ)
    env["PENTRACE_ANALYTICS_URL"] = f"sqlite:///{tmp_path / 'killed.db'}"
    # Small batches: many commits, so kills land before, during and after them.
    env["PENTRACE_ANALYTICS_BATCH_SIZE"] = "7"
    _write_sessions(root, 0, 40)
    _kill_while_running(
        root, projection.name, projection.name, env, lambda n: _write_sessions(root, 40 + n * 4, 4)
    )
    catch_up(projection, data_root=root, env=env)
    reference = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'whole.db'}"}
    run_in_batches(projection, root, env=reference)
    expected = dump(projection, root, reference)
    assert any(expected.values())
    assert dump(projection, root, env) == expected


def _write_poisoned(root: Path, first: int, count: int) -> None:
    """Sessions whose every third tool output is one the fragile handler cannot take."""
    for number in range(first, first + count):
        commands: list[pt.Command] = [pt.StartSession(), pt.UserInput(f"task {number}")]
        for turn in range(3):
            call = f"call_{number}_{turn}"
            text = f"{POISON} {number}" if (number + turn) % 3 == 0 else f"out {number} {turn}"
            commands += [
                pt.BeginRequest(),
                pt.ToolCall(call, "exec_command", "{}"),
                pt.ToolOutput(call, text),
                pt.EndRequest("completed"),
            ]
        pt.write_trace(root, commands, session_id=f"session-2026-07-18-11-10-22-{number:08x}")
    _index(root)


def _failures(root: Path, env: dict[str, str]) -> list[EventFailure]:
    projection = open_projection(Fragile, root, env)
    try:
        return read_failures(projection.view.db, Fragile.name)
    finally:
        projection.view.db.close()


def test_a_runner_killed_while_it_skips_failed_events_records_each_once_and_applies_the_rest_once(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    env = dict(os.environ)
    env["PENTRACE_ANALYTICS_URL"] = f"sqlite:///{tmp_path / 'killed.db'}"
    env["PENTRACE_ANALYTICS_BATCH_SIZE"] = "5"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    _write_poisoned(root, 0, 30)
    _kill_while_running(
        root,
        "tests.integration.fragile_projection:Fragile",
        Fragile.name,
        env,
        lambda n: _write_poisoned(root, 30 + n * 3, 3),
    )
    catch_up(Fragile, data_root=root, env=env)
    reference = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'whole.db'}"}
    run_in_batches(Fragile, root, env=reference)
    expected = dump(Fragile, root, reference)
    assert expected["fragile_outputs"]
    assert dump(Fragile, root, env) == expected
    recorded = _failures(root, env)
    assert recorded == _failures(root, reference)
    assert len(recorded) == len({(f.stream_id, f.sequence) for f in recorded}) > 0
    assert {f.attempts for f in recorded} == {1}
