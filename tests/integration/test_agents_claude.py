"""Claude Code sessions imported into a data root (issue #28): mapping, usage, idempotence.

Each test writes a small Claude Code store (``tests/foreign_logs.py``), imports
it with ``pentrace import --from claude-code`` and reads the result back through
the same commands a user runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import (
    ClaudeLog,
    claude_turn,
    jsonl,
    kept_rows,
    reference_folder,
    source_lines,
    text,
    thinking,
    tool_use,
    trace_lines,
)
from tests.support import cli, cli_json, cli_ok

pytestmark = pytest.mark.usefixtures("own_stores")

SID = "0b5a1c2d-0000-4000-8000-000000000001"
PROJECT = "home-u-work-app"


def _store(tmp_path: Path) -> Path:
    return tmp_path / "claude" / "projects" / "-home-u-work-app"


def _import(root: Path, *paths: Path) -> dict[str, Any]:
    return cli_json(root, "import", "--from", "claude-code", *map(str, paths))  # type: ignore[no-any-return]


def _session_records(root: Path, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(root.glob(f"*/agents/claude-code/traces/*/{sid}_*.jsonl")):
        out.extend(json.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return out


def _kinds(records: list[dict[str, Any]]) -> list[str]:
    return [
        record["payload"].get("type", "session_meta")
        if record["type"] != "session_meta"
        else "session_meta"
        for record in records
    ]


def test_a_session_becomes_a_pentrace_session_named_by_its_id_under_its_workspace(
    tmp_path: Path,
) -> None:
    log = ClaudeLog(SID)
    claude_turn(log, 1, calls=2)
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    report = _import(root, path.parent.parent.parent)

    assert report["new_sessions"] == [f"{PROJECT}/claude-code/{SID}"]
    [listed] = cli_json(root, "sessions", "list")["sessions"]
    assert (listed["project"], listed["agent"], listed["session_id"]) == (
        PROJECT,
        "claude-code",
        SID,
    )
    assert listed["model_name"] == "anthropic/claude-sonnet-4-20250514"
    records = _session_records(root, SID)
    assert _kinds(records) == [
        "session_meta",
        "text",  # the prompt, before its request
        "session_meta",  # the model, learnt from the first answer
        "request_begin",
        "text",
        "token_usage",
        "request_end",  # an answer row ending in text ends its request
        "request_begin",  # the same message's tool rows: its tool calls
        "tool_call",
        "token_usage",
        "tool_call",
        "token_usage",
        "tool_call_output",
        "tool_call_output",
        "request_end",  # every call answered
        "request_begin",
        "text",
        "token_usage",
        "request_end",  # end_turn
    ]
    assert records[0]["payload"]["workspace"] == "/home/u/work/app"
    prompt = records[1]["payload"]
    assert (prompt["role"], prompt["text"], prompt["sender"]) == ("user", "task 1", "user")
    call = records[8]["payload"]
    assert (call["name"], json.loads(call["arguments"])) == ("Bash", {"command": "echo 0"})
    assert records[12]["payload"]["tool_call_id"] == call["tool_call_id"]


def test_every_source_line_is_kept_verbatim_exactly_once(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    claude_turn(log, 1)
    log.other({"type": "summary", "summary": "Hello é \u2028 world", "leafUuid": "x"})
    log.other({"type": "file-history-snapshot", "messageId": "m", "snapshot": {"a": [1, 2.50]}})
    claude_turn(log, 2)
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    _import(root, path)

    assert sorted(kept_rows(root)) == sorted(path.read_bytes().splitlines())
    unmapped = [r for r in trace_lines(root) if r["payload"].get("type") == "foreign_record"]
    assert [r["payload"]["record_type"] for r in unmapped] == ["summary", "file-history-snapshot"]


def test_usage_counts_each_message_and_request_once_at_its_largest(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    log.prompt("go")
    # One message streamed as three rows, usage growing; then a replay of its first row.
    for output in (5, 40, 90):
        log.answer([text("x")], message_id="msg_1", request_id="req_1", usage=(3, output, 100, 20))
    log.answer([text("x")], message_id="msg_1", request_id="req_1", usage=(3, 5, 100, 20))
    # No requestId: counted once per message id.
    log.answer([text("y")], message_id="msg_2", request_id=None, usage=(1, 2, 0, 0))
    log.answer([text("y")], message_id="msg_2", request_id=None, usage=(1, 4, 0, 0))
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    _import(root, path)

    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert (row["input"], row["output"], row["cache_read"], row["cache_write"]) == (
        4,
        94,
        100,
        20,
    )


def test_a_second_import_adds_only_what_was_appended_to_the_same_session(
    tmp_path: Path,
) -> None:
    log = ClaudeLog(SID)
    claude_turn(log, 1)
    store = _store(tmp_path)
    path = log.write(store)
    root = tmp_path / "data"
    first = _import(root, path)
    again = _import(root, path)
    assert again["records"] == 0
    assert again["new_sessions"] == []

    claude_turn(log, 2, calls=3)
    log.write(store)
    appended = _import(root, path)

    assert appended["new_sessions"] == []
    assert appended["records"] > 0
    assert [s["session_id"] for s in cli_json(root, "sessions", "list")["sessions"]] == [SID]
    one_go = tmp_path / "one-go"
    _import(one_go, path)
    assert _session_records(root, SID) == _session_records(one_go, SID)
    assert first["records"] + appended["records"] == len(_session_records(one_go, SID))


def test_a_torn_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    claude_turn(log, 1)
    store = _store(tmp_path)
    path = log.write(store)
    whole = path.read_bytes()
    claude_turn(log, 2)
    more = log.data()[len(whole) :]
    root = tmp_path / "data"
    path.write_bytes(whole + more[:25])

    _import(root, path)
    assert kept_rows(root)
    assert sorted(kept_rows(root)) == sorted(whole.splitlines())

    path.write_bytes(whole + more)
    _import(root, path)
    assert sorted(kept_rows(root)) == sorted((whole + more).splitlines())


def test_inline_sidechains_and_subagent_files_become_child_sessions_linked_both_ways(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    log = ClaudeLog(SID)
    log.prompt("delegate")
    log.answer([tool_use("toolu_task", "Task", {"prompt": "look"})], message_id="msg_p",
               request_id="req_p", usage=(1, 1, 1, 1))  # fmt: skip
    parent_tip = log.tip
    # The Task subagent's rows, inline, on a sidechain rooted at a null parent.
    log.prompt("look", parent=False, isSidechain=True)
    log.answer([text("looked")], message_id="msg_side", request_id="req_side",
               usage=(5, 6, 7, 8), isSidechain=True, stop_reason="end_turn")  # fmt: skip
    log.tip = parent_tip
    log.result("toolu_task", "found it", toolUseResult={"agentId": "abc123"})
    log.write(store)
    child = ClaudeLog("agent-abc123")
    child.prompt("look deeper", isSidechain=True, sessionId=SID)
    child.answer([text("deep")], message_id="msg_c", request_id="req_c", usage=(1, 2, 3, 4),
                 isSidechain=True, stop_reason="end_turn")  # fmt: skip
    child.write(store / SID / "subagents")
    root = tmp_path / "data"

    _import(root, store.parent.parent)

    sessions = {s["session_id"]: s for s in cli_json(root, "sessions", "list")["sessions"]}
    side = next(name for name in sessions if name.startswith("sidechain-"))
    assert set(sessions) == {SID, side, "agent-abc123"}
    parent = _session_records(root, SID)
    pointers = [
        r["payload"]["session_id"] for r in parent if r["payload"].get("type") == "subagent"
    ]
    assert pointers == [side, "agent-abc123"]
    for name in (side, "agent-abc123"):
        meta = _session_records(root, name)[0]["payload"]
        assert (meta["source"], meta["parent_session_id"]) == ("subagent", SID)
    shown = cli_ok(root, "show", SID).stdout
    assert f"subagents    {side}, agent-abc123" in shown
    side_usage = {r["key"]: r for r in cli_json(root, "stats", "tokens", "--by", "session")["rows"]}
    assert side_usage[f"{PROJECT}/claude-code/{side}"]["output"] == 6


def test_a_rewind_is_a_fork_not_a_jumble(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    first = log.prompt("first try")
    log.answer([text("answer one")], message_id="msg_1", request_id="req_1",
               stop_reason="end_turn")  # fmt: skip
    log.prompt("follow-up on one")
    log.answer([text("answer two")], message_id="msg_2", request_id="req_2",
               stop_reason="end_turn")  # fmt: skip
    # The user rewinds to the first prompt and asks again from there.
    rewound = log.prompt("second try", parent=log.rows[0]["parentUuid"])
    log.answer([text("answer three")], message_id="msg_3", request_id="req_3",
               stop_reason="end_turn")  # fmt: skip
    assert first != rewound
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    _import(root, path)

    texts = [r["payload"]["text"] for r in _session_records(root, SID) if r["payload"].get("text")]
    assert texts == ["first try", "answer one", "follow-up on one", "answer two"]
    [fork] = [s["session_id"] for s in cli_json(root, "sessions", "list")["sessions"]
              if s["session_id"] != SID]  # fmt: skip
    records = _session_records(root, fork)
    # A rewind to the very start has no parent row: the fork starts at position 0.
    assert records[0]["payload"]["forked_from"] == {"session_id": SID, "uuid": None, "position": 0}
    assert [r["payload"]["text"] for r in records if "text" in r["payload"]] == [
        "second try",
        "answer three",
    ]


def test_a_rewind_to_an_answer_forks_there(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    log.prompt("first")
    answer = log.answer([text("answer one")], message_id="msg_1", request_id="req_1",
                        stop_reason="end_turn")  # fmt: skip
    log.prompt("follow-up A")
    log.answer([text("answer A")], message_id="msg_2", request_id="req_2", stop_reason="end_turn")
    log.prompt("follow-up B", parent=answer)
    log.answer([text("answer B")], message_id="msg_3", request_id="req_3", stop_reason="end_turn")
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    _import(root, path)

    texts = [r["payload"]["text"] for r in _session_records(root, SID) if "text" in r["payload"]]
    assert texts == ["first", "answer one", "follow-up A", "answer A"]
    [fork] = [s["session_id"] for s in cli_json(root, "sessions", "list")["sessions"]
              if s["session_id"] != SID]  # fmt: skip
    records = _session_records(root, fork)
    assert records[0]["payload"]["forked_from"]["session_id"] == SID
    assert records[0]["payload"]["forked_from"]["uuid"] == answer
    assert [r["payload"]["text"] for r in records if "text" in r["payload"]] == [
        "follow-up B",
        "answer B",
    ]


def test_compaction_api_errors_thinking_and_tool_errors_are_mapped(tmp_path: Path) -> None:
    log = ClaudeLog(SID, version="2.1.10")
    log.prompt("start")
    log.answer([thinking("hmm", "sig-9")], message_id="msg_1", request_id="req_1")
    log.answer([tool_use("toolu_1", "Edit", {"file": "a"})], message_id="msg_1",
               request_id="req_1")  # fmt: skip
    log.result("toolu_1", "permission denied", is_error=True)
    log.system("api_error", level="error", error={"status": 529}, retryInMs=500,
               retryAttempt=1, maxRetries=10)  # fmt: skip
    log.system("compact_boundary", content="Conversation compacted",
               compactMetadata={"trigger": "auto", "preTokens": 150000})  # fmt: skip
    log.prompt("This session is being continued...", isCompactSummary=True)
    log.answer([text("API Error: overloaded")], message_id="msg_2", request_id="req_2",
               model="<synthetic>", isApiErrorMessage=True)  # fmt: skip
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    _import(root, path)

    records = _session_records(root, SID)
    by_type = {r["payload"].get("type"): r["payload"] for r in records}
    assert by_type["thinking"]["fidelity"] == {"signature": "sig-9"}
    assert by_type["tool_call_output"]["stop_reason"] == "failed"
    failed = [r["payload"] for r in records if r["payload"].get("status") == "failed"]
    assert failed[0]["attempt"] == 1
    assert failed[0]["retry_in_ms"] == 500
    assert failed[-1]["error_message"] == "API Error: overloaded"
    assert by_type["compaction_begin"]["context"] == 150000
    shards = sorted(root.glob(f"*/agents/claude-code/traces/*/{SID}_*.jsonl"))
    assert [p.name[-9:] for p in shards] == ["001.jsonl", "002.jsonl"]
    second = json.loads(shards[1].read_bytes().splitlines()[0])
    assert second["type"] == "session_meta"
    summary = json.loads(shards[1].read_bytes().splitlines()[1])["payload"]
    assert (summary["sender"], summary["role"]) == ("harness", "user")
    check = cli_json(root, "resume-check", SID)
    # Resume reads the new shard: the summary, resent with the next input (its request failed).
    assert check["session_turns"] == 0
    assert check["history"] == []
    assert [m["payload"]["text"] for m in check["carry_over"]] == [
        "This session is being continued..."
    ]


def test_audit_finds_what_breaks_the_agents_own_resume(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    log.prompt("go")
    log.answer([tool_use("toolu_dangling", "Bash", {})], message_id="msg_1", request_id="r1")
    log.prompt("never mind")
    log.result("toolu_nobody", "an answer to no call")
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"
    _import(root, path)

    result = cli(root, "audit", "--json")

    found = {problem["code"] for problem in json.loads(result.stdout)["problems"]}
    assert {"orphan_tool_output", "unanswered_tool_call"} <= found


def test_audit_finds_broken_parent_links_and_duplicate_ids(tmp_path: Path) -> None:
    log = ClaudeLog(SID)
    log.prompt("go")
    log.answer([tool_use("toolu_same", "Bash", {})], message_id="msg_1", request_id="r1")
    log.result("toolu_same", "done")
    log.answer([tool_use("toolu_same", "Bash", {})], message_id="msg_2", request_id="r2")
    log.result("toolu_same", "done again")
    log.prompt("where is my parent?", parent="no-such-uuid")
    again = dict(log.rows[-1], timestamp="2025-09-03T10:59:00.000Z")
    log.other(again)  # the same row (and uuid) written twice
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"
    _import(root, path)

    result = cli(root, "audit", "--json")

    assert result.exit_code == 2
    found = {(p["code"], p["severity"]) for p in json.loads(result.stdout)["problems"]}
    assert {
        ("duplicate_tool_call", "error"),
        ("broken_parent_link", "error"),
        ("duplicate_uuid", "error"),
    } <= found


def test_unknown_types_and_malformed_lines_are_kept_counted_and_reported_once(
    tmp_path: Path,
) -> None:
    log = ClaudeLog(SID)
    claude_turn(log, 1)
    log.other({"type": "brand-new-kind", "sessionId": SID, "x": 1})
    log.other({"type": "brand-new-kind", "sessionId": SID, "x": 2})
    path = log.write(_store(tmp_path))
    bad_line = len(log.rows) + 1
    before = len(log.rows)
    claude_turn(log, 2)
    with path.open("ab") as handle:
        handle.write(b"{not json at all\n" + jsonl(log.rows[before:]))
    root = tmp_path / "data"

    result = cli(root, "import", "--from", "claude-code", str(path))

    assert result.exit_code == 0, result.output
    assert result.stderr.count("'brand-new-kind'") == 1
    assert f"{path}:{bad_line}: not a JSON object" in result.stderr
    unmapped = [r for r in trace_lines(root) if r["payload"].get("type") == "foreign_record"]
    types = sorted(r["payload"]["record_type"] for r in unmapped)
    assert types == ["brand-new-kind", "brand-new-kind", "malformed"]
    malformed = next(r for r in unmapped if r["payload"]["record_type"] == "malformed")
    assert malformed["foreign"]["bytes"] == "e25vdCBqc29uIGF0IGFsbA=="  # base64 of the line
    assert len(kept_rows(root)) == len(log.rows)


def test_the_reference_files_import_with_every_line_kept(tmp_path: Path) -> None:
    folder = reference_folder("claude_code")
    root = tmp_path / "data"

    report = import_agent(DataRoot(root), "claude-code", [folder])

    lines = source_lines(folder)
    assert report.items == len(lines)
    assert sorted(kept_rows(root)) == sorted(lines)
    problems = json.loads(cli(root, "audit", "--json").stdout)["problems"]
    # What the files themselves hold: the curated small.jsonl has its uuids trimmed to one
    # string (Claude Code's resume cannot walk that chain); the real files have no error.
    errors = {(p["code"], p["path"].split("/agents/")[0].rsplit("/", 1)[1])
              for p in problems if p["severity"] == "error"}  # fmt: skip
    assert errors == {("duplicate_uuid", "agentsessions"), ("broken_parent_link", "agentsessions")}
    warnings = [p["code"] for p in problems if p["severity"] == "warning"]
    assert sorted(warnings) == [
        "open_request_at_end",
        "open_request_at_end",
        "unanswered_tool_call",
    ]


def test_the_reference_files_count_usage_as_claude_code_means_it(tmp_path: Path) -> None:
    folder = reference_folder("claude_code", "ccviewer_sample-project")
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [folder])

    expected: dict[str, list[int]] = {}
    largest: dict[str, tuple[str, list[int]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            row = json.loads(line)
            usage = (row.get("message") or {}).get("usage")
            if not usage:
                continue
            key = f"{row['message']['id']}:{row.get('requestId')}"
            counts = [usage.get(name, 0) for name in (
                "input_tokens", "output_tokens", "cache_read_input_tokens",
                "cache_creation_input_tokens")]  # fmt: skip
            day = row["timestamp"][:10]
            held = largest.get(key)
            if held is None or sum(counts) > sum(held[1]):
                largest[key] = (day, counts)
    for day, counts in largest.values():
        totals = expected.setdefault(day, [0, 0, 0, 0])
        for index, value in enumerate(counts):
            totals[index] += value

    rows = cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    got = {r["key"]: [r["input"], r["output"], r["cache_read"], r["cache_write"]] for r in rows}
    assert got == expected
    assert sum(v[1] for v in got.values()) == 56525  # 77,612 if every streamed row counted


def test_a_secret_in_a_source_line_leaves_neither_redacted_exports_nor_the_ledger(
    tmp_path: Path,
) -> None:
    corpus = json.loads((Path(__file__).parent.parent / "fixtures" / "redaction_providers.json")
                        .read_text("utf-8"))  # fmt: skip
    case = next(c for c in corpus["cases"] if "secret_part" not in c)
    secret = "".join(case["parts"])
    log = ClaudeLog(SID)
    log.prompt(f"deploy with {secret}")
    log.answer([tool_use("toolu_s", "Bash", {"command": f"deploy '{secret}'",
                                              "authorization": "Bearer abc.def.ghi"})],
               message_id="msg_s", request_id="req_s")  # fmt: skip
    log.result("toolu_s", f"used {secret}")
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"
    _import(root, path)
    assert secret.encode() in b"".join(p.read_bytes() for p in root.rglob("*_001.jsonl"))

    exported = cli_ok(root, "export", SID, "--redacted").stdout
    ledger = cli_ok(root, "ledger", "tail", "-n", "1000", "--json").stdout

    assert exported.count('"row":') == len(log.rows)  # the source rows are exported, redacted
    assert secret not in exported
    assert "abc.def.ghi" not in exported
    assert ledger.count(SID) >= 10  # the session's events are there ...
    assert secret not in ledger
    assert '"foreign"' not in ledger


def test_a_sidechain_that_replays_its_parents_messages_adds_no_usage(tmp_path: Path) -> None:
    store = _store(tmp_path)
    parent = ClaudeLog(SID)
    parent.prompt("go")
    parent.answer([text("parent answer")], message_id="msg_p", request_id="req_p",
                  usage=(10, 20, 30, 40), stop_reason="end_turn")  # fmt: skip
    parent.write(store)
    side = ClaudeLog("agent-side01")
    side.other(dict(parent.rows[1], isSidechain=True))  # the parent's answer, replayed
    side.tip = parent.rows[1]["uuid"]
    side.answer([text("own answer")], message_id="msg_s", request_id="req_s",
                usage=(1, 1, 1, 1), isSidechain=True)  # fmt: skip
    side.write(store / SID / "subagents")
    root = tmp_path / "data"

    _import(root, store)

    rows = {
        r["key"].rsplit("/", 1)[1]: r
        for r in cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    }
    assert (rows[SID]["input"], rows[SID]["output"]) == (10, 20)
    assert (rows["agent-side01"]["input"], rows["agent-side01"]["output"]) == (1, 1)
    assert set(rows) == {SID, "agent-side01"}
    problems = json.loads(cli(root, "audit", "--json").stdout)["problems"]
    assert [p for p in problems if p["severity"] == "error"] == []  # its chain reaches the parent


def test_an_old_flat_subagent_file_names_its_parent_from_its_rows(tmp_path: Path) -> None:
    """Before ``<session>/subagents/``, Claude Code wrote ``agent-<id>.jsonl`` beside the
    sessions; only its rows' ``sessionId`` names the parent.  Linked both ways."""
    store = _store(tmp_path)
    log = ClaudeLog(SID)
    log.prompt("delegate")
    log.answer([tool_use("toolu_t", "Task", {"prompt": "test"})], message_id="msg_t",
               request_id="req_t")  # fmt: skip
    log.result("toolu_t", "passed", toolUseResult={"agentId": "flat01"})
    log.write(store)
    child = ClaudeLog("agent-flat01")
    child.prompt("run the tests", isSidechain=True, sessionId=SID)
    child.answer([text("ran")], message_id="msg_f", request_id="req_f", isSidechain=True,
                 sessionId=SID, stop_reason="end_turn")  # fmt: skip
    child.write(store)
    root = tmp_path / "data"

    _import(root, store)

    meta = _session_records(root, "agent-flat01")[0]["payload"]
    assert (meta["source"], meta["parent_session_id"]) == ("subagent", SID)
    pointers = [r["payload"]["session_id"] for r in _session_records(root, SID)
                if r["payload"].get("type") == "subagent"]  # fmt: skip
    assert pointers == ["agent-flat01"]


