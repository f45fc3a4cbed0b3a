"""Cold analytics (ADR 0050): read models built straight from the traces equal the ledger path,
and stay equal after the ledger is synced and caught up (no record counted twice), across a
SIGKILL of the build.  SQLite always; PostgreSQL (ledger and read model) when configured."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pentrace import testing as pt
from pentrace.infrastructure.analytics import AnalyticsEvent, Transaction
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.builtin.sessions import SessionActivity
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.builtin.tools import ToolCalls
from pentrace.infrastructure.analytics.cold import cold_build
from pentrace.infrastructure.analytics.cold.token_fold import TokenFold
from pentrace.infrastructure.analytics.examples import dump
from pentrace.infrastructure.analytics.readmodel import read_marks
from pentrace.infrastructure.analytics.rebuild import rebuild
from pentrace.infrastructure.analytics.runner import (
    AnalyticsRunner,
    catch_up,
    open_ledger,
    open_projection,
)
from tests.support import clean_env, run_pentrace, sync_ledger

BUILTINS: tuple[type[AnalyticsProjection], ...] = (TokenUse, ToolCalls, SessionActivity)


def _session(root: Path, number: int, turns: int, output: str = "ok") -> None:
    """A session of ``turns`` requests (tool calls, approvals, a failed request, a model switch);
    written again with more turns it grows by appended records."""
    commands: list[pt.Command] = [
        pt.StartSession(model_id=f"model-{number % 3}"),
        pt.UserInput(f"task {number}"),
    ]
    for turn in range(turns):
        call = f"call_{number}_{turn}"
        commands += [
            pt.BeginRequest(),
            pt.ToolCall(call, "exec_command" if turn % 2 else "read_file", "{}"),
            pt.Approval(call, "allow" if turn % 3 else "deny"),
            pt.ToolOutput(call, output if turn % 4 else "error: no such file"),
            pt.EndRequest("failed" if turn == 2 else "completed"),
            pt.TokenUsage(
                pt.TokenCounts(0, 0, 0, 0), pt.TokenCounts(number + turn, 1, 2, 40 + turn)
            ),
        ]
    pt.write_trace(
        root,
        commands,
        project=f"proj{number % 2}",
        agent=f"agent{number % 3}",
        session_id=f"session-2026-07-18-11-10-22-{number:08x}",
    )


def _ledger_head(root: Path, env: dict[str, str]) -> int:
    ledger = open_ledger(root, env)
    try:
        return ledger.head()
    finally:
        ledger.close()


def _ledger_only(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The same ledger, another analytics database: the read models of the ledger path."""
    return {**env, "PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'ledger-only.db'}"}


def _dumps(root: Path, env: dict[str, str]) -> dict[str, object]:
    return {each.name: dump(each, root, env) for each in BUILTINS}


def _caught_up(root: Path, env: dict[str, str]) -> dict[str, object]:
    for each in BUILTINS:
        catch_up(each, data_root=root, env=env)
    return _dumps(root, env)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cold_build_equals_the_ledger_path_and_a_later_sync_counts_nothing_twice(
    tmp_path: Path, env: dict[str, str], workers: int
) -> None:
    for number in range(5):
        _session(tmp_path, number, turns=3 + number)
    for each in BUILTINS:
        report = cold_build(each, data_root=tmp_path, env=env, workers=workers)
        assert report is not None
        assert (report.sessions, report.failures) == (5, ())
    assert _ledger_head(tmp_path, env) == 0  # built from the traces alone
    cold = _dumps(tmp_path, env)
    assert cold["tokens"]["tok_daily"]  # type: ignore[index]

    sync_ledger(tmp_path, env)  # the ledger now holds every record the cold build folded
    assert _caught_up(tmp_path, env) == cold
    assert _caught_up(tmp_path, _ledger_only(tmp_path, env)) == cold

    _session(tmp_path, 1, turns=9)  # appended records, and a new session
    _session(tmp_path, 7, turns=2)
    sync_ledger(tmp_path, env)
    grown = _caught_up(tmp_path, env)
    assert grown != cold
    assert grown == _caught_up(tmp_path, _ledger_only(tmp_path, env))

    for each in BUILTINS:  # a rebuild follows the ledger's positions and drops the marks
        rebuild(each, data_root=tmp_path, env=env)
        projection = open_projection(each, tmp_path, env)
        try:
            assert read_marks(projection.view.db, each.name) == {}
        finally:
            projection.view.db.close()
    assert _dumps(tmp_path, env) == grown


