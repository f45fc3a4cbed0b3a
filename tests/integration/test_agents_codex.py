"""Codex CLI rollouts imported into a data root (issue #28): mapping, usage, idempotence."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import (
    CodexLog,
    codex_turn,
    jsonl,
    kept_rows,
    reference_folder,
    source_lines,
)
from tests.support import cli, cli_json

pytestmark = pytest.mark.usefixtures("own_stores")

SID = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
PROJECT = "home-u-work-app"


def _import(root: Path, *paths: Path) -> dict[str, Any]:
    found: dict[str, Any] = cli_json(root, "import", "--from", "codex", *map(str, paths))
    return found


def _records(root: Path, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(root.glob(f"*/agents/codex/traces/*/{sid}_*.jsonl")):
        out.extend(json.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return out


def _types(records: list[dict[str, Any]]) -> list[str]:
    return [r["payload"].get("type", r["type"]) for r in records]


def test_a_rollout_becomes_a_session_named_by_its_uuid_under_its_workspace(
    tmp_path: Path,
) -> None:
    log = CodexLog(SID)
    log.meta()
    log.context("gpt-5-codex")
    codex_turn(log, 0, calls=1)
    home = tmp_path / "codex"
    log.write(home)
    root = tmp_path / "data"

    report = _import(root, home)

    assert report["new_sessions"] == [f"{PROJECT}/codex/{SID}"]
    [listed] = cli_json(root, "sessions", "list")["sessions"]
    assert listed["model_name"] == "openai/gpt-5-codex"
    records = _records(root, SID)
    assert _types(records) == [
        "session_meta",
        "session_meta",  # the model, from turn_context
        "foreign_record",  # event_msg user_message: the UI's copy of the prompt
        "text",
        "request_begin",
        "thinking",
        "tool_call",
        "token_usage",
        "foreign_record",  # the repeated token_count adds nothing
        "tool_call_output",
        "request_end",  # its call answered
        "request_begin",
        "text",
        "foreign_record",  # agent_message
        "token_usage",
        "request_end",  # the answer's token_count with no call open
        "foreign_record",  # the repeat
        "foreign_record",  # task_complete: nothing left open
    ]
    assert records[5]["payload"]["fidelity"] == {"encrypted_content": "gAAAA=="}
    call, output = records[6]["payload"], records[9]["payload"]
    assert (call["name"], call["tool_call_id"]) == ("shell", output["tool_call_id"])
    assert json.loads(call["arguments"]) == {"command": ["bash", "-lc", "echo 0"]}
    assert sorted(kept_rows(root)) == sorted(log.data().splitlines())


def test_usage_is_the_difference_of_the_cumulative_totals_and_repeats_add_nothing(
    tmp_path: Path,
) -> None:
    log = CodexLog(SID)
    log.meta()
    log.context("gpt-5")
    log.user("go")
    log.tokens(100, 900, 10)
    log.tokens(30, 970, 5)  # cumulative: input 2000 (1870 cached), output 15
    home = tmp_path / "codex"
    log.write(home)
    root = tmp_path / "data"

    _import(root, home)

    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert (row["input"], row["output"], row["cache_read"], row["cache_write"]) == (
        130,
        15,
        1870,
        0,
    )
    assert row["usage_records"] == 2


def test_appended_lines_continue_the_session_and_an_archived_rollout_goes_on(
    tmp_path: Path,
) -> None:
    log = CodexLog(SID)
    log.meta()
    log.context("gpt-5")
    codex_turn(log, 0)
    home = tmp_path / "codex"
    path = log.write(home)
    root = tmp_path / "data"
    _import(root, home)

    codex_turn(log, 1, calls=2)
    log.context("gpt-5.1")  # a model change
    codex_turn(log, 2)
    path.write_bytes(log.data())
    archived = log.path_in(home, archived=True)
    archived.parent.mkdir(parents=True)
    shutil.move(path, archived)  # Codex archives by moving the file
    result = cli(root, "import", "--from", "codex", str(home), "--json")

    assert result.exit_code == 0, result.output
    assert "moved" in result.stderr
    assert json.loads(result.stdout)["new_sessions"] == []
    one_go = tmp_path / "one-go"
    _import(one_go, home)
    ours = [json.dumps(r["payload"]) for r in _records(root, SID)]
    theirs = [json.dumps(r["payload"]) for r in _records(one_go, SID)]
    assert ours == theirs  # the same records; only the source path they name differs
    models = [r["payload"]["model_id"] for r in _records(root, SID) if r["type"] == "session_meta"]
    assert models == ["unknown", "gpt-5", "gpt-5.1"]


def test_aborts_errors_compactions_and_the_old_layout_are_mapped(tmp_path: Path) -> None:
    log = CodexLog(SID)
    log.meta()
    log.context("gpt-5")
    log.user("go")
    log.call("call_x", "sleep 100")
    log.line("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    log.line("event_msg", {"type": "error", "message": "stream disconnected"})
    log.line("compacted", {"message": "summary of the work so far"})
    log.user("again")
    home = tmp_path / "codex"
    log.write(home)
    old = tmp_path / "old" / "sessions" / "rollout-2025-05-07T17-24-21-" / "x.jsonl"
    old.parent.mkdir(parents=True)
    head = {"id": "old-session", "timestamp": "2025-05-07T17:24:21.123Z", "instructions": None}
    hello = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "hello"}],
    }
    hi = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}],
    }
    old.write_bytes(jsonl([head, hello, {"record_type": "state"}, hi]))
    root = tmp_path / "data"

    _import(root, home, old)

    records = _records(root, SID)
    ends = [r["payload"]["status"] for r in records if r["payload"].get("type") == "request_end"]
    assert ends == ["aborted", "failed"]  # an interrupted turn, then a failed request
    assert any(r["payload"].get("type") == "abort" for r in records)
    shards = sorted(root.glob(f"*/agents/codex/traces/*/{SID}_*.jsonl"))
    assert len(shards) == 2
    second = [json.loads(line) for line in shards[1].read_bytes().splitlines()]
    assert second[1]["payload"]["text"] == "summary of the work so far"
    texts = [r["payload"]["text"] for r in _records(root, "old-session") if "text" in r["payload"]]
    assert texts == ["hello", "hi"]


def test_a_subagent_rollout_names_its_parent(tmp_path: Path) -> None:
    parent = CodexLog(SID)
    parent.meta()
    parent.user("spawn a helper")
    child_id = "0199a1b2-0000-7000-8000-00000000c0de"
    parent.line("event_msg", {"type": "collab_agent_spawn_end", "new_thread_id": child_id})
    child = CodexLog(child_id)
    child.meta(parent_thread_id=SID, source={"subagent": {"other": "helper"}})
    child.user("help")
    home = tmp_path / "codex"
    parent.write(home)
    child.write(home)
    root = tmp_path / "data"

    _import(root, home)

    assert any(r["payload"].get("session_id") == child_id
               and r["payload"].get("type") == "subagent" for r in _records(root, SID))  # fmt: skip
    meta = _records(root, child_id)[0]["payload"]
    assert (meta["source"], meta["parent_session_id"]) == ("subagent", SID)


def test_the_reference_rollouts_import_with_every_line_kept(tmp_path: Path) -> None:
    folder = reference_folder("codex")
    root = tmp_path / "data"

    report = import_agent(DataRoot(root), "codex", [folder])

    lines = source_lines(folder)
    assert report.items == len(lines)
    assert sorted(kept_rows(root)) == sorted(lines)
    audit = json.loads(cli(root, "audit", "--json").stdout)
    errors = [p for p in audit["problems"] if p["severity"] == "error"]
    # The errors are the fixture's own: its call ids were all trimmed to one string, so an
    # output names a call that comes later and ids repeat.  Audit finds what breaks resume.
    assert {(p["code"], p["session_id"]) for p in errors} == {
        ("output_before_call", "019fc8be-3658-7ca3-9e29-000000000000"),
        ("duplicate_tool_call", "019fc8be-3658-7ca3-9e29-000000000000"),
    }


def _fork_of(parent: CodexLog, fork_id: str, *, preserved: bool) -> CodexLog:
    """A forked rollout as Codex writes it: its own ``session_meta`` (``forked_from_id``),
    then the parent's lines copied (stamped at the fork's creation, or with their own
    earlier times when ``preserved``), then the fork's own turn, whose cumulative totals
    go on from the parent's."""
    made = parent.start + timedelta(hours=2)
    fork = CodexLog(fork_id, start=made)
    fork.meta(forked_from_id=parent.session_id)
    stamp = fork.rows[0]["timestamp"]
    fork.rows.extend(dict(row) if preserved else {**row, "timestamp": stamp}
                     for row in parent.rows)  # fmt: skip
    fork.totals = list(parent.totals)
    fork.step += 30  # the user types, the model answers
    codex_turn(fork, 7, calls=1)
    return fork