def _texts(records: list[dict[str, Any]]) -> list[str]:
    return [r["payload"]["text"] for r in records if "text" in r["payload"]]


def test_rewinds_within_a_fork_and_back_to_the_first_branch_keep_each_branch_whole(
    tmp_path: Path,
) -> None:
    """Each branch of the ``parentUuid`` tree is one session holding exactly its own rows,
    in order, and names the row (and record position) it grew from."""
    log = ClaudeLog(SID)
    log.prompt("p1")
    a1 = log.answer([text("a1")], message_id="m1", request_id="r1", stop_reason="end_turn")
    log.prompt("p2")
    log.answer([tool_use("toolu_1", "Bash", {"command": "ls"})], message_id="m2",
               request_id="r2")  # fmt: skip
    log.result("toolu_1", "files")
    a2 = log.answer([text("a2")], message_id="m2b", request_id="r2b", stop_reason="end_turn")
    # Rewind 1: from a1, a new p2.
    log.prompt("q2", parent=a1)
    b2 = log.answer([text("b2")], message_id="m3", request_id="r3", stop_reason="end_turn")
    log.prompt("q3")
    log.answer([text("b3")], message_id="m4", request_id="r4", stop_reason="end_turn")
    # Rewind 2, inside the fork: from b2.
    log.prompt("r3", parent=b2)
    log.answer([text("c3")], message_id="m5", request_id="r5", stop_reason="end_turn")
    # Back to the first branch's tip, and on from there.
    log.prompt("p3", parent=a2)
    log.answer([text("a3")], message_id="m6", request_id="r6", stop_reason="end_turn")
    path = log.write(_store(tmp_path))
    root = tmp_path / "data"

    _import(root, path)

    main = _session_records(root, SID)
    assert _texts(main) == ["p1", "a1", "p2", "a2", "p3", "a3"]
    forks = {s["session_id"] for s in cli_json(root, "sessions", "list")["sessions"]} - {SID}
    by_first = {_texts(_session_records(root, f))[0]: _session_records(root, f) for f in forks}
    assert set(by_first) == {"q2", "r3"}
    first, second = by_first["q2"], by_first["r3"]
    assert _texts(first) == ["q2", "b2", "q3", "b3"]
    assert _texts(second) == ["r3", "c3"]
    origin = first[0]["payload"]["forked_from"]
    assert (origin["session_id"], origin["uuid"]) == (SID, a1)
    # The position is the record of the main session the fork grew from: a1's answer.
    assert _line_at(main, origin["position"]) == _line_of(main, a1)
    inner = second[0]["payload"]["forked_from"]
    fork_of_first = next(f for f in forks if _texts(_session_records(root, f))[0] == "q2")
    assert (inner["session_id"], inner["uuid"]) == (fork_of_first, b2)
    assert _line_at(first, inner["position"]) == _line_of(first, b2)