def test_a_cold_build_records_each_sessions_folded_position(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _session(tmp_path, 0, turns=2)
    _session(tmp_path, 1, turns=4)
    cold_build(TokenUse, data_root=tmp_path, env=env)
    projection = open_projection(TokenUse, tmp_path, env)
    try:
        marks = read_marks(projection.view.db, TokenUse.name)
        assert projection.view.max_tracking_id(TokenUse.name) == 0
    finally:
        projection.view.db.close()
    # StartSession and UserInput make 3 records, each turn 6.
    assert sorted(marks.values()) == [3 + 2 * 6, 3 + 4 * 6]


def test_a_read_model_that_has_a_position_or_a_ledger_that_held_events_is_not_cold(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _session(tmp_path, 0, turns=2)
    with AnalyticsRunner(TokenUse, data_root=tmp_path, env=env):
        pass  # a runner holds a tracking row from its start: a cold build cannot race it
    assert cold_build(TokenUse, data_root=tmp_path, env=env) is None
    sync_ledger(tmp_path, env)
    assert cold_build(ToolCalls, data_root=tmp_path, env=env) is None  # the ledger has events
    catch_up(ToolCalls, data_root=tmp_path, env=env)
    assert dump(ToolCalls, tmp_path, env)["tool_daily"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bulk_fold_over_a_ledger_that_held_events_is_dropped_and_the_ledger_path_stands(
    tmp_path: Path, env: dict[str, str], workers: int
) -> None:
    # The bulk fold's workers start on the traces before the ledger is read (ADR 0062): what
    # they folded must not reach the read model when the ledger has held events.
    for number in range(20):
        _session(tmp_path, number, turns=3)
    sync_ledger(tmp_path, env)
    assert cold_build(TokenUse, data_root=tmp_path, env=env, workers=workers) is None
    view = open_projection(TokenUse, tmp_path, env).view
    try:
        assert view.max_tracking_id(view.name) is None  # nothing committed: no position,
        assert read_marks(view.db, TokenUse.name) == {}  # no trace marks
    finally:
        view.db.close()
    ledger_only = _ledger_only(tmp_path, env)
    assert _caught_up(tmp_path, env)["tokens"] == _caught_up(tmp_path, ledger_only)["tokens"]


def _ledger_only_stats(tmp_path: Path, root: Path) -> dict[str, object]:
    """``stats tokens --by day`` of the ledger path: sync, then read models fed from the ledger."""
    other = tmp_path / "other"
    env = clean_env(PENTRACE_ANALYTICS_URL=f"sqlite:///{other / 'analytics.db'}")
    env["PENGUIN_RUNTIME_EVENT_LEDGER_PATH"] = str(other / "ledger.db")
    other.mkdir()
    done = run_pentrace(root, "stats", "tokens", "--by", "day", "--sync", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _big_corpus(root: Path) -> None:
    """Over 8 MB of traces: ``stats`` folds them in worker processes."""
    output = "line of tool output\n" * 700
    for number in range(32):
        _session(root, number, turns=24, output=output)
    size = sum(path.stat().st_size for path in root.rglob("*.jsonl"))
    assert size > 8 * 1024 * 1024, size


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(child) for child in text.split()]
    return []


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def _tracking_rows(path: Path) -> list[tuple[str, int]]:
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        query = "SELECT application_name, notification_id FROM analytics_tracking"
        return db.execute(query).fetchall()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_stats_killed_during_a_cold_build_commits_nothing_and_the_next_run_is_exact(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    _big_corpus(root)
    env = clean_env()
    command = ["--data-root", str(root), "stats", "tokens", "--json"]
    process = subprocess.Popen(
        [sys.executable, "-m", "pentrace", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    deadline = time.monotonic() + 60
    while not workers and process.poll() is None and time.monotonic() < deadline:
        workers = _children(process.pid)  # the pool lives only while the traces are folded
        time.sleep(0.002)
    assert workers, "the cold build finished (or never forked) before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while not all(map(_gone, workers)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(map(_gone, workers)), "the build's workers outlived it"
    assert _tracking_rows(root / "analytics" / "analytics.db") == []  # nothing committed

    done = run_pentrace(root, "stats", "tokens", "--by", "day", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == _ledger_only_stats(tmp_path, root)
    assert _tracking_rows(root / "analytics" / "analytics.db") == [("tokens", 0)]


_gate: list[Callable[[], None]] = []  # the test's "start a runner", taken once


def _open_gate() -> None:
    if _gate:
        _gate.pop()()


class _GatedTokens(TokenUse):
    """The token projection under another name, built by its handlers (no bulk fold of its
    own); its first usage event starts a runner in a thread while the cold build holds the
    write transaction."""

    name = "gated_tokens"

    def on_usage(self, event: AnalyticsEvent, tx: Transaction) -> None:
        _open_gate()
        super().on_usage(event, tx)


class _GatedFold(TokenFold):
    """The token bulk fold; it starts the runner as it writes the merged rows."""

    def write(self, tx: Transaction) -> None:
        _open_gate()
        super().write(tx)


class _GatedBulkTokens(TokenUse):
    """The token projection under another name, built by its bulk fold (ADR 0062)."""

    name = "gated_bulk_tokens"
    bulk_fold = _GatedFold


@pytest.mark.parametrize("projection", [_GatedTokens, _GatedBulkTokens])
def test_a_runner_that_starts_during_a_cold_build_waits_and_then_skips_what_it_folded(
    tmp_path: Path, projection: type[TokenUse]
) -> None:
    env = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'analytics.db'}"}
    for number in range(3):
        _session(tmp_path, number, turns=4)
    runners: list[AnalyticsRunner] = []
    errors: list[BaseException] = []

    def open_runner() -> None:
        try:  # blocks on SQLite's write lock until the cold build has committed
            runners.append(AnalyticsRunner(projection, data_root=tmp_path, env=env))
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            errors.append(error)

    thread = threading.Thread(target=open_runner)
    _gate[:] = [thread.start]
    report = cold_build(projection, data_root=tmp_path, env=env)
    thread.join(timeout=30)
    assert errors == []
    assert _gate == []  # the build started the runner
    assert report is not None
    assert report.bulk == (projection is _GatedBulkTokens)
    [runner] = runners
    with runner:
        assert runner.projection.folded  # it read the marks the cold build committed
        cold = dump(projection, tmp_path, env)
        sync_ledger(tmp_path, env)
        runner.wait(_ledger_head(tmp_path, env), timeout=30)
    assert dump(projection, tmp_path, env) == cold