@pytest.mark.parametrize("preserved", [False, True])
def test_a_forked_rollout_does_not_count_the_parents_usage_it_replays(
    tmp_path: Path, preserved: bool
) -> None:
    parent = CodexLog(SID)
    parent.meta()
    parent.context("gpt-5")
    for turn in range(2):
        codex_turn(parent, turn, calls=1)
    fork_id = "0199a1b2-0000-7000-8000-00000000f0c4"
    fork = _fork_of(parent, fork_id, preserved=preserved)
    home = tmp_path / "codex"
    parent.write(home)
    fork.write(home)
    root = tmp_path / "data"

    _import(root, home)

    rows = {r["key"].split("/")[-1]: r
            for r in cli_json(root, "stats", "tokens", "--by", "session")["rows"]}  # fmt: skip
    # The parent: two turns of (100(i+1) fresh + 1000 cached, 20 out) and (50 + 1100, 30).
    assert _kinds(rows[SID]) == (100 + 50 + 200 + 50, 100, 1000 + 1100 + 1000 + 1100, 0)
    # The fork: its own turn only (800 + 50 fresh, 20 + 30 out, 1000 + 1100 cached).
    assert _kinds(rows[fork_id]) == (800 + 50, 50, 2100, 0)
    meta = _records(root, fork_id)[0]["payload"]
    assert meta["forked_from"] == {"session_id": SID}
    # Every copied line is kept in the fork's trace (its context), the usage is not.
    assert len(kept_rows(root)) == len(parent.rows) + len(fork.rows)


