"""Full-text search: real traces, a real FTS5 index, the CLI in process and as a subprocess."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.errors import SearchQueryError
from pentrace.infrastructure.search.index import SearchIndex, SearchQuery, search_index_path
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import assert_clean_error, cli_ok, run_pentrace, text_turn

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
OTHER = "session-2026-07-20-09-00-00-0badcafe"
OPENAI_KEY = "sk-proj-Zq8vN3xL0pR7tY2wK9mB4cF6hJ1sD5gA"
GITHUB_TOKEN = "ghp_Q7w8E9r0T1y2U3i4O5p6A7s8D9f0G1h2J3k4"


def session() -> list[pt.Command]:
    return [
        pt.StartSession(),
        pt.UserInput("please deploy the payments service"),
        pt.BeginRequest(),
        pt.Thinking("the cluster needs a rolling restart"),
        pt.ToolCall("call_1", "exec_command", '{"cmd":"kubectl rollout restart deploy/payments"}'),
        pt.ToolOutput("call_1", "deployment.apps/payments restarted"),
        pt.AssistantText("restarted the payments deployment"),
        pt.EndRequest(),
        *text_turn("now check the invoices queue", "the invoices queue is empty"),
    ]


def write(root: Path, commands: list[pt.Command], sid: str = SID, agent: str = "coder") -> None:
    pt.write_trace(root, commands, agent=agent, session_id=sid)


def find(root: Path, text: str, **options: Any) -> list[Any]:
    with SearchIndex(DataRoot(root)) as index:
        index.refresh()
        return index.search(SearchQuery(text, **options))


def cli(root: Path, *args: str) -> Any:
    return json.loads(cli_ok(root, "search", *args, "--json").output)


def test_text_tool_calls_and_outputs_are_found_with_turn_position_and_line(tmp_path: Path) -> None:
    write(tmp_path, session())
    hits = {hit["kind"]: hit for hit in cli(tmp_path, "payments")["hits"]}
    assert set(hits) == {"text", "tool_call", "tool_output"}
    call = hits["tool_call"]
    assert (call["session_id"], call["turn"], call["position"], call["line"]) == (SID, 1, 6, 6)
    # Plain text in JSON (#19); the match is given as offsets into the snippet.
    assert call["snippet"] == 'exec_command {"cmd":"kubectl rollout restart deploy/payments"}'
    assert [call["snippet"][a:b] for a, b in call["highlights"]] == ["payments"]
    assert call["path"].endswith(f"{SID}_001.jsonl")
    [later] = cli(tmp_path, "invoices", "--kind", "text", "--limit", "1", "--sort", "recent")[
        "hits"
    ]
    assert (later["turn"], later["position"], later["role"]) == (2, 12, "assistant")


def test_thinking_is_searched_only_when_asked(tmp_path: Path) -> None:
    write(tmp_path, session())
    assert find(tmp_path, "rolling") == []
    [hit] = find(tmp_path, "rolling", thinking=True)
    assert (hit.kind, hit.position) == ("thinking", 5)


def test_filters_narrow_by_agent_project_kind_and_time(tmp_path: Path) -> None:
    write(tmp_path, session())
    write(tmp_path, session(), sid=OTHER, agent="reviewer")
    assert {h.session_id for h in find(tmp_path, "payments")} == {SID, OTHER}
    assert {h.session_id for h in find(tmp_path, "payments", agent="reviewer")} == {OTHER}
    assert find(tmp_path, "payments", project="elsewhere") == []
    assert {h.kind for h in find(tmp_path, "payments", kinds=("tool_output",))} == {"tool_output"}
    only = cli(tmp_path, "payments", "--session", "0bad")["hits"]
    assert {hit["session_id"] for hit in only} == {OTHER}
    # Both sessions' records carry the fixed test clock (2026-07-18T03:10:22.531Z + n ms).
    after_first_request = datetime(2026, 7, 18, 3, 10, 22, 539000, tzinfo=UTC)
    late = find(tmp_path, "invoices OR payments", since=after_first_request)
    assert {h.position for h in late} == {10, 12}
    early = find(tmp_path, "invoices OR payments", until=after_first_request)
    assert {h.position for h in early} == {3, 6, 7, 8}


def test_the_index_never_holds_a_secret(tmp_path: Path) -> None:
    commands: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput(f"use the key {OPENAI_KEY} to call the api"),
        pt.BeginRequest(),
        pt.ToolCall(
            "call_1", "exec_command", json.dumps({"cmd": "gh auth", "token": GITHUB_TOKEN})
        ),
        pt.ToolOutput("call_1", f"logged in with {GITHUB_TOKEN}"),
        pt.EndRequest(),
    ]
    write(tmp_path, commands)
    assert find(tmp_path, f'"{OPENAI_KEY}"') == []
    assert find(tmp_path, f'"{GITHUB_TOKEN}"') == []
    assert len(find(tmp_path, "redacted")) == 3
    stored = b"".join(
        p.read_bytes() for p in search_index_path(DataRoot(tmp_path)).parent.iterdir()
    )
    assert OPENAI_KEY.encode() not in stored
    assert GITHUB_TOKEN.encode() not in stored
    assert b"logged in with" in stored


def _documents(root: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(search_index_path(DataRoot(root))) as conn:
        return conn.execute(
            "SELECT d.rowid & 4294967295, s.session_id, d.body, d.kind, d.role, d.turn, d.time, "
            "d.shard, d.line FROM docs d JOIN sessions s ON s.id = d.rowid >> 32 "
            "ORDER BY s.session_id, d.rowid"
        ).fetchall()


def test_incremental_refreshes_equal_a_rebuild(tmp_path: Path) -> None:
    commands = [
        *session(),
        pt.CompactionBegin(),
        pt.CompactionEnd(),
        pt.UserInput("after the payments"),
    ]
    shards = pt.render_shards(commands, session_id=SID)
    assert len(shards) == 2
    first, second = shards
    root = DataRoot(tmp_path)
    index = SearchIndex(root)
    # Grow the session the way a writer does: appends, a torn half line, then a new shard.
    path = pt.write_shards(tmp_path, "p", "a", SID, [first[:5]])[0]
    index.refresh()
    with path.open("ab") as handle:
        handle.write(b"\n".join(first[5:9]) + b"\n" + first[9][:20])
    index.refresh()
    with path.open("ab") as handle:
        handle.write(first[9][20:] + b"\n" + b"\n".join(first[10:]) + b"\n")
    report = index.refresh()
    assert (report.updated, report.reset) == (1, 0)
    pt.write_shards(tmp_path, "p", "a", SID, [first, second])
    write(tmp_path, session(), sid=OTHER)
    index.refresh()
    incremental = _documents(tmp_path)
    index.rebuild()
    index.close()
    assert _documents(tmp_path) == incremental
    assert len({row[1] for row in incremental}) == 2
    rotated = [row for row in incremental if row[2] == "after the payments"]
    assert [(row[0], row[3], row[5], row[7], row[8]) for row in rotated] == [(18, "text", 3, 2, 3)]


def test_a_rewritten_trace_is_reindexed_and_a_deleted_one_dropped(tmp_path: Path) -> None:
    write(tmp_path, session())
    assert len(find(tmp_path, "payments")) == 4
    write(tmp_path, [pt.StartSession(), pt.UserInput("only invoices now")])
    assert find(tmp_path, "payments") == []
    assert len(find(tmp_path, "invoices")) == 1
    for shard in tmp_path.rglob("*.jsonl"):
        shard.unlink()
    assert find(tmp_path, "invoices") == []


def test_bad_fts_syntax_is_a_clean_error_with_a_hint(tmp_path: Path) -> None:
    write(tmp_path, session())
    with pytest.raises(SearchQueryError, match="not valid FTS5 syntax"):
        find(tmp_path, '"unclosed')
    done = run_pentrace(tmp_path, "search", "a:b")
    assert_clean_error(done, 2, "the search query is not valid FTS5 syntax", "hint: quote words")


def test_a_corrupt_index_is_rebuilt_not_a_crash(tmp_path: Path) -> None:
    write(tmp_path, session())
    path = search_index_path(DataRoot(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    assert len(find(tmp_path, "payments")) == 4


def test_rank_puts_the_best_match_first_among_the_newest_window(tmp_path: Path) -> None:
    commands: list[pt.Command] = [
        pt.StartSession(),
        *text_turn(
            "ledger ledger ledger compaction",
            "one ledger mention in a long sentence about many other things",
        ),
    ]
    write(tmp_path, commands)
    ranked = find(tmp_path, "ledger")
    assert [hit.position for hit in ranked] == [3, 5]
    assert [hit.position for hit in find(tmp_path, "ledger", order="recent")] == [5, 3]
    assert [hit.position for hit in find(tmp_path, "ledger", limit=1)] == [3]
    # Only the newest `window` matches are scored: with a window of one, the newest wins.
    assert [hit.position for hit in find(tmp_path, "ledger", limit=1, window=1)] == [5]
