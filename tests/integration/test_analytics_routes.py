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
from pentrace.infrastructure.layout import DataRoot
from pentrace.infrastructure.ledger.indexer import sync
from tests.integration.sse_harness import Server


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


def cli_json(root: Path, *args: str) -> object:
    result = CliRunner().invoke(app, ["--data-root", str(root), "stats", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


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
    assert response.json() == cli_json(server.root, kind, *args)


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
