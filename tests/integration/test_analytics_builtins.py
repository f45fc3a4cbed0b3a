"""The built-in projections on a hand-written trace: every counter the issue names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.analytics.runner import open_ledger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.testing.files import write_shards
from pentrace.testing.render import envelope_line
from tests.support import cli_json

PARENT = "session-2026-11-28-09-00-00-0000aaaa"
CHILD = "session-2026-11-28-09-00-00-0000bbbb"


def _lines(session: str, model: str, body: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    meta = {"session_id": session, "provider": "p", "model_id": model, "workspace": "/w"}
    rows = [("session_meta", meta), *body]
    return [
        envelope_line(f"2026-11-28T09:00:{second:02d}.000Z", kind, payload)
        for second, (kind, payload) in enumerate(rows)
    ]


def _call(call_id: str, name: str) -> tuple[str, dict[str, Any]]:
    body = {"type": "tool_call", "role": "assistant", "name": name, "arguments": "{}"}
    return ("model_msg", {**body, "tool_call_id": call_id})


def _output(call_id: str, text: str, stop: str | None = None) -> tuple[str, dict[str, Any]]:
    payload = {"type": "tool_call_output", "role": "user", "output": text, "tool_call_id": call_id}
    return ("model_msg", payload if stop is None else {**payload, "stop_reason": stop})


def _event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return ("event_msg", {"type": kind, **fields})


def _usage(total: int) -> tuple[str, dict[str, Any]]:
    counts = {"cache_read": 0, "cache_write": 0, "output": 1, "total": total}
    return _event("token_usage", session=counts, request=counts)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("builtins")
    parent = [
        _event("request_begin"),
        _call("a", "sh"), _event("approval_decision", decision="allow", tool_call_id="a"),
        _output("a", "x\n[output truncated: exceeded 16000 chars]\n[output archived: /t]"),
        _call("b", "sh"), _event("approval_decision", decision="forbidden", tool_call_id="b"),
        _output("b", "late", "timeout"), _output("b", "second answer", "failed"),
        _call("c", "web"), _output("c", "", "aborted"),
        _call("d", "web"),  # never answered
        _event("subagent", session_id=CHILD),
        _event("request_end", status="failed", attempt=1), _usage(100),
        _event("request_begin"), _event("request_end", status="completed", attempt=2), _usage(50),
        _event("compaction_begin", reason="context", mode="summarize", context=9000, turns=2),
        _event("request_begin"), _event("request_end", status="completed"), _usage(30),
        _event("compaction_end", reason="context", mode="summarize", status="completed"),
        _event("goal_finished", outcome="blocked", rounds=3, tokens_used=180),
    ]  # fmt: skip
    write_shards(data, "proj", "agent", PARENT, [_lines(PARENT, "m1", parent)])
    # The second shard switches to m2; its tool call counts under m2.
    switched = [*_lines(PARENT, "m2", [])[:1]] + [
        envelope_line(f"2026-11-28T09:01:{time}Z", *line)
        for time, line in (
            ("00.000", _event("request_begin")),
            ("00.200", _call("e", "grep")),
            ("00.400", _output("e", "", "failed")),
            ("01.000", _event("request_end", status="completed")),
            ("02.000", _usage(7)),
        )
    ]
    write_shards(data, "proj", "agent", PARENT, [_lines(PARENT, "m1", parent), switched])
    child = [_event("request_begin"), _event("request_end", status="completed"), _usage(20)]
    write_shards(data, "proj", "helper", CHILD, [_lines(CHILD, "m1", child)])
    ledger = open_ledger(data)
    try:
        sync(ledger, data)
    finally:
        ledger.close()
    return data


def stats(root: Path, *args: str) -> Any:
    return cli_json(root, "stats", *args)


def test_tool_counters_truncations_unanswered_calls_and_approvals(root: Path) -> None:
    document = stats(root, "tools")
    tools = {row["tool"]: row for row in document["tools"]}
    assert tools["sh"] | {"failure_rate": 0} == {
        "tool": "sh", "calls": 2, "failures": 1, "aborts": 0, "timeouts": 1,
        "truncations": 1, "unanswered": 0, "failure_rate": 0,
    }  # fmt: skip
    assert (tools["web"]["calls"], tools["web"]["aborts"], tools["web"]["unanswered"]) == (2, 1, 1)
    assert document["approvals"] == {"allow": 1, "forbidden": 1}


def test_tool_calls_count_under_the_sessions_model_at_the_time_of_the_call(root: Path) -> None:
    rows = stats(root, "tools", "--by", "model")["rows"]
    found = {(row["key"], row["tool"]): (row["calls"], row["failures"]) for row in rows}
    assert found == {("p/m1", "sh"): (2, 1), ("p/m1", "web"): (2, 1), ("p/m2", "grep"): (1, 1)}
    assert {row["tool"]: row["calls"] for row in stats(root, "tools")["tools"]} == {
        "grep": 1,
        "sh": 2,
        "web": 2,
    }


def test_requests_retries_compactions_goals_and_turns(root: Path) -> None:
    document = stats(root, "requests")
    assert document["requests"] == {"completed": 4, "failed": 1}
    assert document["retries"] == 1
    assert document["compactions"] == [
        {"mode": "summarize", "outcome": "completed", "count": 1,
         "avg_context": 9000.0, "max_context": 9000},
    ]  # fmt: skip
    assert document["goals"] == {"blocked": 1}
    rows = stats(root, "sessions", "--by", "session")["rows"]
    # Sessions are keyed by their reference, project/agent/session-id (ADR 0023).
    sessions = {row["key"].rpartition("/")[2]: row for row in rows}
    # The request inside the compaction is not a turn (resume's rule).
    assert (sessions[PARENT]["turns"], sessions[PARENT]["requests"]) == (2, 4)
    assert sessions[PARENT]["model_switches"] == 1
    # First record to the last record (its token_usage), as `show` counts it (session_numbers).
    assert sessions[PARENT]["max_duration_s"] == 62.0


def test_tokens_follow_the_model_switch_and_the_subagent_tree(root: Path) -> None:
    by_model = {row["key"]: row["total"] for row in stats(root, "tokens", "--by", "model")["rows"]}
    # The model's name is provider/model_id, as `sessions list` shows it (session_numbers).
    assert by_model == {"p/m1": 200, "p/m2": 7}
    by_agent = {row["key"]: row["total"] for row in stats(root, "tokens", "--by", "agent")["rows"]}
    assert by_agent == {"agent": 187, "helper": 20}
    [tree] = stats(root, "tree")["trees"]
    # The child runs under another agent: the pointer's bare id still finds it.
    assert (tree["session_id"], tree["tokens"], tree["subtree_tokens"]) == (
        f"proj/agent/{PARENT}",
        187,
        207,
    )
    assert [child["session_id"] for child in tree["children"]] == [f"proj/helper/{CHILD}"]
