"""One bad session never stops work on the others: ledger sync, rebuild, audit and search go on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import Result

from pentrace.infrastructure.ledger import default_ledger_path
from tests.integration.cli_sessions_corpus import SID_A, SID_B, SID_C, build_corpus
from tests.support import cli_raising, ledger_file_sessions

pytestmark = pytest.mark.usefixtures("own_stores")


def run(root: Path, *args: str) -> Result:
    return cli_raising(root, *args)


def rows_by_session(root: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sid, _ in ledger_file_sessions(default_ledger_path(root)):
        counts[str(sid)] = counts.get(str(sid), 0) + 1
    return counts


def break_trace(shard: Path) -> None:
    """Make the shard a file whose every read fails (EIO): /proc/self/mem at offset 0."""
    shard.unlink()
    shard.symlink_to("/proc/self/mem")


def test_sync_reports_a_session_it_cannot_read_and_indexes_the_others(tmp_path: Path) -> None:
    shards = build_corpus(tmp_path)
    break_trace(shards[SID_A][0])
    result = run(tmp_path, "ledger", "sync", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [f["session_id"] for f in report["failures"]] == [SID_A]
    assert "cannot read trace file" in report["failures"][0]["message"]
    assert f"p1/a1/{SID_A}: left out" in result.stderr
    assert set(rows_by_session(tmp_path)) == {SID_B, SID_C}


def test_rebuild_keeps_the_rows_of_a_session_it_cannot_read(tmp_path: Path) -> None:
    shards = build_corpus(tmp_path)
    assert run(tmp_path, "ledger", "sync").exit_code == 0
    before = rows_by_session(tmp_path)
    break_trace(shards[SID_B][0])
    result = run(tmp_path, "ledger", "rebuild", "--json")
    assert result.exit_code == 1
    assert [f["session_id"] for f in json.loads(result.stdout)["failures"]] == [SID_B]
    assert rows_by_session(tmp_path) == before


def test_rebuild_drops_rows_of_sessions_whose_traces_are_gone(tmp_path: Path) -> None:
    shards = build_corpus(tmp_path)
    assert run(tmp_path, "ledger", "sync").exit_code == 0
    before = rows_by_session(tmp_path)
    shards[SID_C][0].unlink()
    assert run(tmp_path, "ledger", "rebuild").exit_code == 0
    assert rows_by_session(tmp_path) == {SID_A: before[SID_A], SID_B: before[SID_B]}


def test_audit_reports_an_unreadable_shard_and_audits_the_other_sessions(tmp_path: Path) -> None:
    shards = build_corpus(tmp_path)
    break_trace(shards[SID_A][0])
    result = run(tmp_path, "audit", "--json")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    codes = {(p["session_id"], p["code"]) for p in report["problems"]}
    assert (SID_A, "unreadable_shard") in codes
    assert (SID_C, "dangling_compaction") in codes


def test_a_lone_surrogate_inside_tool_call_arguments_stops_no_command(tmp_path: Path) -> None:
    """Issue #32: such a record crashed sync, rebuild and ingest for the whole root.  Each
    now takes it (once the mapping can) or reports it alone, naming its file and line,
    and indexes every other session."""
    shards = build_corpus(tmp_path)
    bad = shards[SID_A][0]
    line = bad.read_bytes().count(b"\n") + 1
    arguments = '{"cmd": "echo \ud800 done"}'  # the JSON text itself holds the lone surrogate
    record = {"timestamp": "2026-07-18T03:10:23.000Z", "type": "model_msg", "payload": {
        "type": "tool_call", "role": "assistant", "name": "exec_command",
        "arguments": arguments, "tool_call_id": "call_surrogate"}}  # fmt: skip
    with bad.open("ab") as handle:
        handle.write(json.dumps(record).encode() + b"\n")
    for command in (("ledger", "sync", "--json"), ("ledger", "rebuild", "--json")):
        result = run(tmp_path, *command)  # a traceback fails the test
        assert result.exit_code in (0, 1), result.output
        failures = json.loads(result.stdout).get("failures", [])
        assert [(f["session_id"], f["path"], f["line"]) for f in failures] in (
            [],
            [(SID_A, str(bad), line)],
        )
        assert {SID_B, SID_C} <= set(rows_by_session(tmp_path))
    result = run(tmp_path, "ingest", "--once", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["refused_records"] in (0, 1)
