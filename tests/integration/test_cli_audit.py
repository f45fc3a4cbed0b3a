"""`pentrace audit` on real data roots: every problem type with file and line, exit codes, --fix."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.storage.modes import make_private_dirs
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.writer import session_lock_path
from tests.support import assert_clean_error, cli_raising, one_turn_session, run_pentrace

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
OTHER = "session-2026-07-18-11-10-22-0badcafe"
OTHER_REF = f"default_project/default_agent/{OTHER}"

pytestmark = pytest.mark.usefixtures("own_stores")


def run(root: Path, *args: str) -> tuple[int, str]:
    result = cli_raising(root, "audit", *args)
    return result.exit_code, result.output


def run_json(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code, out = run(root, *args, "--json")
    return code, json.loads(out)


def problems(report: dict[str, Any], code: str) -> list[dict[str, Any]]:
    return [p for p in report["problems"] if p["code"] == code]


def write(root: Path, shards: Sequence[Sequence[bytes]], sid: str = SID) -> list[Path]:
    return pt.write_shards(root, "default_project", "default_agent", sid, shards)


def test_a_clean_session_is_clean_with_exit_code_zero(sample_root: Path) -> None:
    code, out = run(sample_root)
    assert code == 0
    assert out.startswith("clean: 1 session(s), 8 record(s), 0 error(s), 0 warning(s)")


def test_a_torn_tail_is_a_warning_naming_file_and_line(tmp_path: Path) -> None:
    [shard] = pt.write_trace(tmp_path, one_turn_session())
    with shard.open("ab") as handle:
        handle.write(b'{"timestamp":"2026-07-18T03:10:2')
    code, report = run_json(tmp_path)
    assert code == 1
    [torn] = problems(report, "torn_tail")
    assert (torn["path"], torn["line"], torn["severity"]) == (str(shard), 9, "warning")
    assert torn["fix"] == "heal_torn_tail"


def test_fix_quarantines_the_torn_bytes_before_cutting_them_off(tmp_path: Path) -> None:
    [shard] = pt.write_trace(tmp_path, one_turn_session())
    whole = shard.read_bytes()
    fragment = b'{"timestamp":"2026-07-18T03:10:2\n\n'
    with shard.open("ab") as handle:
        handle.write(fragment)
    code, out = run(tmp_path, "--fix")
    assert code == 0, out
    sidecar = shard.with_name(shard.name + ".torn")
    assert sidecar.read_bytes() == fragment
    assert shard.read_bytes() == whole
    assert f"changed: [heal_torn_tail] {SID} {shard}: moved {len(fragment)} torn bytes" in out
    code, out = run(tmp_path, "--fix")
    assert (code, out.splitlines()[0]) == (0, "--fix: nothing to change")


def test_a_malformed_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    [lines] = pt.render_shards(one_turn_session(), session_id=SID)
    write(tmp_path, [[*lines[:3], b"{not json", *lines[3:]]])
    code, report = run_json(tmp_path)
    assert code == 2
    [bad] = problems(report, "malformed_line")
    assert (bad["line"], bad["severity"], bad["fix"]) == (4, "error", None)
    assert report["records"] == 8


def test_a_dangling_compaction_is_closed_once_by_fix(tmp_path: Path) -> None:
    [shard] = pt.write_trace(tmp_path, [*one_turn_session(), pt.CompactionBegin()])
    code, report = run_json(tmp_path)
    assert code == 1
    [dangling] = problems(report, "dangling_compaction")
    assert (dangling["path"], dangling["line"], dangling["position"]) == (str(shard), 9, 9)
    code, out = run(tmp_path, "--fix")
    assert code == 0, out
    assert "changed: [close_compaction]" in out
    last = json.loads(shard.read_bytes().splitlines()[-1])
    assert last["payload"]["type"] == "compaction_end"
    assert last["payload"]["status"] == "failed"
    size = shard.stat().st_size
    code, out = run(tmp_path, "--fix")
    assert (code, shard.stat().st_size) == (0, size)
    assert "nothing to change" in out


def test_tool_pairing_problems_name_their_lines(tmp_path: Path) -> None:
    commands: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput("go"),
        pt.BeginRequest(),
        pt.ToolOutput("call_early", "too soon"),
        pt.ToolCall("call_early", "read_file", "{}"),
        pt.ToolCall("call_lost", "exec_command", "{}"),
        pt.ToolOutput("call_nobody", "from nowhere"),
        pt.EndRequest(),
    ]
    pt.write_trace(tmp_path, commands)
    code, report = run_json(tmp_path)
    assert code == 2
    assert [p["line"] for p in problems(report, "output_before_call")] == [5]
    assert [p["line"] for p in problems(report, "orphan_tool_output")] == [8]
    [lost] = problems(report, "unanswered_tool_call")
    assert (lost["line"], lost["severity"]) == (7, "warning")


def test_an_open_request_is_a_warning_mid_trace_as_at_the_end(tmp_path: Path) -> None:
    # Only a writer that died leaves a request open when the next begins; resume drops
    # the round (as PenguinHarness does), so since #12 this is a warning, not an error.
    crashed: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput("a"),
        pt.BeginRequest(),
        pt.UserInput("b"),
        pt.BeginRequest(),
    ]
    pt.write_trace(tmp_path, crashed)
    code, report = run_json(tmp_path)
    assert code == 1
    [interrupted] = problems(report, "open_request")
    assert (interrupted["line"], interrupted["severity"]) == (4, "warning")
    assert "stopped or crashed" in str(interrupted["message"])
    assert [p["line"] for p in problems(report, "open_request_at_end")] == [6]


def test_a_request_a_crash_interrupted_is_a_warning_naming_the_healed_fragment(
    tmp_path: Path,
) -> None:
    [lines] = pt.render_shards(one_turn_session(), session_id=SID)
    # Killed while writing the tool call (line 5); the resumed writer healed the tail
    # and went on with the next request.
    [again] = pt.render_shards(
        [pt.StartSession(), pt.UserInput("b"), pt.BeginRequest(), pt.EndRequest()]
    )
    crashed = [*lines[:4], lines[4][:25], *again[2:]]
    write(tmp_path, [crashed])
    code, report = run_json(tmp_path)
    assert code == 1
    assert problems(report, "malformed_line") == []
    [healed] = problems(report, "healed_torn_fragment")
    assert (healed["line"], healed["severity"], healed["fix"]) == (5, "warning", None)
    [interrupted] = problems(report, "open_request")
    assert (interrupted["line"], interrupted["severity"]) == (4, "warning")
    assert "interrupted by a crash (healed torn fragment at line 5)" in interrupted["message"]
    code, out = run(tmp_path, "--fix")
    assert (code, out.splitlines()[0]) == (1, "--fix: nothing to change")


def test_shard_gaps_duplicates_and_headless_shards_are_errors(tmp_path: Path) -> None:
    [lines] = pt.render_shards(one_turn_session(), session_id=SID)
    root = DataRoot(tmp_path)
    for index in (1, 3):
        path = root.shard_path("default_project", "default_agent", SID, index, date(2026, 7, 18))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\n".join(lines if index == 1 else lines[1:]) + b"\n")
    twin = root.shard_path("default_project", "default_agent", SID, 1, date(2026, 7, 19))
    twin.parent.mkdir(parents=True)
    twin.write_bytes(b"\n".join(lines) + b"\n")
    code, report = run_json(tmp_path)
    assert code == 2
    [gap] = problems(report, "shard_gap")
    assert gap["path"].endswith(f"{SID}_003.jsonl")
    assert "_002" in gap["message"]
    assert len(problems(report, "duplicate_shard")) == 1
    [headless] = problems(report, "shard_without_meta")
    assert headless["path"].endswith("_003.jsonl")
    assert headless["line"] == 1


def _ledger(root: Path) -> RuntimeEventLedger:
    return RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())


def test_ledger_drift_missing_rows_are_synced_by_fix(tmp_path: Path) -> None:
    pt.write_trace(tmp_path, one_turn_session())
    ledger = _ledger(tmp_path)
    sync(ledger, tmp_path)
    with ledger.db.writing("test: drop rows") as conn:
        events = ledger.db.tables.events
        conn.execute(events.delete().where(events.c.sequence.in_([4, 5])))
    ledger.close()
    code, report = run_json(tmp_path)
    assert code == 1
    [missing] = problems(report, "ledger_missing")
    assert (missing["position"], missing["line"], missing["fix"]) == (4, 4, "ledger_sync")
    assert "2 trace record(s) at positions 4-5" in missing["message"]
    code, out = run(tmp_path, "--fix")
    assert code == 0, out
    assert "indexed 2 missing event(s)" in out


def test_ledger_rows_beyond_or_unlike_the_trace_are_errors(tmp_path: Path) -> None:
    [shard] = pt.write_trace(tmp_path, one_turn_session())
    ledger = _ledger(tmp_path)
    sync(ledger, tmp_path)
    ledger.close()
    lines = shard.read_bytes().splitlines()
    changed = lines[2].replace(b"03:10:22.532Z", b"03:59:59.000Z")
    assert changed != lines[2]
    shard.write_bytes(b"\n".join([*lines[:2], changed, *lines[3:6]]) + b"\n")
    code, report = run_json(tmp_path)
    assert code == 2
    [mismatch] = problems(report, "ledger_mismatch")
    assert (mismatch["position"], mismatch["line"]) == (3, 3)
    [orphan] = problems(report, "ledger_orphan")
    assert "sequence 7-8" in orphan["message"]
    code, report = run_json(tmp_path, "--no-ledger")
    assert (code, report["ledger"]) == (1, None)
    assert {p["code"] for p in report["problems"]} == {"open_request_at_end"}


def test_all_sessions_are_audited_and_one_can_be_named_by_prefix(tmp_path: Path) -> None:
    pt.write_trace(tmp_path, one_turn_session())
    pt.write_trace(tmp_path, [*one_turn_session(), pt.CompactionBegin()], session_id=OTHER)
    code, report = run_json(tmp_path)
    assert (code, report["sessions"]) == (1, 2)
    code, report = run_json(tmp_path, "3f8a")
    assert (code, report["sessions"], report["problems"]) == (0, 1, [])


def test_a_missing_session_is_a_clean_error_without_traceback(sample_root: Path) -> None:
    done = run_pentrace(sample_root, "audit", "ffff0000")
    # 2, as every command's unknown session (ADR 0092); 1 would read as "warnings only".
    assert_clean_error(done, 2, "no session id")


def test_a_completed_compaction_that_rotated_is_clean(tmp_path: Path) -> None:
    commands = [*one_turn_session(), pt.CompactionBegin(), pt.CompactionEnd(), pt.UserInput("next")]
    paths = pt.write_trace(tmp_path, commands)
    assert len(paths) == 2
    code, out = run(tmp_path)
    assert code == 0, out


def test_fix_reports_its_changes_in_json_and_a_plain_audit_reports_none(tmp_path: Path) -> None:
    [shard] = pt.write_trace(tmp_path, [*one_turn_session(), pt.CompactionBegin()])
    with shard.open("ab") as handle:
        handle.write(b'{"type":"event_msg"')
    code, report = run_json(tmp_path)
    assert (code, report["changes"]) == (1, None)
    code, report = run_json(tmp_path, "--fix")
    assert code == 0
    assert [change["action"] for change in report["changes"]] == [
        "heal_torn_tail",
        "close_compaction",
    ]
    assert {change["path"] for change in report["changes"]} == {str(shard)}
    assert report["problems"] == []
    assert shard.with_name(shard.name + ".torn").read_bytes() == b'{"type":"event_msg"'


def test_fix_never_races_a_live_writer_and_reports_what_it_did_before(tmp_path: Path) -> None:
    pt.write_trace(tmp_path, [*one_turn_session(), pt.CompactionBegin()], session_id=OTHER)
    [shard] = pt.write_trace(tmp_path, one_turn_session())
    with shard.open("ab") as handle:
        handle.write(b'{"torn')
    lock_path = session_lock_path(DataRoot(tmp_path), "default_project", "default_agent", SID)
    make_private_dirs(lock_path.parent)  # as a writer makes it (a 0755 one would be repaired)
    with SessionLock(lock_path, label="a live writer"):
        done = run_pentrace(tmp_path, "audit", "--fix")
    assert done.returncode == 1
    assert done.stdout.startswith(f"changed: [close_compaction] {OTHER} ")
    assert done.stderr.startswith("error: ")
    assert "is being written by another writer" in done.stderr
    assert "Traceback" not in done.stderr
    assert shard.read_bytes().endswith(b'{"torn')
    assert not shard.with_name(shard.name + ".torn").exists()


def test_a_rotated_shard_holding_only_a_torn_line_is_moved_aside_whole(tmp_path: Path) -> None:
    first, _ = pt.render_shards(
        [*one_turn_session(), pt.CompactionBegin(), pt.CompactionEnd(), pt.UserInput("next")],
        session_id=SID,
    )
    [_, second] = write(tmp_path, [first, [b'{"timestamp":"2026-07-1']])
    second.write_bytes(b'{"timestamp":"2026-07-1')
    code, report = run_json(tmp_path)
    assert code == 1
    assert [(p["code"], p["line"]) for p in report["problems"]] == [("torn_tail", 1)]
    code, report = run_json(tmp_path, "--fix")
    assert not second.exists()
    assert second.with_name(second.name + ".torn").read_bytes() == b'{"timestamp":"2026-07-1'
    [change] = report["changes"]
    assert "renamed it to" in change["detail"]
    assert (code, report["problems"]) == (0, [])


def test_ledger_events_of_a_session_deleted_by_hand_are_reported_and_removed_by_fix(
    tmp_path: Path,
) -> None:
    pt.write_trace(tmp_path, one_turn_session())
    [gone] = pt.write_trace(tmp_path, one_turn_session(), session_id=OTHER)
    ledger = _ledger(tmp_path)
    sync(ledger, tmp_path)
    ledger.close()
    gone.unlink()  # removed outside pentrace: the ledger still serves its events

    code, report = run_json(tmp_path)
    assert code == 1
    [orphan] = problems(report, "ledger_orphan_stream")
    assert (orphan["session_id"], orphan["severity"], orphan["fix"]) == (
        OTHER_REF,
        "warning",
        "ledger_forget",
    )
    assert "8 event(s)" in orphan["message"]
    # A narrower audit cannot tell a deleted session from one it did not read.
    assert problems(run_json(tmp_path, "3f8a")[1], "ledger_orphan_stream") == []
    assert problems(run_json(tmp_path, "-p", "default_project")[1], "ledger_orphan_stream") == []

    code, out = run(tmp_path, "--fix")
    assert code == 0, out
    assert f"[ledger_forget] {OTHER_REF}" in out
    assert "removed 8 ledger event(s) of a session with no trace" in out
    ledger = _ledger(tmp_path)
    try:
        assert ledger.session_streams() == {SessionKey("default_project", "default_agent", SID): 8}
    finally:
        ledger.close()


def test_a_shared_ledger_reports_orphan_streams_without_offering_to_remove_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, other_root = tmp_path / "here", tmp_path / "there"
    shared = tmp_path / "shared.db"
    pt.write_trace(root, one_turn_session())
    pt.write_trace(other_root, one_turn_session(), session_id=OTHER)
    ledger = RuntimeEventLedger.open(root, LedgerSettings(path=shared).with_limits_off())
    sync(ledger, root)
    sync(ledger, other_root)
    ledger.close()
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_PATH", str(shared))

    code, report = run_json(root)
    [orphan] = problems(report, "ledger_orphan_stream")
    assert (code, orphan["session_id"], orphan["fix"]) == (1, OTHER_REF, None)
    assert "shared ledger" in orphan["message"]
    assert f"remove its events with `pentrace ledger forget {OTHER_REF}`" in orphan["message"]
    code, report = run_json(root, "--fix")
    assert code == 1
    assert problems(report, "ledger_orphan_stream") == [orphan]
    assert report["changes"] == []


def test_a_null_line_is_an_error_since_penguin_harness_cannot_resume_the_file(
    tmp_path: Path,
) -> None:
    [shard] = pt.write_trace(tmp_path, one_turn_session())
    lines = shard.read_bytes().split(b"\n")
    lines.insert(3, b"null")
    shard.write_bytes(b"\n".join(lines))
    code, report = run_json(tmp_path)
    assert code == 2
    [null] = problems(report, "null_record")
    assert (null["path"], null["line"], null["position"]) == (str(shard), 4, 4)
    assert null["severity"] == "error"
    assert "TypeError" in null["message"]


def test_other_json_that_is_no_object_is_a_warning_and_a_missing_payload_an_error(
    tmp_path: Path,
) -> None:
    [shard] = pt.write_trace(tmp_path, one_turn_session())
    lines = shard.read_bytes().split(b"\n")
    lines[2:2] = [
        b"42",
        b'"text"',
        b"[]",
        b'{"type":"event_msg"}',
        b'{"type":"model_msg","payload":null}',
    ]
    shard.write_bytes(b"\n".join(lines))
    code, report = run_json(tmp_path)
    assert code == 2
    shapes = [(p["line"], p["code"], p["severity"]) for p in report["problems"]]
    assert shapes == [
        (3, "non_object_record", "warning"),
        (4, "non_object_record", "warning"),
        (5, "non_object_record", "warning"),
        (6, "missing_payload", "error"),
        (7, "missing_payload", "error"),
    ]
    assert "JSON number" in report["problems"][0]["message"]
    assert "payload is null" in report["problems"][4]["message"]
