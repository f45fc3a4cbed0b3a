"""The event service's read-only analytics routes, on a real server process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.analytics.runner import open_ledger
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.service.app import create_app
from pentrace.service.settings import ServiceSettings
from tests.integration.sse_harness import Server, free_port
from tests.support import cli_json, served_in_thread


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("analytics-api")
    record_demo_session(DataRoot(root), datetime(2026, 11, 28, 9, tzinfo=UTC))
    ledger = open_ledger(root)
    try:
        sync(ledger, root)
    finally:
        ledger.close()
    running = Server(root).start()
    yield running
    running.stop()


def stats_json(root: Path, *args: str) -> object:
    return cli_json(root, "stats", *args)


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("tokens", ["--by", "day"]),
        ("tools", []),
        ("requests", []),
        ("sessions", ["--by", "agent"]),
        ("tree", []),
    ],
)
def test_each_route_serves_the_document_of_the_cli(
    server: Server, kind: str, args: list[str]
) -> None:
    params = {"catch_up": "1"}
    if args:
        params[args[0].lstrip("-")] = args[1]
    response = httpx.get(f"{server.url}/api/v1/stats/{kind}", params=params, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json() == stats_json(server.root, kind, *args)


def test_bad_kinds_and_days_are_400_with_a_hint_and_writes_are_refused(server: Server) -> None:
    bad_kind = httpx.get(f"{server.url}/api/v1/stats/colours", timeout=10)
    assert bad_kind.status_code == 400
    assert "tokens" in bad_kind.json()["error"]["message"]
    bad_day = httpx.get(f"{server.url}/api/v1/stats/tokens", params={"since": "May"}, timeout=10)
    assert bad_day.status_code == 400
    assert bad_day.json()["error"]["hint"]
    assert httpx.post(f"{server.url}/api/v1/stats/tokens", timeout=10).status_code == 405


def test_the_projection_positions_are_listed(server: Server) -> None:
    httpx.get(f"{server.url}/api/v1/stats/tools", params={"catch_up": "1"}, timeout=30)
    listed = httpx.get(f"{server.url}/api/v1/projections", timeout=10).json()["projections"]
    tools = next(row for row in listed if row["name"] == "tools")
    assert tools["position"] == tools["ledger_newest"] > 0


def test_the_routes_follow_the_service_settings_not_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An embedding application passes its own settings to create_app; the routes
    # must read that ledger and that analytics database, whatever the env says.
    root = tmp_path / "data"
    record_demo_session(DataRoot(root), datetime(2026, 11, 28, 9, tzinfo=UTC))
    ledger_settings = LedgerSettings(path=tmp_path / "chosen" / "ledger.db").with_limits_off()
    ledger = RuntimeEventLedger.open(root, ledger_settings)
    try:
        sync(ledger, root)
    finally:
        ledger.close()
    chosen_analytics = tmp_path / "chosen" / "analytics.db"
    wrong = tmp_path / "wrong"
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_PATH", str(wrong / "ledger.db"))
    monkeypatch.setenv("PENTRACE_ANALYTICS_URL", f"sqlite:///{wrong / 'analytics.db'}")
    settings = ServiceSettings(
        data_root=root,
        ledger=ledger_settings,
        analytics_url=f"sqlite:///{chosen_analytics}",
        port=free_port(),
    )
    with served_in_thread(create_app(settings), settings.port) as base:
        served = httpx.get(f"{base}/api/v1/stats/tools", params={"catch_up": "1"}, timeout=30)
        listed = httpx.get(f"{base}/api/v1/projections", timeout=10)
    assert served.status_code == 200, served.text
    assert listed.status_code == 200, listed.text
    expected = CliRunner().invoke(
        app,
        ["--data-root", str(root), "stats", "tools", "--json"],
        env={
            "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(ledger_settings.path),
            "PENTRACE_ANALYTICS_URL": f"sqlite:///{chosen_analytics}",
        },
    )
    assert expected.exit_code == 0, expected.output
    assert served.json() == json.loads(expected.stdout)
    assert served.json()["tools"]  # the demo's tool calls, read from the chosen ledger
    tools = next(row for row in listed.json()["projections"] if row["name"] == "tools")
    assert tools["position"] == tools["ledger_newest"] > 0
    assert chosen_analytics.exists()
    assert not wrong.exists()
