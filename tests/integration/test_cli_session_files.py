"""Session file commands on a real data root: export, import, fork, delete and prune."""

from __future__ import annotations

import json
import os
import sqlite3
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pentrace import testing as pt
from pentrace.cli.app import main
from pentrace.cli.sessions.args import forget_in_ledger
from pentrace.domain.session.aggregate import Session
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.sessions.trace_import import import_session
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.cli_sessions_corpus import (
    SID_A,
    SID_B,
    SID_C,
    build_corpus,
    commands_a,
    synced_ledger,
    write_session,
)
from tests.support import cli

SECRET = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
# Only the data root's own stores (the ledger tests among these need that).
pytestmark = pytest.mark.usefixtures("own_stores")

KEY_A, KEY_B, KEY_C = (
    SessionKey("p1", "a1", SID_A),
    SessionKey("p1", "a1", SID_B),
    SessionKey("p2", "a2", SID_C),
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    build_corpus(data)
    return data


def tree(root: Path) -> dict[str, bytes]:
    """Every trace file under the root with its bytes (the catalog cache excluded)."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*.jsonl"))
        if ".pentrace" not in path.parts
    }


def fails(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(root), *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert isinstance(exit_info.value.code, int)
    return exit_info.value.code, err


def test_export_writes_the_latest_shard_verbatim(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    result = cli(root, "export", "3f8a", "-o", str(out))

    assert result.exit_code == 0, result.output
    assert out.read_bytes() == tree(root)[f"p1/agents/a1/traces/2026-07-18/{SID_A}_001.jsonl"]
    assert "exported shard 001" in result.stderr


def test_export_redacted_leaves_no_secret(tmp_path: Path) -> None:
    root = tmp_path / "data"
    leaky: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput(f"my key is {SECRET}"),
        pt.BeginRequest(),
    ]
    write_session(
        root, [*leaky, pt.EndRequest()], SID_A, datetime(2026, 7, 18, tzinfo=UTC), ("p", "a")
    )
    out = tmp_path / "redacted.jsonl"

    assert cli(root, "export", "3f8a", "--redacted", "-o", str(out)).exit_code == 0
    text = out.read_text()
    assert SECRET not in text
    assert len(text.splitlines()) == 5


def test_export_archive_bundles_the_subagent_child(tmp_path: Path) -> None:
    root = tmp_path / "data"
    parent: list[pt.Command] = [*commands_a(), pt.SubagentPointer(SID_B)]
    start = datetime(2026, 7, 18, tzinfo=UTC)
    write_session(root, parent, SID_A, start, ("p", "a"))
    write_session(root, [pt.StartSession(), pt.UserInput("child")], SID_B, start, ("p", "a"))
    out = tmp_path / "bundle.tar.gz"

    assert cli(root, "export", "3f8a", "--archive", "-o", str(out)).exit_code == 0
    with tarfile.open(out) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
    assert [s["session_id"] for s in manifest["sessions"]] == [SID_A, SID_B]
    assert manifest["sessions"][1]["parent_session_id"] == SID_A


def test_export_then_delete_then_import_round_trips_with_counts(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    before = tree(root)
    assert cli(root, "export", "3f8a", "-o", str(out)).exit_code == 0
    assert cli(root, "delete", "3f8a", "--yes").exit_code == 0
    assert SID_A not in "".join(tree(root))

    result = cli(root, "import", str(out), "--project", "p1", "--agent", "a1", "--json")

    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    assert (counts["session_id"], counts["records"], counts["requests"]) == (SID_A, 17, 3)
    assert (counts["tool_calls"], counts["torn_tail_dropped"]) == (1, False)
    assert tree(root) == before


def test_import_refuses_an_existing_id(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "a.jsonl"
    assert cli(root, "export", "3f8a", "-o", str(out)).exit_code == 0

    code, err = fails(capsys, root, "import", str(out), "--project", "p1", "--agent", "a1")

    assert code == 2
    assert f"session {SID_A} already exists under p1/a1" in err
    # The hint once said "an import always creates a new session", which it had not done.
    assert "hint: import a copy under a new id with --new-id" in err


def test_import_of_a_broken_trace_names_the_file_and_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.jsonl"
    lines = tree(root)[f"p1/agents/a1/traces/2026-07-18/{SID_A}_001.jsonl"].splitlines()
    broken.write_bytes(b"\n".join([*lines[:3], b"{not json", *lines[3:]]) + b"\n")

    code, err = fails(capsys, root, "import", str(broken), "--project", "p9", "--agent", "a9")

    assert code == 1
    first, hint = err.splitlines()
    assert first.startswith(f"error: {broken}:4: not valid JSON")
    # It once pointed at `pentrace audit` and a "tolerant mode" that do not take a file.
    assert hint == f"hint: `pentrace audit {broken}` lists every broken line and what it holds"
    assert not (root / "p9" / "agents" / "a9" / "traces" / "2026-07-18").exists()


def test_fork_at_a_turn_keeps_committed_history_and_names_its_origin(root: Path) -> None:
    before = tree(root)
    result = cli(root, "fork", "3f8a", "--at-turn", "1", "--json")

    assert result.exit_code == 0, result.output
    fork = json.loads(result.stdout)
    assert (fork["turns"], fork["position"], fork["records"]) == (1, 9, 9)
    lines = Path(fork["paths"][0]).read_bytes().splitlines()
    meta = json.loads(lines[0])["payload"]
    assert meta["session_id"] == fork["session_id"]
    assert meta["forked_from"] == {"session_id": SID_A, "turn": 1, "position": 9}
    source = before[f"p1/agents/a1/traces/2026-07-18/{SID_A}_001.jsonl"].splitlines()
    assert lines[1:] == source[1:9]
    after = tree(root)
    assert {k: v for k, v in after.items() if fork["session_id"] not in k} == before

    shown = json.loads(cli(root, "show", fork["session_id"], "--json").stdout)["summary"]
    assert shown["turns"] == 1
    assert shown["forked_from"]["session_id"] == SID_A


def test_fork_at_an_event_inside_a_round_cuts_back_and_drops_dropped_rounds(root: Path) -> None:
    # Position 15 is inside the last round (begin at 14); the aborted round (11-13) is dropped.
    fork = json.loads(cli(root, "fork", SID_A, "--at-event", "15", "--json").stdout)

    assert (fork["position"], fork["records"], fork["turns"]) == (10, 10, 1)
    last = json.loads(Path(fork["paths"][0]).read_bytes().splitlines()[-1])
    assert last["payload"] == {"type": "text", "role": "user", "text": "show a.txt"}


def test_a_fork_can_be_opened_and_resumed_by_the_application(root: Path, tmp_path: Path) -> None:
    fork = json.loads(cli(root, "fork", "3f8a", "--json").stdout)
    assert fork["turns"] == 2

    with SessionApplication(DataRoot(root), "p1", "a1") as app:
        session: Session = app.repository.get(fork["session_id"])
        assert (session.turns, session.records) == (2, fork["records"])


def test_fork_out_of_range_is_a_clean_usage_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "fork", "3f8a", "--at-turn", "7")

    assert code == 2
    assert f"error: expected a turn between 1 and 2 for session {SID_A}, found 7" in err


def test_delete_refuses_without_a_terminal_or_yes(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(root)
    code, err = fails(capsys, root, "delete", "7777")

    assert code == 2
    assert err.splitlines() == [
        f"error: refusing to delete session {SID_C} without confirmation: "
        "standard input is not a terminal",
        "hint: pass --yes to confirm in scripts",
    ]
    assert tree(root) == before


def test_delete_with_yes_removes_only_that_session(root: Path) -> None:
    before = tree(root)
    result = cli(root, "delete", "7777", "--yes")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"deleted {SID_C}: ")
    assert tree(root) == {k: v for k, v in before.items() if SID_C not in k}


def _age(root: Path, session_id: str, days: int) -> None:
    stamp = time.time() - days * 86400
    for path in root.rglob(f"{session_id}_*.jsonl"):
        os.utime(path, (stamp, stamp))


def test_prune_dry_run_lists_exactly_what_would_go_and_changes_nothing(root: Path) -> None:
    _age(root, SID_A, 40)
    _age(root, SID_B, 35)
    before = tree(root)

    result = cli(root, "prune", "--older-than", "30d", "--dry-run", "--json")

    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True
    assert [s["session_id"] for s in plan["sessions"]] == [SID_A, SID_B]
    assert {s["reason"] for s in plan["sessions"]} == {"last written more than 30d ago"}
    assert tree(root) == before


def test_prune_with_yes_deletes_the_planned_sessions(root: Path) -> None:
    _age(root, SID_A, 40)
    result = cli(root, "prune", "--older-than", "30d", "--yes")

    assert result.exit_code == 0, result.output
    assert f"deleted {SID_A}" in result.stdout
    assert [row for row in tree(root) if SID_A in row] == []
    assert any(SID_B in row for row in tree(root))


def test_prune_by_size_removes_the_least_recently_written_first(root: Path) -> None:
    _age(root, SID_A, 3)
    _age(root, SID_C, 2)
    sizes = {
        sid: sum(len(v) for k, v in tree(root).items() if sid in k) for sid in (SID_A, SID_B, SID_C)
    }
    budget = sizes[SID_B] + sizes[SID_C]

    plan = json.loads(cli(root, "prune", "--max-size", str(budget), "--dry-run", "--json").stdout)

    assert [s["session_id"] for s in plan["sessions"]] == [SID_A]


def test_prune_needs_a_rule_and_understands_its_units(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "prune", "--dry-run")
    assert code == 2
    assert "expected --older-than or --max-size, found neither" in err

    code, err = fails(capsys, root, "prune", "--max-size", "lots")
    assert code == 2
    assert "error: --max-size 'lots': expected bytes (4096) or a number and a unit" in err


def test_import_reports_progress_in_bytes_that_add_up_to_the_file(
    root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "a.jsonl"
    assert cli(root, "export", "3f8a", "-o", str(out)).exit_code == 0
    assert cli(root, "delete", "3f8a", "--yes").exit_code == 0
    steps: list[int] = []

    result = import_session(DataRoot(root), "p1", "a1", out, on_progress=steps.append)

    assert result.records == 17
    assert steps
    assert all(step > 0 for step in steps)
    assert sum(steps) == out.stat().st_size


def test_delete_also_removes_the_sessions_ledger_events(root: Path) -> None:
    ledger = synced_ledger(root)
    held = ledger.session_streams()
    assert set(held) == {KEY_A, KEY_B, KEY_C}

    result = cli(root, "delete", "7777", "--yes")

    assert result.exit_code == 0, result.output
    assert f"removed {held[KEY_C]} ledger event(s) of {SID_C}" in result.stdout
    assert ledger.session_streams() == {KEY_A: held[KEY_A], KEY_B: held[KEY_B]}
    ledger.close()


def test_prune_removes_the_ledger_events_of_what_it_deleted(root: Path) -> None:
    ledger = synced_ledger(root)
    held = ledger.session_streams()
    _age(root, SID_A, 40)

    result = cli(root, "prune", "--older-than", "30d", "--yes", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ledger_events_removed"] == held[KEY_A]
    assert KEY_A not in ledger.session_streams()
    ledger.close()


def test_delete_with_a_locked_ledger_deletes_the_files_and_warns(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synced_ledger(root).close()
    holder = sqlite3.connect(root / "runtime_events" / "runtime_events.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        code, err = fails(capsys, root, "delete", "7777", "--yes")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1
    assert "warning: the ledger still holds their events" in err
    assert "locked" in err
    # The hint names the session by its owner: its id alone may exist under other agents.
    hint = (
        f"hint: when the ledger can be written, run `pentrace ledger forget {KEY_C.reference} "
        "--yes`"
    )
    assert hint in err
    assert not any(SID_C in path for path in tree(root))
    # The hint is the whole repair once the lock is gone.
    result = cli(root, "ledger", "forget", KEY_C.reference, "--yes")
    assert result.exit_code == 0, result.output
    ledger = RuntimeEventLedger.open(root, LedgerSettings())
    try:
        assert KEY_C not in ledger.session_streams()
    finally:
        ledger.close()


def test_a_locked_ledger_after_a_large_prune_points_to_audit_not_a_huge_command(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synced_ledger(root).close()
    many = [KEY_A, KEY_B, KEY_C, SessionKey("p2", "a2", "session-2026-07-21-09-00-00-00000004")]
    holder = sqlite3.connect(root / "runtime_events" / "runtime_events.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert forget_in_ledger(DataRoot(root), many) is None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert "warning: the ledger still holds their events" in err
    assert (
        "hint: when the ledger can be written, run `pentrace audit`: "
        "it reports them as ledger_orphan_stream"
    ) in err
    assert "ledger forget" not in err
