"""The web viewer over real HTTP (a `pentrace serve` process, no browser): every page and asset,
filters, search, export, import, the Host guard, the CSP and redaction by default."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.cli.demo import record_demo_session
from pentrace.errors import SessionExistsError
from pentrace.infrastructure.catalog.listing import resolve_session
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.sessions.fork import fork_session
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.service.edge.headers import HTML_POLICY
from tests.integration.sse_harness import Server
from tests.integration.web_corpus import OTHER_AGENT, OTHER_PROJECT, SECRET, build_web_corpus

TOKEN = "tok-Web7nQ2wE9rT4yU6iO1pA3sD5"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    data = tmp_path_factory.mktemp("web") / "data"
    _root, main, other = build_web_corpus(data)
    result = CliRunner().invoke(app, ["--data-root", str(data), "ledger", "sync"])
    assert result.exit_code == 0, result.output
    return data, main, other


@pytest.fixture(scope="module")
def server(corpus: tuple[Path, str, str]) -> Iterator[Server]:
    running = Server(corpus[0]).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def token_server(corpus: tuple[Path, str, str]) -> Iterator[Server]:
    running = Server(corpus[0], env={"PENTRACE_API_TOKEN": TOKEN}).start(token=TOKEN)
    yield running
    running.stop()


def _get(server: Server, path: str, **options: Any) -> httpx.Response:
    return httpx.get(server.url + path, timeout=30, **options)


def _session_path(main: str) -> str:
    return f"/web/sessions/demo_project/demo_agent/{main}"


def test_every_page_and_asset_answers_with_the_strict_policy(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    main = corpus[1]
    for path in ("/web/traces", "/web/usage?range=all", _session_path(main)):
        answer = _get(server, path)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-security-policy"] == HTML_POLICY
        assert "'unsafe-inline'" not in HTML_POLICY
        assert "<script>" not in answer.text  # the only script is the served file
        assert answer.headers["cache-control"] == "no-store"
    for asset, kind in (("web.css", "text/css"), ("web.js", "javascript")):
        answer = _get(server, f"/web/static/{asset}")
        assert answer.status_code == 200
        assert kind in answer.headers["content-type"]
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_the_host_guard_covers_the_viewer(server: Server, corpus: tuple[Path, str, str]) -> None:
    for path in ("/web/traces", "/web/static/web.js", _session_path(corpus[1])):
        answer = _get(server, path, headers={"Host": "attacker.example"})
        assert answer.status_code == 421, path
    foreign = httpx.post(
        server.url + "/web/import?project=p&agent=a",
        content=b"{}",
        headers={"Origin": "https://attacker.example"},
    )
    assert foreign.status_code == 403


def test_the_traces_page_lists_filters_and_pages_from_the_catalog(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    _data, main, other = corpus
    everything = _get(server, "/web/traces").text
    assert main in everything
    assert other in everything
    assert re.search(r'data-total="3"', everything)
    chosen = _get(server, f"/web/traces?project={OTHER_PROJECT}").text
    assert other in chosen
    assert main not in chosen
    assert 'data-total="1"' in chosen
    by_agent = _get(server, "/web/traces?agent=demo_agent").text
    assert main in by_agent
    assert other not in by_agent
    none = _get(server, "/web/traces?since=2099-01-01").text
    assert 'data-total="0"' in none
    assert _get(server, "/web/traces?page=x").status_code == 400


def test_search_highlights_hits_that_link_into_the_session(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    other = corpus[2]
    found = _get(server, "/web/traces?q=zebrafish").text
    assert "<mark>zebrafish</mark>" in found
    link = re.search(r'href="(/web/sessions/[^"]+)"', found)
    assert link is not None
    assert other in link.group(1)
    assert "#p" in link.group(1)
    assert "No matches" in _get(server, "/web/traces?q=nothingmatchesthis").text


def test_pages_are_redacted_and_render_markdown_safely(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    other = corpus[2]
    page = _get(server, f"/web/sessions/{OTHER_PROJECT}/{OTHER_AGENT}/{other}").text
    assert SECRET not in page
    assert "<strong>review</strong>" in page
    assert "<code>diff</code>" in page
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)" in page
    record = _get(server, f"/web/sessions/{OTHER_PROJECT}/{OTHER_AGENT}/{other}/records/2")
    assert record.json()["redacted"] is True
    assert SECRET not in record.text
    assert SECRET not in _get(server, "/web/traces?q=zebrafish").text


def test_the_session_page_marks_rounds_and_pairs_tool_calls(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    page = _get(server, _session_path(corpus[1])).text
    assert 'class="round dropped"' in page
    assert 'class="round committed"' in page
    assert "provider overloaded" in page  # the retried request's error
    assert 'class="approval deny"' in page
    assert "compaction begins" in page
    assert "shard 002 begins" in page
    assert 'href="/web/s/' in page  # the subagent link
    assert 'id="resume"' in page
    assert "carry-over" in page
    assert "<svg" in page
    assert "cumulative tokens" in page
    assert 'data-live="/api/v1/events/sse?session_id=demo_project%2Fdemo_agent%2F' in page


def test_a_window_of_records_loads_as_a_fragment(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    fragment = _get(server, _session_path(corpus[1]) + "?from=10&fragment=1").text
    assert "<html" not in fragment
    positions = [int(n) for n in re.findall(r'id="p(\d+)"', fragment)]
    assert positions
    assert min(positions) >= 10


def test_the_redacted_export_is_the_cli_redacted_export(
    server: Server, corpus: tuple[Path, str, str], tmp_path: Path
) -> None:
    data, main, _ = corpus
    answer = _get(server, f"/web/export/demo_project/demo_agent/{main}?format=redacted")
    assert answer.status_code == 200
    out = tmp_path / "cli.jsonl"
    result = CliRunner().invoke(
        app, ["--data-root", str(data), "export", main, "--redacted", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert answer.content == out.read_bytes()


def test_verbatim_exports_need_the_token(
    server: Server, token_server: Server, corpus: tuple[Path, str, str]
) -> None:
    data, main, _ = corpus
    for kind in ("jsonl", "archive"):
        refused = _get(server, f"/web/export/demo_project/demo_agent/{main}?format={kind}")
        assert refused.status_code == 403
        assert "bearer token" in refused.json()["error"]["message"]
    verbatim = _get(
        token_server, f"/web/export/demo_project/demo_agent/{main}?format=jsonl", headers=BEARER
    )
    shard = DataRoot(data).find_shards("demo_project", "demo_agent", main)[-1].path
    assert verbatim.content == shard.read_bytes()
    archive = _get(
        token_server, f"/web/export/demo_project/demo_agent/{main}?format=archive", headers=BEARER
    )
    assert archive.content[:2] == b"\x1f\x8b"


def test_import_needs_the_token_creates_a_session_and_refuses_an_existing_id(
    server: Server, token_server: Server, corpus: tuple[Path, str, str], tmp_path: Path
) -> None:
    data, main, _ = corpus
    shard = DataRoot(data).find_shards("demo_project", "demo_agent", main)[-1].path
    body = shard.read_bytes()
    url = "/web/import?project=imported&agent=copy&filename=trace.jsonl"
    assert httpx.post(server.url + url, content=body).status_code == 403
    made = httpx.post(token_server.url + url, content=body, headers=BEARER)
    assert made.status_code == 201, made.text
    assert made.json()["ref"] == f"imported/copy/{main}"
    assert DataRoot(data).find_shards("imported", "copy", main)[0].path.read_bytes() == body
    again = httpx.post(token_server.url + url, content=body, headers=BEARER)
    assert again.status_code == 400
    (tmp_path / "trace.jsonl").write_bytes(body)
    cli = CliRunner().invoke(
        app,
        ["--data-root", str(data), "import", str(tmp_path / "trace.jsonl"), "-p", "imported",
         "-a", "copy"],
    )  # fmt: skip
    assert isinstance(cli.exception, SessionExistsError)
    error = again.json()["error"]
    # The CLI's message and hint; the CLI names files by host path, the server relative
    # to what the user knows (the uploaded file's name, the data root).
    expected = cli.exception.message.replace(str(tmp_path) + "/", "").replace(str(data) + "/", "")
    assert error["message"] == expected
    assert error["hint"] == cli.exception.hint
    assert error["message"].startswith(f"cannot import trace.jsonl: session {main} already exists")


def _stats(data: Path, *args: str) -> Any:
    result = CliRunner().invoke(app, ["--data-root", str(data), "stats", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_usage_page_agrees_with_pentrace_stats(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    data = corpus[0]
    page = _get(server, "/web/usage?range=all").text
    card = re.search(
        r'data-card="all time" data-requests="(\d+)" data-tokens="(\d+)" data-cost="([0-9.]+)"',
        page,
    )
    assert card is not None
    requests = _stats(data, "requests")["requests"]
    tokens = _stats(data, "tokens")["rows"]
    cost = _stats(data, "cost")["rows"]
    assert int(card.group(1)) == sum(requests.values()) > 0
    assert int(card.group(2)) == sum(row["total"] for row in tokens) > 0
    assert float(card.group(3)) == pytest.approx(sum(row["cost"] for row in cost), abs=1e-6)
    assert "Tokens per" in page
    assert "tool failure rate" in page


def test_the_usage_agent_filter_changes_the_figures(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    def all_time(query: str) -> int:
        page = _get(server, "/web/usage?range=all" + query).text
        found = re.search(r'data-card="all time" data-requests="(\d+)"', page)
        assert found is not None
        return int(found.group(1))

    both, demo, other = (
        all_time(""),
        all_time("&agent=demo_agent"),
        all_time(f"&agent={OTHER_AGENT}"),
    )
    assert demo > 0
    assert other > 0
    assert demo + other == both


def test_a_browser_logs_in_with_the_token_and_gets_an_http_only_cookie(
    token_server: Server, corpus: tuple[Path, str, str]
) -> None:
    main = corpus[1]
    sent_away = _get(token_server, "/web/traces")
    assert sent_away.status_code == 303
    assert sent_away.headers["location"] == "/web/login"
    assert _get(token_server, "/api/v1/sessions").status_code == 401  # the API stays JSON
    assert _get(token_server, "/web/login").status_code == 200
    assert _get(token_server, "/web/static/web.css").status_code == 200
    wrong = httpx.post(token_server.url + "/web/login", data={"token": "x" * 30})
    assert wrong.status_code == 401
    assert "set-cookie" not in wrong.headers
    right = httpx.post(token_server.url + "/web/login", data={"token": TOKEN})
    assert right.status_code == 303
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert TOKEN not in cookie  # an HMAC of the token, never the token
    value = right.cookies["pentrace_auth"]
    export = f"/web/export/demo_project/demo_agent/{main}?format=jsonl"
    assert _get(token_server, export, cookies={"pentrace_auth": value}).status_code == 200
    forged = _get(token_server, export, cookies={"pentrace_auth": "0" * 64})
    assert forged.status_code == 303


def test_a_login_posted_from_another_site_is_refused(token_server: Server) -> None:
    answer = httpx.post(
        token_server.url + "/web/login",
        data={"token": TOKEN},
        headers={"Origin": "https://attacker.example"},
    )
    assert answer.status_code == 403
    assert "set-cookie" not in answer.headers


def test_the_session_tokens_agree_with_the_session_api(
    server: Server, corpus: tuple[Path, str, str]
) -> None:
    main = corpus[1]
    page = _get(server, _session_path(main)).text
    shown = re.search(r'data-session-tokens="(\d+)"', page)
    assert shown is not None
    detail = _get(server, f"/api/v1/sessions/demo_project/demo_agent/{main}").json()
    assert int(shown.group(1)) == detail["tokens"] > 0
    assert page.count('<rect class="s0"') >= 1  # a bar per request, input tokens first


def test_a_model_switch_and_a_fork_link_back_to_their_source(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "data")
    main, _child = record_demo_session(root, datetime(2026, 11, 28, 9, 0, tzinfo=UTC))
    with SessionApplication(root, "demo_project", "demo_agent") as application:
        switched = application.switch_model(
            main,
            provider="anthropic",
            model_id="claude-opus-5",
            model_context_window=200_000,
            system_prompt="You are a careful coding agent.",
            text="Carry on with the tests.",
        ).session_id
    forked = fork_session(root, resolve_session(root, main), at_turn=1).session_id
    server = Server(root.path).start()
    try:
        switch_page = _get(server, f"/web/sessions/demo_project/demo_agent/{switched}").text
        fork_page = _get(server, f"/web/sessions/demo_project/demo_agent/{forked}").text
        source = _get(server, f"/web/s/{main}", follow_redirects=False)
    finally:
        server.stop()
    assert (
        f'model switch from deepseek/deepseek-v4-pro; source session <a href="/web/s/{main}">'
        in (switch_page)
    )
    assert "Carry on with the tests." in switch_page
    assert "[model_switch_from]" not in switch_page
    assert f'forked from <a href="/web/s/{main}">' in fork_page
    assert source.status_code == 303
    assert source.headers["location"] == _session_path(main)
