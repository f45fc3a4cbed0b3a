"""Which notifications make the ingest follower look, and where."""

from __future__ import annotations

from pathlib import Path

from pentrace.infrastructure.ingest.runner import changed_sessions

ROOT = Path("/data")
SID = "session-2026-11-29-10-00-00-0a1b2c3d"
TRACES = "/data/demo/agents/coder/traces"


def test_a_shard_change_names_its_session() -> None:
    keys, everything = changed_sessions(ROOT, [f"{TRACES}/2026-11-29/{SID}_002.jsonl"])
    assert keys == {("demo", "coder", SID)}
    assert not everything


def test_new_folders_read_the_whole_root(tmp_path: Path) -> None:
    for path in ("/data/demo/agents/coder", f"{TRACES}/2026-11-30"):
        assert changed_sessions(ROOT, [path])[1], path
    (tmp_path / "new_project").mkdir()
    (tmp_path / "health.json").write_text("{}")
    assert changed_sessions(tmp_path, [str(tmp_path / "new_project")])[1]
    assert not changed_sessions(tmp_path, [str(tmp_path / "health.json")])[1]


def test_the_ledger_and_other_files_under_the_root_are_ignored() -> None:
    paths = [
        "/data/runtime_events/runtime_events.db",
        "/data/runtime_events/runtime_events.db-wal",
        "/data/demo/agents/coder/agent_state/state.json",
        f"{TRACES}/2026-11-29/.{SID}_001.jsonl.123.tmp",
        "/elsewhere/x.jsonl",
    ]
    assert changed_sessions(ROOT, paths) == (set(), False)
