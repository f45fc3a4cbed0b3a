"""Every file pentrace makes under a data root is 0600 and every folder 0700, whatever the umask.

A real writer process and real CLI commands run with the umask under test;
then the whole root is walked.  Loose modes left by an older version (or by
another tool) are repaired when a store or a writer opens, and said once.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pentrace.infrastructure.analytics.database import AnalyticsDatabase, analytics_url
from pentrace.infrastructure.catalog.listing import open_cache
from pentrace.infrastructure.ledger.backend.database import LedgerDatabase
from pentrace.infrastructure.ledger.settings import default_ledger_path
from pentrace.infrastructure.search.index import SearchIndex
from pentrace.infrastructure.storage.layout import DataRoot

PROJECT, AGENT = "proj", "agent"

# A real recording: a long tool output (archived), a compaction (rotation and
# checkpoint), then a read through the repository (a checkpoint written by a reader).
RECORD = """
import sys
from collections.abc import Iterator
from pathlib import Path
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.trace.durability import Durability

root, work = Path(sys.argv[1]), Path(sys.argv[2])
app = SessionApplication(root, "proj", "agent", durability=Durability.PER_REQUEST)
handle = app.start_session(
    provider="deepseek", model_id="m", model_context_window=1000, system_prompt="secret prompt",
    workspace=work, tools=[{"name": "exec_command", "description": "run"}],
)
for n in range(3):
    handle.record_user_input(f"task {n}")
    handle.begin_request()
    handle.record_tool_call("exec_command", "{}", f"call_{n}")
    handle.record_tool_output(f"call_{n}", "x" * 40_000)
    handle.end_request("completed")
handle.begin_compaction("manual", "discard")
handle.begin_request()
handle.end_request("completed")
handle.end_compaction("completed")
handle.record_user_input("after")
handle.begin_request()
handle.end_request("completed")
handle.save()
sid = handle.session_id
app.close()
again = SessionApplication(root, "proj", "agent")
again.repository.get(sid)
again.close()
print(sid)
"""


def run(args: list[str], mask: int, root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PENGUIN_", "PENTRACE_"))}
    done = subprocess.run(
        args, umask=mask, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done


def cli(root: Path, mask: int, *args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "pentrace", "--data-root", str(root), *args], mask, root)


def loose_modes(root: Path) -> list[str]:
    """Every path under ``root`` (the root too) whose mode is not 0600 / 0700."""
    found = []
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        want = PRIVATE_DIR if stat.S_ISDIR(info.st_mode) else PRIVATE_FILE
        if mode != want:
            found.append(f"{path.relative_to(root.parent)} {mode:o}")
    return found


PRIVATE_FILE, PRIVATE_DIR = 0o600, 0o700


@pytest.mark.parametrize("mask", [0o022, 0o000])
def test_every_file_is_0600_and_every_folder_0700_whatever_the_umask(
    tmp_path: Path, mask: int
) -> None:
    root, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    sid = run([sys.executable, "-c", RECORD, str(root), str(work)], mask, root).stdout.strip()
    for args in (
        ["ledger", "sync"],
        ["search", "task"],
        ["sessions", "list"],
        ["stats", "tokens"],
        ["export", sid, "-o", str(root / "exports" / "s.jsonl")],
        ["export", sid, "--archive", "-o", str(root / "exports" / "s.tar.gz")],
        ["report", sid, "-o", str(root / "exports" / "r.html")],
        ["audit"],
    ):
        (root / "exports").mkdir(mode=0o700, exist_ok=True)
        cli(root, mask, *args)
    names = {path.name for path in root.rglob("*")}
    # The stores, their SQLite side files, checkpoints, archives and locks all exist ...
    for expected in ("runtime_events.db", "search.db", "catalog.db", "analytics.db", "s.tar.gz"):
        assert expected in names
    assert any(path.parent.name == ".checkpoints" for path in root.rglob("*.json"))
    assert any(path.suffix == ".log" for path in root.rglob("truncated-tool-output/*"))
    # ... and nothing is readable by anyone else.
    assert loose_modes(root) == []


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The loosest umask for this test, in this process."""
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.usefixtures("open_umask")
def test_sqlite_side_files_are_0600_while_each_store_is_open(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "data")
    ledger = LedgerDatabase.for_path(default_ledger_path(root.path))
    search = SearchIndex(root)
    catalog = open_cache(root.path)
    analytics = AnalyticsDatabase(analytics_url(root.path, {}))
    try:
        files = [p for p in root.path.rglob("*") if p.is_file()]
        sides = {p.name for p in files if p.name.endswith(("-wal", "-shm"))}
        for store in ("runtime_events.db", "search.db", "catalog.db", "analytics.db"):
            assert {f"{store}-wal", f"{store}-shm"} <= sides
        assert loose_modes(root.path) == []
    finally:
        ledger.close()
        search.close()
        catalog.close()
        analytics.close()


REOPEN = """
import sys
from collections.abc import Iterator
from pathlib import Path
from pentrace.infrastructure.eventstore.application import SessionApplication

app = SessionApplication(Path(sys.argv[1]), "proj", "agent")
handle = app.open_session(sys.argv[2])
handle.record_user_input("more")
handle.begin_request()
handle.end_request("completed")
handle.save()
app.close()
"""


def loosen(paths: list[Path]) -> None:
    for path in paths:
        path.chmod(0o755 if path.is_dir() else 0o644)


def tightened_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if "tightened" in line]


def test_a_loose_store_is_repaired_on_open_and_said_once(tmp_path: Path) -> None:
    root, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    run([sys.executable, "-c", RECORD, str(root), str(work)], 0o022, root)
    cli(root, 0o022, "ledger", "sync")
    ledger = default_ledger_path(root)
    loosen([ledger.parent, *ledger.parent.iterdir()])
    done = cli(root, 0o022, "ledger", "sync")
    [line] = tightened_lines(done)  # one line for the store, not one per file
    assert str(ledger) in line
    assert loose_modes(root) == []
    assert tightened_lines(cli(root, 0o022, "ledger", "sync")) == []


def test_a_writer_repairs_the_folders_on_its_way_and_the_shard_it_appends_to(
    tmp_path: Path,
) -> None:
    root, work = tmp_path / "data", tmp_path / "work"
    work.mkdir()
    sid = run([sys.executable, "-c", RECORD, str(root), str(work)], 0o022, root).stdout.strip()
    traces = DataRoot(root).traces_dir(PROJECT, AGENT)
    shards = DataRoot(root).find_shards(PROJECT, AGENT, sid)
    on_the_way = [root / PROJECT, traces.parent, traces, traces / ".locks", shards[-1].path.parent]
    loosen([*on_the_way, shards[-1].path])
    done = run([sys.executable, "-c", REOPEN, str(root), sid], 0o022, root)
    assert len(tightened_lines(done)) == 1, done.stderr
    assert loose_modes(root) == []
