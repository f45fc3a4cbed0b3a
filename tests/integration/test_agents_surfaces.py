"""Every surface works on imported sessions of the four agents (issue #28): list, show,
replay, search, audit, resume-check, stats (told apart by agent), cost, report, export,
the web pages and the session API of a real ``pentrace serve``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import (
    ClaudeLog,
    CodexLog,
    GeminiChat,
    OpenCodeDb,
    claude_turn,
    codex_turn,
    gemini_call,
    opencode_tool,
)
from tests.integration.sse_harness import Server
from tests.support import clean_env, cli, cli_json, cli_ok, run_pentrace

IDS = {
    "claude-code": "1c1c1c1c-0000-4000-8000-000000000001",
    "codex": "0199cccc-0000-7000-8000-000000000002",
    "opencode": "ses_surface0003",
    "gemini": "9e9e9e9e-0000-4000-8000-000000000004",
}
WORD = "zanzibar"  # a word every agent's session says once


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("surfaces")
    claude = ClaudeLog(IDS["claude-code"])
    claude_turn(claude, 0, calls=2)
    claude.prompt(f"remember {WORD}")
    claude.write(base / "claude" / "projects" / "-home-u-work-app")
    codex = CodexLog(IDS["codex"])
    codex.meta()
    codex.context("gpt-5-codex")
    codex_turn(codex, 0)
    codex.user(f"remember {WORD}")
    codex.write(base / "codex")
    db = OpenCodeDb(base / "opencode")
    db.session(IDS["opencode"])
    db.user(IDS["opencode"], f"remember {WORD}")
    db.assistant(
        IDS["opencode"], [opencode_tool("c1", "bash", "ok"), {"type": "text", "text": "ok"}]
    )
    db.close()
    gemini = GeminiChat(IDS["gemini"])
    gemini.user(f"remember {WORD}")
    gemini.reply("noted", calls=[gemini_call("g1", "ok")])
    gemini.write(base / "gemini" / "p")
    data = base / "data"
    for agent, folder in (("claude-code", "claude"), ("codex", "codex"),
                          ("opencode", "opencode"), ("gemini", "gemini")):  # fmt: skip
        import_agent(DataRoot(data), agent, [base / folder])
    cli_ok(data, "ledger", "sync")
    return data


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[Server]:
    running = Server(root).start()
    yield running
    running.stop()


pytestmark = pytest.mark.usefixtures("own_stores")


def test_stats_tell_the_four_agents_apart(root: Path) -> None:
    rows = cli_json(root, "stats", "tokens", "--by", "agent")["rows"]

    assert {row["key"] for row in rows} == set(IDS)
    assert all(row["total"] > 0 for row in rows)
    cost = cli(root, "stats", "cost", "--by", "agent", "--json")
    assert cost.exit_code == 0, cost.output
    assert {row["key"] for row in json.loads(cost.stdout)["rows"]} == set(IDS)


@pytest.mark.parametrize("agent", sorted(IDS))
def test_each_session_lists_shows_replays_and_resume_checks(root: Path, agent: str) -> None:
    sid = IDS[agent]
    listed = {s["session_id"]: s for s in cli_json(root, "sessions", "list")["sessions"]}

    assert listed[sid]["agent"] == agent
    assert cli_json(root, "show", sid)["session_id"] == sid
    assert WORD in cli_ok(root, "replay", sid, "--include-uncommitted").stdout
    assert "history" in cli_json(root, "resume-check", sid)
    exported = cli_ok(root, "export", sid, "--redacted").stdout
    assert all(json.loads(line)["payload"] is not None for line in exported.splitlines())


def test_search_finds_what_each_agent_was_told(root: Path) -> None:
    found = cli_json(root, "search", WORD)

    sessions = {hit["session_id"] for hit in found["hits"]}
    assert sessions == set(IDS.values())


def test_audit_runs_over_them(root: Path) -> None:
    audit = cli(root, "audit", "--json")

    assert audit.exit_code in (0, 1), audit.output  # warnings at most: no broken trace
    assert json.loads(audit.stdout)["sessions"] == len(IDS)


@pytest.mark.parametrize("agent", sorted(IDS))
def test_each_session_has_its_report(root: Path, tmp_path: Path, agent: str) -> None:
    report = tmp_path / "report.html"

    cli_ok(root, "report", IDS[agent], "--output", str(report))

    assert IDS[agent] in report.read_text()


@pytest.mark.parametrize("agent", sorted(IDS))
def test_the_web_page_and_the_api_show_each_session(server: Server, agent: str) -> None:
    sid = IDS[agent]
    listed = httpx.get(f"{server.url}/api/v1/sessions", timeout=30).json()
    [entry] = [s for s in listed["sessions"] if s["session_id"] == sid]

    page = httpx.get(f"{server.url}/web/sessions/{entry['project']}/{agent}/{sid}", timeout=30)

    assert page.status_code == 200
    assert WORD in page.text


def test_with_no_path_each_agent_is_read_where_its_environment_says(tmp_path: Path) -> None:
    one, two = tmp_path / "claude-a", tmp_path / "claude-b"
    for number, folder in enumerate((one, two)):
        log = ClaudeLog(f"2c2c2c2c-0000-4000-8000-00000000000{number}")
        claude_turn(log, 0)
        log.write(folder / "projects" / "-home-u-app")
    codex = CodexLog("0199dddd-0000-7000-8000-000000000001")
    codex.meta()
    codex_turn(codex, 0)
    codex.write(tmp_path / "codex-home")
    db = OpenCodeDb(tmp_path / "opencode-data")
    db.session("ses_env")
    db.user("ses_env", "hello")
    db.close()
    chat = GeminiChat("9f9f9f9f-0000-4000-8000-000000000001")
    chat.user("hello")
    chat.write(tmp_path / "home" / ".gemini" / "tmp" / "p")
    env = clean_env(
        HOME=str(tmp_path / "home"),
        CLAUDE_CONFIG_DIR=f"{one}, {two}",  # a comma-separated list
        CODEX_HOME=str(tmp_path / "codex-home"),
        OPENCODE_DATA_DIR=str(tmp_path / "opencode-data"),
    )
    root = tmp_path / "data"

    for agent, expected in (("claude-code", 2), ("codex", 1), ("opencode", 1), ("gemini", 1)):
        done = run_pentrace(root, "import", "--from", agent, "--json", env=env)
        assert done.returncode == 0, done.stderr
        assert len(json.loads(done.stdout)["new_sessions"]) == expected, agent