def _line_at(records: list[dict[str, Any]], position: int) -> int:
    """The source line the record at ``position`` (1-based) came from; it is the last of
    that line's records."""
    at = records[position - 1]["foreign"]["at"]
    assert position == len(records) or records[position]["foreign"].get("at") != at
    return int(at)


def _line_of(records: list[dict[str, Any]], uuid: str) -> int:
    return next(int(r["foreign"]["at"]) for r in records
                if r["foreign"].get("row", {}).get("uuid") == uuid)  # fmt: skip


def test_a_message_whose_rows_are_split_across_passes_counts_once_at_its_largest(
    tmp_path: Path,
) -> None:
    """The second pass reads rows of a message the first pass already counted in part: only
    what they rise above it adds, so the sum is the largest row, as in one pass."""
    log = ClaudeLog(SID)
    log.prompt("go")
    for output in (5, 40):
        log.answer([text("x")], message_id="msg_1", request_id="req_1", usage=(3, output, 100, 20))
    store = _store(tmp_path)
    path = log.write(store)
    root = tmp_path / "data"
    _import(root, path)
    for output in (90, 40, 5):  # the rest of the stream, then rows repeated (a resumed copy)
        log.answer([text("x")], message_id="msg_1", request_id="req_1", usage=(3, output, 100, 20))
    log.answer([text("y")], message_id="msg_2", request_id="req_2", usage=(1, 1, 1, 1))
    log.write(store)

    _import(root, path)
    _import(root, path)

    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert (row["input"], row["output"], row["cache_read"], row["cache_write"]) == (4, 91, 101, 21)
    one_go = tmp_path / "one-go"
    _import(one_go, path)
    assert _session_records(root, SID) == _session_records(one_go, SID)
