"""The viewer as an operator first meets it (#31) and the import's bad bodies (#32), over real
HTTP against `pentrace serve` processes: pages count from one and a page past the last shows the
last, newest first, export and import shown disabled without the token, the Session page's one
numbering of requests, its labelled axes, its outline and round names, a tool output written
before its call, and import refusing a tar.gz, a JSON document and hostile bytes with a 400."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.sse_harness import Server
from tests.integration.stats_corpus import build_stats_corpus

TOKEN = "tok-Op7nQ2wE9rT4yU6iO1pA3sD5x"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
_ROW = re.compile(r'<tr data-session="([^"]+)">.*?<td data-label="start \(UTC\)">([^<]*)</td>')


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """75 sessions (two pages of 50), no token."""
    data = tmp_path_factory.mktemp("many") / "data"
    build_stats_corpus(data)
    server = Server(data).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, str]]:
    """The demo session, served without and with a token."""
    data = tmp_path_factory.mktemp("demo") / "data"
    main, _child = record_demo_session(DataRoot(data), datetime(2026, 11, 28, 9, tzinfo=UTC))
    plain = Server(data).start()
    guarded = Server(data, env={"PENTRACE_API_TOKEN": TOKEN}).start(token=TOKEN)
    yield plain, guarded, main
    plain.stop()
    guarded.stop()


def _get(server: Server, path: str, **options: object) -> httpx.Response:
    return httpx.get(server.url + path, timeout=60, **options)  # type: ignore[arg-type]


def _rows(page: str) -> list[tuple[str, str]]:
    return _ROW.findall(page)


def test_pages_count_from_one_and_a_page_past_the_last_shows_the_last(many: Server) -> None:
    first = _get(many, "/web/traces").text
    assert "page 1 of 2" in first
    nxt = re.search(r'rel="next" href="([^"]+)"', first)
    assert nxt is not None
    assert nxt.group(1).endswith("page=2")
    second = _get(many, nxt.group(1).replace("&amp;", "&")).text
    assert "page 2 of 2" in second
    assert "page 3 of 2" not in second
    assert len(_rows(first)) == 50
    assert len(_rows(second)) == 25  # the rest of the 75, not an empty table
    assert not set(_rows(first)) & set(_rows(second))
    assert re.search(r'rel="prev" href="[^"]*page=1"', second)
    past = _get(many, "/web/traces?page=9")
    assert past.status_code == 200
    assert "There is no page 9: showing the last, page 2." in past.text
    assert _rows(past.text) == _rows(second)
    refused = _get(many, "/web/traces?page=0")
    assert refused.status_code == 400
    assert "page" in refused.json()["error"]["message"]


def test_the_newest_sessions_come_first_unless_asked_otherwise(many: Server) -> None:
    newest = [start for _, start in _rows(_get(many, "/web/traces").text)]
    assert newest == sorted(newest, reverse=True)
    assert newest[0].startswith("2026-11-29")
    oldest = [start for _, start in _rows(_get(many, "/web/traces?reverse=false").text)]
    assert oldest == sorted(oldest)
    assert oldest[0].startswith("2026-08-01")
    page = _get(many, "/web/traces").text
    assert '<option value="true" selected>newest (largest) first</option>' in page


def test_without_the_token_exports_and_import_show_disabled_with_how_to_log_in(
    demo: tuple[Server, Server, str],
) -> None:
    plain, guarded, main = demo
    page = _get(plain, "/web/traces").text
    row = re.search(rf'<tr data-session="demo_project/demo_agent/{main}">.*?</tr>', page, re.S)
    assert row is not None
    assert "format=redacted" in row.group(0)  # the redacted export needs no token
    assert "format=jsonl" not in row.group(0)
    assert "format=archive" not in row.group(0)
    assert row.group(0).count('<span class="disabled" aria-disabled="true"') == 2
    assert "<fieldset disabled>" in page
    assert "data-token-note" in page
    assert 'href="/web/login">log in</a>' in page
    logged = _get(guarded, "/web/traces", headers=BEARER).text
    assert "format=jsonl" in logged
    assert "format=archive" in logged
    assert "<fieldset disabled>" not in logged
    assert "data-token-note" not in logged


def _session(server: Server, main: str, **options: object) -> str:
    answer = _get(server, f"/web/sessions/demo_project/demo_agent/{main}", **options)
    assert answer.status_code == 200, answer.text
    return answer.text


def test_the_tokens_chart_numbers_requests_as_the_record_list_does(
    demo: tuple[Server, Server, str],
) -> None:
    plain, _guarded, main = demo
    page = _session(plain, main)
    headings = dict(re.findall(r'<h3 class="round \w+" id="r(\d+)"[^>]*>([^<]+)</h3>', page))
    assert headings  # every round of the demo is in the first window
    chart = page[page.index('id="tokens"') : page.index('id="resume"')]
    # One column per request round, numbered as its heading; each links to that heading.
    ticks = re.findall(
        r'<text class="tick" x="[\d.]+" y="[\d.]+" text-anchor="middle">(\d+)<', chart
    )
    assert ticks == sorted(headings, key=int)
    links = re.findall(r'<a href="[^"]*#r(\d+)">', chart)
    assert links == ticks
    # A request that reported tokens is the same request in the chart and in the list.
    tips = re.findall(r"<title>request (\d+): input ([\d ]+)</title>", chart)
    reported = {n for n, value in tips if value.replace(" ", "") != "0"}
    # ... and in the list, its usage record stands under that request's heading.
    records = page[page.index('id="records"') :]
    under = {
        found.group(1)
        for part in re.split(r'(?=<h3 class="round)', records)
        if (found := re.match(r'<h3 class="round \w+" id="r(\d+)"', part))
        and "tokens: this request" in part
    }
    assert under == reported
    assert reported == {"1", "3", "5"}  # the dropped request 2 and the compaction 4 report none
    for title in ("request", "tokens per request", "cumulative tokens"):
        assert re.search(rf'class="axis-title"[^>]*>{title}</text>', chart), title


def test_round_names_never_say_turn_0_and_the_outline_reaches_every_round(
    demo: tuple[Server, Server, str],
) -> None:
    plain, _guarded, main = demo
    page = _session(plain, main)
    assert "turn 0" not in page
    # The failed first attempt at the second turn is named for that turn.
    assert re.search(r'<h3 class="round dropped" id="r2"[^>]*>turn 2, request 2: dropped', page)
    outline = page[page.index('class="outline"') : page.index('id="records"')]
    targets = re.findall(r'<a href="#r(\d+)">', outline)
    assert targets == re.findall(r'<h3 class="round \w+" id="r(\d+)"', page)
    assert "data-collapse-all" in page
    assert "data-expand-all" in page
    title = re.search(r"<title>([^<]+)</title>", page)
    assert title is not None
    assert not title.group(1).startswith("Session session-")
    assert "<h1>Session session-" not in page
    assert f"<h1>{main[-8:]} " in page


def test_a_window_past_some_rounds_links_the_outline_to_their_windows(
    demo: tuple[Server, Server, str],
) -> None:
    plain, _guarded, main = demo
    page = _session(plain, main, params={"from": "30"})
    outline = page[page.index('class="outline"') : page.index('id="records"')]
    # Round 1 starts before record 30: the outline opens its window.
    assert re.search(r'href="/web/sessions/[^"]+\?from=\d+#r1"', outline)


def test_an_output_written_before_its_call_points_to_the_call(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "data")
    with SessionApplication(root, "p", "a") as app:
        handle = app.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s"
        )
        handle.record_user_input("go")
        handle.begin_request()
        handle.record_tool_call("exec_command", "{}", "call_x")
        handle.record_tool_output("call_x", "the output")
        handle.end_request("completed")
        handle.save()
        sid, shard = handle.session_id, handle.trace_path
    lines = shard.read_bytes().splitlines(keepends=True)
    call = next(n for n, line in enumerate(lines) if b'"tool_call"' in line)
    lines[call], lines[call + 1] = lines[call + 1], lines[call]  # the output first
    shard.write_bytes(b"".join(lines))
    server = Server(root.path).start()
    try:
        page = _get(server, f"/web/sessions/p/a/{sid}").text
    finally:
        server.stop()
    output_at, call_at = call + 1, call + 2  # positions count from 1
    item = re.search(rf'<div class="item \w+" id="p{output_at}".*?</div>', page, re.S)
    assert item is not None
    assert "its call is not in this window" not in page
    assert f'written before its call, <a href="#p{call_at}">#{call_at}</a>' in item.group(0)
    shown = re.search(rf'id="p{call_at}".*?raw record', page, re.S)
    assert shown is not None
    assert "the output" in shown.group(0)  # the call draws its output


def _import(server: Server, body: bytes, name: str = "trace.jsonl") -> httpx.Response:
    return httpx.post(
        f"{server.url}/web/import?project=imp&agent=bad&filename={name}",
        content=body,
        headers=BEARER,
        timeout=60,
    )


def test_import_refuses_what_is_not_a_trace_with_400_and_the_reason(
    demo: tuple[Server, Server, str],
) -> None:
    _plain, guarded, main = demo
    archive = _get(
        guarded, f"/web/export/demo_project/demo_agent/{main}?format=archive", headers=BEARER
    )
    assert archive.content[:2] == b"\x1f\x8b"
    hostile = bytes(range(256)) * 4 + b"\n\xff\xfe\x00{]\n" + b"\x00" * 100
    bodies = {
        "a tar.gz": (archive.content, "session.tar.gz"),
        "a JSON document": (b'{"name": "not a trace", "records": []}\n', "x.jsonl"),
        "hostile bytes": (hostile, "x.jsonl"),
        "a record that is not session_meta first": (
            b'{"timestamp":"2026-11-28T09:00:00Z","type":"event_msg","payload":{"type":"abort"}}\n',
            "x.jsonl",
        ),
        "nothing": (b"", "x.jsonl"),
    }
    for what, (body, name) in bodies.items():
        answer = _import(guarded, body, name)
        assert answer.status_code == 400, (what, answer.status_code, answer.text[:300])
        error = answer.json()["error"]
        assert error["message"].startswith("import: "), (what, error)
        assert re.search(r"line \d+|:\d+:", error["message"]), (what, error)
        assert "pentrace-import-" not in error["message"]  # no temporary folder named
        assert error["hint"]
    assert not [p for p in guarded.root.rglob("*") if "imp" in p.parts and "bad" in p.parts]
