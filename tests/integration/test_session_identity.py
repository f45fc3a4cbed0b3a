"""One trace imported under several agents and projects stays several sessions (issue #13).

The same PenguinHarness trace (one session id) is imported under two agents and
two projects.  Every derived store and interface must show each session apart
with its own numbers; the oracle is a few lines reading the raw JSONL.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.domain.session.key import SessionKey
from tests.integration.sse_harness import Server, SseClient
from tests.support import run_pentrace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "penguin_harness"
BASIC = FIXTURES / "basic_session.jsonl"
SID = "session-2026-07-18-11-10-22-3f8a1c2d"  # every fixture's session id
OWNERS = (("p1", "a1"), ("p1", "a2"), ("p2", "a1"))
KEYS = [SessionKey(project, agent, SID) for project, agent in OWNERS]


pytestmark = pytest.mark.usefixtures("own_stores")


def cli(root: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["--data-root", str(root), *args])


def cli_json(root: Path, *args: str) -> Any:
    result = cli(root, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def raw_numbers(path: Path) -> dict[str, int]:
    """The oracle: requests begun and summed request token counts, straight from the JSONL."""
    counts: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        payload = json.loads(line)["payload"]
        if payload.get("type") == "request_begin":
            counts["requests"] += 1
        if payload.get("type") == "token_usage":
            request = payload["request"]
            counts["usage_records"] += 1
            counts["total"] += request["total"]
            counts["output"] += request["output"]
            counts["cache_read"] += request["cache_read"]
            counts["cache_write"] += request["cache_write"]
    return {name: counts[name] for name in ("requests", "usage_records", "total", "output")}


def import_under(root: Path, source: Path, project: str, agent: str) -> dict[str, Any]:
    result = cli(root, "import", str(source), "--project", project, "--agent", agent, "--json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    for project, agent in OWNERS:
        imported = import_under(data, BASIC, project, agent)
        assert imported["ledger_indexed"] == records_of(BASIC)
        assert imported["ref"] == f"{project}/{agent}/{SID}"
    return data


def records_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_ledger_sync_indexes_every_copy_and_each_is_its_own_stream(root: Path) -> None:
    from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger

    records = records_of(BASIC)
    # Each import indexed its copy; a sync then finds them all held, and a rebuild from the
    # traces indexes all three copies again (before #13 the second and third were "held").
    report = cli_json(root, "ledger", "sync")
    assert (report["sessions"], report["indexed"], report["already_held"]) == (3, 0, 3 * records)
    rebuilt = cli_json(root, "ledger", "rebuild")
    assert (rebuilt["sessions"], rebuilt["indexed"]) == (3, 3 * records)
    ledger = RuntimeEventLedger.open(root, LedgerSettings())
    try:
        assert ledger.session_streams() == dict.fromkeys(KEYS, records)
        assert all(ledger.contains(key.event_id(records)) for key in KEYS)
    finally:
        ledger.close()
    audit = cli(root, "audit", "--json")
    assert audit.exit_code == 0, audit.output
    report = json.loads(audit.stdout)
    assert (report["sessions"], report["problems"], report["ledger"]) == (
        3,
        [],
        str(root / "runtime_events" / "runtime_events.db"),
    )


def test_stats_show_each_session_with_its_own_numbers(root: Path) -> None:
    expected = raw_numbers(BASIC)
    rows = cli_json(root, "stats", "tokens", "--sync", "--by", "session")["rows"]
    by_session = {row["key"]: row for row in rows}
    assert sorted(by_session) == sorted(key.reference for key in KEYS)
    for row in by_session.values():
        assert {name: row[name] for name in expected} == expected
    by_agent = {
        row["key"]: row["total"]
        for row in cli_json(root, "stats", "tokens", "--by", "agent")["rows"]
    }
    assert by_agent == {"a1": 2 * expected["total"], "a2": expected["total"]}
    sessions = cli_json(root, "stats", "sessions", "--by", "session")["rows"]
    assert sorted(row["key"] for row in sessions) == sorted(key.reference for key in KEYS)
    assert {row["requests"] for row in sessions} == {expected["requests"]}


def test_a_full_id_shared_by_three_owners_asks_for_the_owner_and_the_reference_resolves(
    root: Path,
) -> None:
    ambiguous = run_pentrace(root, "show", SID)  # a real process: the error as a user sees it
    assert ambiguous.returncode == 2  # a usage error
    references = ", ".join(sorted(key.reference for key in KEYS))
    assert f"matches 3 sessions: {references}" in ambiguous.stderr
    assert "hint: name the owner: project/agent/session-id, for example p1/a1/" in ambiguous.stderr
    shown = cli_json(root, "show", f"p1/a2/{SID}")
    assert (shown["project"], shown["agent"], shown["ref"]) == ("p1", "a2", f"p1/a2/{SID}")
    assert shown["numbers"]["request_total"] == raw_numbers(BASIC)["requests"]
    by_prefix = cli_json(root, "show", "p2/a1/3f8a")
    assert (by_prefix["project"], by_prefix["agent"]) == ("p2", "a1")
    agent_only = run_pentrace(root, "show", f"a1/{SID}")  # a1 exists in both projects
    assert "matches 2 sessions" in agent_only.stderr
    assert cli_json(root, "show", f"a2/{SID}")["project"] == "p1"


def test_search_finds_the_text_in_every_copy_and_keeps_them_apart(root: Path) -> None:
    hits = cli_json(root, "search", "bonjour")["hits"]
    assert sorted({(hit["project"], hit["agent"]) for hit in hits}) == sorted(OWNERS)
    only = cli_json(root, "search", "bonjour", "--session", f"p1/a2/{SID}")["hits"]
    assert only
    assert {(hit["project"], hit["agent"]) for hit in only} == {("p1", "a2")}


@pytest.fixture
def server(root: Path) -> Iterator[Server]:
    assert cli(root, "ledger", "sync").exit_code == 0
    running = Server(root).start()
    yield running
    running.stop()


def test_the_session_api_and_sse_keep_the_copies_apart(root: Path, server: Server) -> None:
    listed = httpx.get(server.url + "/api/v1/sessions", timeout=10).json()["sessions"]
    assert sorted(row["ref"] for row in listed) == sorted(key.reference for key in KEYS)
    ambiguous = httpx.get(f"{server.url}/api/v1/sessions/{SID}", timeout=10)
    assert ambiguous.status_code == 400
    assert "matches 3 sessions" in ambiguous.json()["error"]["message"]
    one = httpx.get(f"{server.url}/api/v1/sessions/p1/a2/{SID}", timeout=10)
    assert one.status_code == 200, one.text
    body = one.json()
    assert (body["project"], body["agent"], body["requests"]) == ("p1", "a2", 2)
    trace = httpx.get(f"{server.url}/api/v1/sessions/p2/a1/{SID}/trace", timeout=10)
    assert trace.headers["X-Pentrace-Session"] == SID
    assert trace.content == BASIC.read_bytes()

    records = records_of(BASIC)
    start = KEYS[0].event_id(1)  # replay everything after the first copy's first event
    client = SseClient(
        server.url + "/api/v1/events/sse",
        {"session_id": KEYS[1].reference, "last_event_id": start},
    )
    try:
        connected = client.next()
        assert connected.data["properties"]["projectID"] == "p1"
        frames = client.events(records)
        assert [frame.id for frame in frames] == [
            KEYS[1].event_id(n) for n in range(1, records + 1)
        ]
        assert {frame.data["properties"]["agentID"] for frame in frames} == {"a2"}
    finally:
        client.close()
    bare = httpx.get(server.url + "/api/v1/events/sse", params={"session_id": SID}, timeout=10)
    assert bare.status_code == 400
    assert f"p1/a1/{SID}" in bare.json()["error"]["message"]


def _scaled(source: Path, factor: int, destination: Path) -> Path:
    """A copy of a PenguinHarness trace whose token counts are multiplied by ``factor``."""
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        envelope = json.loads(line)
        payload = envelope["payload"]
        if payload.get("type") == "token_usage":
            for part in ("session", "request"):
                payload[part] = {name: value * factor for name, value in payload[part].items()}
        lines.append(json.dumps(envelope, ensure_ascii=False, separators=(",", ":")))
    destination.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return destination


def test_stats_tokens_by_agent_agree_with_the_raw_files_over_a_corpus_of_shared_ids(
    tmp_path: Path,
) -> None:
    # 18 agents over 3 projects, one session each, all with the same session id: some agents
    # share a name across projects, some traces have no token usage at all.
    data, sources = tmp_path / "data", tmp_path / "sources"
    sources.mkdir()
    fixtures = sorted(FIXTURES.glob("*.jsonl"))
    imported: dict[tuple[str, str], Path] = {}
    for number in range(18):
        project, agent = f"proj{number % 3}", f"agent{number // 2:02d}"
        source = fixtures[number % len(fixtures)]
        if source == BASIC:
            source = _scaled(BASIC, number + 1, sources / f"scaled-{number}.jsonl")
        import_under(data, source, project, agent)
        imported[(project, agent)] = source

    expected: dict[str, Counter[str]] = {}
    for (_, agent), source in imported.items():
        expected.setdefault(agent, Counter()).update(raw_numbers(source))
    rows = cli_json(data, "stats", "tokens", "--by", "agent")["rows"]  # imports index
    found = {
        row["key"]: {name: row[name] for name in ("requests", "usage_records", "total", "output")}
        for row in rows
    }
    assert found == {
        agent: {name: counts[name] for name in ("requests", "usage_records", "total", "output")}
        for agent, counts in expected.items()
    }
    by_session = cli_json(data, "stats", "tokens", "--by", "session")["rows"]
    assert len(by_session) == len(imported)
    for row in by_session:
        project, agent, _ = row["key"].split("/")
        assert row["total"] == raw_numbers(imported[(project, agent)])["total"]


def test_read_models_built_with_bare_session_ids_are_rebuilt_never_extended(root: Path) -> None:
    import sqlite3

    from pentrace.errors import AnalyticsError
    from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
    from pentrace.infrastructure.analytics.runner import AnalyticsRunner

    cli_json(root, "stats", "tokens")  # builds the read model
    # Make it what the earlier code left: no recorded scheme, sessions keyed by bare id.
    with sqlite3.connect(root / "analytics" / "analytics.db") as db:
        db.execute("DELETE FROM analytics_identity")
        db.execute("UPDATE tok_daily SET session_id = ?", (SID,))
    status = {row["name"]: row for row in cli_json(root, "projections", "status")["projections"]}
    assert status["tokens"]["needs_rebuild"] is True
    with pytest.raises(AnalyticsError, match="keys sessions by their id alone") as refused:
        AnalyticsRunner(TokenUse, data_root=root)
    assert refused.value.hint == "rebuild it from the traces: `pentrace projections rebuild tokens`"
    # stats rebuilds it from the traces rather than mixing the two keyings.
    rows = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert sorted(row["key"] for row in rows) == sorted(key.reference for key in KEYS)
    status = {row["name"]: row for row in cli_json(root, "projections", "status")["projections"]}
    assert status["tokens"]["needs_rebuild"] is False