def test_a_forked_rollout_read_in_two_passes_counts_the_same(tmp_path: Path) -> None:
    parent = CodexLog(SID)
    parent.meta()
    codex_turn(parent, 0, calls=2)
    fork = _fork_of(parent, "0199a1b2-0000-7000-8000-00000000f0c5", preserved=False)
    home = tmp_path / "codex"
    path = fork.write(home)
    whole = path.read_bytes()
    cut = whole.index(b'"token_count"') + 20
    cut = whole.index(b"\n", cut) + 1  # the pass ends inside the copied history
    path.write_bytes(whole[:cut])
    root = tmp_path / "data"

    _import(root, home)
    path.write_bytes(whole)
    _import(root, home)

    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert _kinds(row) == (800 + 50, 50, 2100, 0)


def _kinds(row: dict[str, Any]) -> tuple[int, int, int, int]:
    return row["input"], row["output"], row["cache_read"], row["cache_write"]


def test_a_model_named_only_by_token_count_is_a_model_change(tmp_path: Path) -> None:
    """ccusage's fixture: a ``turn_context`` names gpt-5.2-codex, and a later
    ``token_count.info.model`` alone names gpt-5.3-codex: its tokens are that model's."""
    root = tmp_path / "data"
    _import(root, reference_folder("codex", "ccusage_session-alpha.jsonl"))

    rows = {row["key"]: row for row in cli_json(root, "stats", "tokens", "--by", "model")["rows"]}
    assert set(rows) == {"openai/gpt-5.2-codex", "openai/gpt-5.3-codex"}
    # The second event's totals less the first's (cached input is part of input).
    newer = rows["openai/gpt-5.3-codex"]
    assert (newer["input"], newer["cache_read"], newer["output"]) == (2000, 500, 300)
    assert rows["openai/gpt-5.2-codex"]["output"] == 125
    metas = [r for r in _records(root, "ccusage_session-alpha") if r["type"] == "session_meta"]
    assert [m["payload"]["model_id"] for m in metas][-1] == "gpt-5.3-codex"
