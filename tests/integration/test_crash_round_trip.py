"""Crash history is legal history: after real SIGKILLs and resumes, audit warns (no errors),
--fix has nothing to change, and a verbatim export imports back byte for byte.  Strict
import still refuses real corruption."""

from __future__ import annotations

import json
import random
import subprocess
from datetime import date
from pathlib import Path

import pytest

from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.writer import ShardWriter
from tests.integration.test_writer_crash import ends_torn, run_and_kill
from tests.integration.writer_child import request_records
from tests.support import clean_env, run_pentrace

SID = "session-2026-11-29-10-00-00-0123abcd"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "penguin_harness"


def pentrace(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pentrace(root, *args, env=clean_env())


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data root whose one session was written by writers SIGKILLed mid-write and resumed."""
    root = tmp_path_factory.mktemp("crashed") / "data"
    shard = DataRoot(root).shard_path("proj", "agent", SID, 1, date(2026, 11, 29))
    shard.parent.mkdir(parents=True, mode=0o700)
    rng = random.Random(20261201)
    torn = 0
    for iteration in range(16):
        run_and_kill(shard, iteration * 1000, iteration, rng, mode="session")
        torn += ends_torn(shard)
    assert torn > 0, "no kill landed mid-write; nothing was healed"
    # The last resume: its first record heals whatever the last kill tore.
    with ShardWriter(shard) as writer:
        writer.append_many(request_records(99_999, 10))
    return root


def audit(root: Path, *args: str) -> tuple[int, dict[str, object]]:
    done = pentrace(root, "audit", "--json", "--no-ledger", *args)
    return done.returncode, json.loads(done.stdout)


def codes(report: dict[str, object]) -> set[str]:
    return {str(p["code"]) for p in report["problems"]}  # type: ignore[attr-defined]


def test_audit_of_crash_history_warns_that_fragments_are_healed_and_finds_no_error(
    crashed: Path,
) -> None:
    code, report = audit(crashed)
    assert code == 1, report
    assert report["errors"] == 0
    assert "healed_torn_fragment" in codes(report)
    assert codes(report) <= {"healed_torn_fragment", "open_request", "unanswered_tool_call"}
    healed = [p for p in report["problems"] if p["code"] == "healed_torn_fragment"]  # type: ignore[attr-defined]
    assert all(p["severity"] == "warning" and "healed" in p["message"] for p in healed)


def test_audit_fix_has_nothing_to_change_in_crash_history(crashed: Path) -> None:
    before = {p: p.read_bytes() for p in crashed.rglob("*.jsonl")}
    done = pentrace(crashed, "audit", "--fix", "--no-ledger")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("--fix: nothing to change")
    assert {p: p.read_bytes() for p in crashed.rglob("*.jsonl")} == before


def test_a_verbatim_export_of_crash_history_imports_back_byte_for_byte(
    crashed: Path, tmp_path: Path
) -> None:
    exported = tmp_path / "out.jsonl"
    done = pentrace(crashed, "export", SID, "-o", str(exported))
    assert done.returncode == 0, done.stderr
    [source] = DataRoot(crashed).find_shards("proj", "agent", SID)
    assert exported.read_bytes() == source.path.read_bytes()
    other = tmp_path / "other"
    done = pentrace(other, "import", str(exported), "-p", "proj", "-a", "agent", "--json")
    assert done.returncode == 0, done.stderr
    [imported] = DataRoot(other).find_shards("proj", "agent", SID)
    assert imported.path.read_bytes() == exported.read_bytes()


def heal_like_penguin_harness(lines: list[bytes], at: int, cut: int) -> bytes:
    """A PenguinHarness trace after a crash at line ``at``: that record torn after ``cut``
    bytes, then the resumed writer's records, each starting on a new line (its heal)."""
    torn = lines[at][:cut]
    return b"\n".join([*lines[:at], torn, *lines[at:]]) + b"\n"


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_a_penguin_harness_trace_healed_after_a_crash_round_trips(
    tmp_path: Path, fixture: str
) -> None:
    lines = (FIXTURES / fixture).read_bytes().rstrip(b"\n").split(b"\n")
    source = tmp_path / "healed.jsonl"
    source.write_bytes(heal_like_penguin_harness(lines, 2, len(lines[2]) // 2))
    done = pentrace(tmp_path / "data", "import", str(source), "-p", "proj", "-a", "agent")
    assert done.returncode == 0, done.stderr
    [ref] = list(DataRoot(tmp_path / "data").iter_sessions())
    assert ref.shards[0].path.read_bytes() == source.read_bytes()
    exported = tmp_path / "again.jsonl"
    assert (
        pentrace(tmp_path / "data", "export", ref.session_id, "-o", str(exported)).returncode == 0
    )
    assert exported.read_bytes() == source.read_bytes()


@pytest.mark.parametrize(
    "corruption",
    [b"garbage", b'{"type":"event_msg"}}', b"\x00" * 16, b'{"type" "model_msg"'],
)
def test_strict_import_still_refuses_real_corruption(tmp_path: Path, corruption: bytes) -> None:
    lines = (FIXTURES / "basic_session.jsonl").read_bytes().rstrip(b"\n").split(b"\n")
    source = tmp_path / "corrupt.jsonl"
    source.write_bytes(b"\n".join([*lines[:2], corruption, *lines[2:]]) + b"\n")
    done = pentrace(tmp_path / "data", "import", str(source), "-p", "proj", "-a", "agent")
    assert done.returncode != 0
    assert f"{source}:3:" in done.stderr or "line 3" in done.stderr
    assert "not valid JSON" in done.stderr
    assert not (tmp_path / "data").exists() or not list(DataRoot(tmp_path / "data").iter_sessions())
