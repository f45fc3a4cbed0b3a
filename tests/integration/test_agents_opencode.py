"""OpenCode sessions (its database and its storage tree) imported into a data root (issue #28)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import OpenCodeDb, kept_rows, opencode_tool, reference_folder
from tests.support import cli, cli_json

pytestmark = pytest.mark.usefixtures("own_stores")

SID = "ses_0a1b2c3d4e5f"
PROJECT = "home-u-work-app"


def _records(root: Path, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(root.glob(f"*/agents/opencode/traces/*/{sid}_*.jsonl")):
        out.extend(json.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return out


def _types(records: list[dict[str, Any]]) -> list[str]:
    return [r["payload"].get("type", r["type"]) for r in records]


def _conversation(db: OpenCodeDb) -> None:
    db.session(SID)
    db.user(SID, "list the files")
    db.assistant(
        SID,
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "use ls"},
            opencode_tool("call_1", "bash", "a.txt\n"),
            opencode_tool("call_2", "read", "no such file", error=True),
            {"type": "text", "text": "one file: a.txt"},
            {"type": "step-finish", "tokens": {"input": 100}},
        ],
    )


def test_a_database_session_is_mapped_with_its_usage(tmp_path: Path) -> None:
    db = OpenCodeDb(tmp_path / "opencode")
    _conversation(db)
    db.close()
    before = (tmp_path / "opencode" / "opencode.db").read_bytes()
    root = tmp_path / "data"

    report = cli_json(root, "import", "--from", "opencode", str(tmp_path / "opencode"))

    assert report["new_sessions"] == [f"{PROJECT}/opencode/{SID}"]
    assert _types(_records(root, SID)) == [
        "session_meta",
        "foreign_record",  # the user message's own row (its parts follow)
        "text",
        "session_meta",  # the model
        "request_begin",
        "foreign_record",  # step-start
        "thinking",
        "tool_call",
        "tool_call_output",
        "tool_call",
        "tool_call_output",
        "text",
        "foreign_record",  # step-finish
        "token_usage",
        "request_end",
    ]
    records = _records(root, SID)
    assert records[10]["payload"]["stop_reason"] == "failed"
    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert (row["input"], row["output"], row["cache_read"], row["cache_write"]) == (
        100,
        20,
        500,
        50,
    )
    assert (tmp_path / "opencode" / "opencode.db").read_bytes() == before  # never written
    assert len(kept_rows(root)) == 1 + 2 + 1 + 6  # the session, 2 user items, the reply's 7


def test_a_message_still_being_written_waits_and_a_second_pass_goes_on(tmp_path: Path) -> None:
    db = OpenCodeDb(tmp_path / "opencode")
    _conversation(db)
    db.user(SID, "and now?")
    streaming = db.assistant(SID, [{"type": "text", "text": "half"}], complete=False)
    root = tmp_path / "data"
    first = import_agent(DataRoot(root), "opencode", [tmp_path / "opencode"])
    assert any("wait" in warning for warning in first.warnings)
    assert "half" not in json.dumps(_records(root, SID))

    db.complete(streaming)
    db.part(SID, streaming, {"type": "text", "text": "and the rest"})
    db.user(SID, "thanks")
    db.close()
    import_agent(DataRoot(root), "opencode", [tmp_path / "opencode"])

    one_go = tmp_path / "one-go"
    import_agent(DataRoot(one_go), "opencode", [tmp_path / "opencode"])
    assert _records(root, SID) == _records(one_go, SID)
    texts = [
        r["payload"]["text"] for r in _records(root, SID) if r["payload"].get("type") == "text"
    ]
    assert texts[-3:] == ["half", "and the rest", "thanks"]


def test_a_task_points_at_its_child_session_and_the_child_names_its_parent(
    tmp_path: Path,
) -> None:
    db = OpenCodeDb(tmp_path / "opencode")
    db.session(SID)
    db.user(SID, "delegate")
    child = "ses_child000001"
    db.assistant(SID, [opencode_tool("call_t", "task", "done", metadata={"sessionId": child})])
    db.session(child, parent=SID)
    db.user(child, "sub task")
    db.close()
    root = tmp_path / "data"

    import_agent(DataRoot(root), "opencode", [tmp_path / "opencode"])

    pointers = [r["payload"]["session_id"] for r in _records(root, SID)
                if r["payload"].get("type") == "subagent"]  # fmt: skip
    assert pointers == [child]
    meta = _records(root, child)[0]["payload"]
    assert (meta["source"], meta["parent_session_id"]) == ("subagent", SID)


def test_a_session_in_the_database_and_the_storage_tree_is_read_once(tmp_path: Path) -> None:
    folder = tmp_path / "opencode"
    db = OpenCodeDb(folder)
    _conversation(db)
    db.close()
    storage = folder / "storage"
    (storage / "session" / "prj").mkdir(parents=True)
    (storage / "session" / "prj" / f"{SID}.json").write_text(json.dumps({"id": SID}))
    (storage / "message" / SID).mkdir(parents=True)
    (storage / "message" / SID / "msg_x.json").write_text(
        json.dumps({"id": "msg_x", "sessionID": SID, "role": "user", "time": {"created": 1}})
    )
    root = tmp_path / "data"

    import_agent(DataRoot(root), "opencode", [folder])

    assert [s["session_id"] for s in cli_json(root, "sessions", "list")["sessions"]] == [SID]
    assert "msg_x" not in json.dumps(_records(root, SID))


def test_a_database_locked_by_a_running_opencode_is_retried_on_the_next_pass(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "opencode"
    db = OpenCodeDb(folder)
    _conversation(db)
    db.conn.execute("PRAGMA journal_mode=DELETE")  # its write lock then keeps readers out
    db.close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(folder / 'opencode.db')!r}, isolation_level=None)\n"
         "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        root = tmp_path / "data"
        started = time.monotonic()
        result = cli(root, "import", "--from", "opencode", str(folder))
        assert time.monotonic() - started < 30  # a short busy timeout, never a hang
        assert result.exit_code == 0, result.output
        assert "locked" in result.stderr
        assert "next pass" in result.stderr
        assert not list(root.glob("*/agents/opencode/traces/*/*.jsonl"))
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()

    again = cli_json(root, "import", "--from", "opencode", str(folder))
    assert again["new_sessions"] == [f"{PROJECT}/opencode/{SID}"]


def test_the_reference_storage_tree_imports_with_every_file_kept(tmp_path: Path) -> None:
    folder = reference_folder("opencode", "agentsessions", "storage_v2")
    root = tmp_path / "data"

    report = import_agent(DataRoot(root), "opencode", [folder])

    files = [p.read_bytes() for p in sorted(folder.rglob("*.json"))]
    kept = [r["foreign"] for r in _records(root, "s_stage0_large") if "foreign" in r]
    texts = [k["text"].encode() for k in kept if "text" in k]
    rows = [json.dumps(k["row"], separators=(",", ":")).encode() for k in kept if "row" in k]
    # Each file once (the last message waits: it is not complete, and nothing follows it).
    waiting = [f for f in files if b'"m_assistant_large_2"' in f]
    assert sorted(texts + rows) == sorted(f for f in files if f not in waiting)
    assert any("wait" in w for w in report.warnings)


def test_a_database_without_the_tables_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "opencode"
    folder.mkdir()
    sqlite3.connect(folder / "opencode.db").execute("CREATE TABLE other (x)").connection.close()

    report = import_agent(DataRoot(tmp_path / "data"), "opencode", [folder])

    assert any("has no session/message/part tables" in w for w in report.warnings)
