"""Failed events are reported: `projections status` (table, --json, --failures), `projections
retry`, the warning of `pentrace stats`, and the service's /api/v1/projections (ADR 0032)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app, main
from pentrace.infrastructure.analytics.runner import catch_up
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.trace.durability import Durability
from tests.integration.fragile_projection import Fragile
from tests.integration.sse_harness import Server
from tests.integration.test_analytics_failures import poisoned_row, record
from tests.integration.test_session_application import Clock
from tests.support import sync_ledger

NAME = "tests.integration.fragile_projection:Fragile"
PG_URL = os.environ.get("PENTRACE_TEST_DATABASE_URL")


def cli(root: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--data-root", str(root), *args], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def broken_then_fixed() -> Iterator[None]:
    yield
    Fragile.fixed = False


def test_status_lists_the_failed_event_and_retry_applies_it_once_the_handler_is_fixed(
    tmp_path: Path,
    env: dict[str, str],
    broken_then_fixed: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    refs = record(tmp_path)
    sync_ledger(tmp_path, env)
    catch_up(Fragile, data_root=tmp_path, env=env)
    notification_id, sequence = poisoned_row(tmp_path, env)

    code, out, _ = cli(tmp_path, env, "projections", "status", NAME, "--json")
    assert code == 0, out
    [row] = json.loads(out)["projections"]
    assert (row["name"], row["failed_events"], row["max_failures"]) == ("fragile", 1, 100)
    code, out, _ = cli(tmp_path, env, "projections", "status", NAME)
    assert code == 0
    assert "failed_events" in out

    code, out, _ = cli(tmp_path, env, "projections", "status", NAME, "--failures", "--json")
    assert code == 0, out
    [failure] = json.loads(out)["failures"]
    assert failure["session"] == refs[1]
    assert (failure["notification_id"], failure["sequence"]) == (notification_id, sequence)
    assert failure["error_type"] == "RuntimeError"
    assert "hunter2secret" not in out
    code, out, _ = cli(tmp_path, env, "projections", "status", NAME, "--failures")
    assert refs[1] in out
    assert str(notification_id) in out

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(tmp_path), "projections", "retry", NAME])
    assert exit_info.value.code == 1
    out, err = capsys.readouterr()
    assert "0 failed event(s) applied, 1 still failing" in out
    assert f"error: projection {NAME!r}: 1 event(s) still fail" in err
    assert refs[1] in err
    assert "Traceback" not in err
    assert "hunter2secret" not in out + err

    Fragile.fixed = True
    code, out, err = cli(tmp_path, env, "projections", "retry", NAME)
    assert code == 0, err
    assert "1 failed event(s) applied, 0 still failing" in out
    code, out, _ = cli(tmp_path, env, "projections", "status", NAME, "--json")
    assert json.loads(out)["projections"][0]["failed_events"] == 0


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="PostgreSQL runs need PENTRACE_TEST_DATABASE_URL")
def test_a_built_in_projection_that_skipped_an_event_makes_stats_warn_and_the_service_list_it(
    tmp_path: Path, env: dict[str, str]
) -> None:
    if "PENTRACE_LEDGER_URL" not in env:
        pytest.skip("the read model's VARCHAR(200) is enforced by PostgreSQL only")
    application = SessionApplication(
        tmp_path, "proj", "agent", durability=Durability.NONE, clock=Clock()
    )
    try:
        handle = application.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s"
        )
        handle.record_user_input("go")
        handle.begin_request()
        handle.record_tool_call("exec_command", "{}", "c0")
        handle.record_tool_call("t" * 300, "{}", "c1")  # longer than tool_daily.tool holds
        handle.end_request("completed")
        handle.save()
        ref = f"proj/agent/{handle.session_id}"
    finally:
        application.close()
    sync_ledger(tmp_path, env)

    code, out, err = cli(tmp_path, env, "stats", "tools", "--json")
    assert code == 0, err
    assert [row["tool"] for row in json.loads(out)["tools"]] == ["exec_command"]
    assert "warning: projection 'tools' skipped 1 event(s)" in err
    assert ref in err

    server = Server(tmp_path, env=env).start()
    try:
        listed = httpx.get(f"{server.url}/api/v1/projections", timeout=10).json()
    finally:
        server.stop()
    tools = next(row for row in listed["projections"] if row["name"] == "tools")
    assert tools["failed_events"] == 1
    [failure] = tools["failures"]
    assert (failure["session"], failure["event_type"]) == (ref, "tool.called")
    assert failure["error_type"] == "DataError"
