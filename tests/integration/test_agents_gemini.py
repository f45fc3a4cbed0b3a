"""Gemini CLI chats (the JSON form and the JSONL form) imported into a data root (issue #28)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import GeminiChat, gemini_call, jsonl, kept_rows, reference_folder
from tests.support import cli_json

pytestmark = pytest.mark.usefixtures("own_stores")

SID = "5f1e2d3c-aaaa-4bbb-8ccc-000000000001"


def _records(root: Path, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(root.glob(f"*/agents/gemini/traces/*/{sid}_*.jsonl")):
        out.extend(json.loads(line) for line in path.read_bytes().splitlines() if line.strip())
    return out


def test_a_json_chat_rewritten_as_it_grows_is_imported_once_in_order(tmp_path: Path) -> None:
    folder = tmp_path / "gemini" / "tmp" / "proj"
    (folder).mkdir(parents=True)
    (folder / ".project_root").write_text("/home/u/work/app\n")
    chat = GeminiChat(SID)
    chat.user("list the files")
    chat.reply("", calls=[gemini_call("c1", "a.txt")])
    path = chat.write(folder)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "gemini", [tmp_path / "gemini"])

    pending = chat.reply("", calls=[dict(gemini_call("c2", ""), status="executing")])
    chat.write(folder)
    waiting = import_agent(DataRoot(root), "gemini", [tmp_path / "gemini"])
    assert any("wait" in w for w in waiting.warnings)
    pending["toolCalls"][0] = gemini_call("c2", "boom", status="error")
    chat.reply("one file", tokens=(2000, 20, 1900, 0))
    chat.write(folder)
    import_agent(DataRoot(root), "gemini", [tmp_path / "gemini"])

    one_go = tmp_path / "one-go"
    import_agent(DataRoot(one_go), "gemini", [tmp_path / "gemini"])
    assert _records(root, SID) == _records(one_go, SID)
    [listed] = cli_json(root, "sessions", "list")["sessions"]
    assert (listed["project"], listed["model_name"]) == ("home-u-work-app", "google/gemini-2.5-pro")
    outputs = [r["payload"] for r in _records(root, SID)
               if r["payload"].get("type") == "tool_call_output"]  # fmt: skip
    assert [(o["tool_call_id"], o["stop_reason"]) for o in outputs] == [
        ("c1", "completed"),
        ("c2", "failed"),
    ]
    kept = [r["foreign"]["text"] for r in _records(root, SID) if "text" in r.get("foreign", {})]
    assert len(kept) == 4  # each message's bytes, cut from the file as written
    assert json.loads(kept[0]) == chat.messages[0]
    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    # cached is part of input; thoughts are billed as output
    assert (row["input"], row["output"], row["cache_read"]) == (
        600 * 2 + 100,  # two replies of (1000 in, 400 cached), one of (2000, 1900)
        57 * 2 + 20,
        400 * 2 + 1900,
    )
    assert path.exists()


def test_the_jsonl_form_is_read_as_it_is_appended(tmp_path: Path) -> None:
    chat = GeminiChat(SID)
    chat.user("hi")
    first = chat.reply("hello", tokens=(100, 5, 0, 0))
    folder = tmp_path / "gemini" / "tmp" / "p" / "chats"
    folder.mkdir(parents=True)
    path = folder / "session.jsonl"
    path.write_bytes(jsonl([chat.header(), *chat.messages]))
    root = tmp_path / "data"
    import_agent(DataRoot(root), "gemini", [tmp_path / "gemini"])

    update = dict(first, tokens={"input": 100, "output": 9, "cached": 0, "thoughts": 0})
    with path.open("ab") as handle:
        handle.write(jsonl([{"$set": {"lastUpdated": "2025-11-05T08:01:00Z"}}, update]))
    import_agent(DataRoot(root), "gemini", [tmp_path / "gemini"])

    [row] = cli_json(root, "stats", "tokens", "--by", "session")["rows"]
    assert (row["input"], row["output"]) == (100, 9)  # the update added its increase only
    types = [r["payload"].get("record_type") for r in _records(root, SID)
             if r["payload"].get("type") == "foreign_record"]  # fmt: skip
    assert types == ["$set"]  # the update's row rides on the token_usage of its increase
    assert sorted(kept_rows(root)) == sorted(path.read_bytes().splitlines())


def test_the_reference_chats_import_with_every_message_kept(tmp_path: Path) -> None:
    folder = reference_folder("gemini")
    root = tmp_path / "data"

    report = import_agent(DataRoot(root), "gemini", [folder])

    assert report.records > 0
    assert not [w for w in report.warnings if "wait" in w]
    for path in sorted(folder.rglob("*.json")):
        messages = json.loads(path.read_bytes())["messages"]
        sid = json.loads(path.read_bytes())["sessionId"]
        kept = [json.loads(r["foreign"]["text"]) for r in _records(root, sid)
                if "text" in r.get("foreign", {})]  # fmt: skip
        assert kept == messages
