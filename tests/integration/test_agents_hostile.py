"""Hostile stores: a huge line, files that cannot be read, loops, odd paths (issue #28).

Each gets a clear warning naming the file (and line), and nothing else is lost:
the other files and lines of the same pass are imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.foreign_logs import ClaudeLog, claude_turn, kept_rows, text, trace_lines
from tests.support import assert_clean_error, clean_env, cli, run_pentrace

pytestmark = pytest.mark.usefixtures("own_stores")


def _store(tmp_path: Path) -> Path:
    return tmp_path / "claude" / "projects" / "-home-u-app"


def _good_file(store: Path, name: str) -> Path:
    log = ClaudeLog(name)
    claude_turn(log, 1)
    return log.write(store)


_PROBE = (
    "import resource, sys\n"
    "from pentrace.cli.app import main\n"
    "try:\n    main()\nfinally:\n"
    "    print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


def _peak_kib(
    tmp_path: Path, data_root: Path, source: Path
) -> tuple[int, subprocess.CompletedProcess[str]]:
    """The peak RSS (KiB) of ``pentrace import --from claude-code SOURCE``, and the run."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "--data-root", str(data_root), "import", "--from",
         "claude-code", str(source)],
        env=clean_env(HOME=str(tmp_path / "home")),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return int(done.stderr.rsplit("maxrss", 1)[1].split()[0]), done


def test_a_huge_line_is_kept_by_its_length_and_memory_stays_bounded(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log = ClaudeLog("11111111-0000-4000-8000-000000000000")
    claude_turn(log, 1)
    path = log.write(store)
    size = 160 * 1024 * 1024
    head = b'{"type":"user","message":{"content":"'
    with path.open("ab") as handle:
        handle.write(head)
        block = b"x" * (1024 * 1024)
        for _ in range(size // len(block)):
            handle.write(block)
        handle.write(b'"}}\n')
    claude_turn(log, 2)
    with path.open("ab") as handle:
        handle.write(b"".join(json.dumps(r).encode() + b"\n" for r in log.rows[-8:]))
    root = tmp_path / "data"

    small = ClaudeLog("22222222-0000-4000-8000-000000000000")
    claude_turn(small, 1)
    baseline, _ = _peak_kib(tmp_path, tmp_path / "baseline", small.write(tmp_path / "small" / "-p"))
    peak, done = _peak_kib(tmp_path, root, path)

    # Held whole, the line alone would take 160 MiB; read as it is, memory grows by less
    # (the reader keeps at most the 64 MiB a line may have before it skips the rest).
    assert peak - baseline < size // 1024, f"{peak - baseline} KiB over a {baseline} KiB start"
    assert f"{path}:" in done.stderr
    assert "longer than pentrace keeps" in done.stderr
    oversized = [r for r in trace_lines(root) if r["payload"].get("record_type") == "oversized"]
    assert [r["foreign"]["size"] for r in oversized] == [len(head) + size + 3]
    texts = [r["payload"]["text"] for r in trace_lines(root) if r["payload"].get("type") == "text"]
    assert "done 2" in texts  # what follows the huge line is imported


def test_files_that_cannot_be_read_are_reported_and_the_others_imported(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    good = _good_file(store, "22222222-0000-4000-8000-000000000000")
    (store / "33333333-dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    locked = _good_file(store, "44444444-0000-4000-8000-000000000000")
    locked.chmod(0)
    os.mkfifo(store / "55555555-fifo.jsonl")
    root = tmp_path / "data"

    result = cli(root, "import", "--from", "claude-code", str(store.parent.parent))

    assert result.exit_code == 0, result.output
    assert f"cannot read {store / '33333333-dangling.jsonl'}" in result.stderr
    assert "55555555-fifo.jsonl" in result.stderr
    sessions = {r["payload"].get("session_id") for r in trace_lines(root)} - {None}
    assert "22222222-0000-4000-8000-000000000000" in sessions
    if os.geteuid() != 0:  # root reads a file whatever its mode
        assert f"{locked}" in result.stderr
    assert set(good.read_bytes().splitlines()) <= set(kept_rows(root))


def test_a_symlink_loop_in_the_store_is_walked_once(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _good_file(store, "66666666-0000-4000-8000-000000000000")
    (store / "again").symlink_to(store)
    root = tmp_path / "data"

    result = cli(root, "import", "--from", "claude-code", str(store.parent.parent))

    assert result.exit_code == 0, result.output
    assert "symlink loop" in result.stderr
    assert len({r["payload"].get("session_id") for r in trace_lines(root)} - {None}) == 1


def test_a_path_that_does_not_exist_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    result = cli(tmp_path / "data", "import", "--from", "claude-code", str(tmp_path / "nope"))

    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'nope'} does not exist" in result.stderr


def test_an_unknown_agent_is_a_clear_error(tmp_path: Path) -> None:
    done = run_pentrace(tmp_path / "data", "import", "--from", "cursor", env=clean_env())

    assert_clean_error(done, 2, "unknown agent 'cursor': expected one of claude-code, codex")


def _long_session(folder: Path, name: str, megabytes: int) -> Path:
    """A session of about ``megabytes`` of ordinary lines (20 KB prompts and answers)."""
    log = ClaudeLog(name)
    turn = 0
    while len(log.rows) * 20_000 < megabytes * 1024 * 1024:
        log.prompt(f"{turn} " + "p" * 10_000)
        log.answer([text("a" * 10_000)], message_id=f"msg_{turn}", request_id=f"req_{turn}",
                   stop_reason="end_turn")  # fmt: skip
        turn += 1
    return log.write(folder)


@pytest.mark.slow
def test_memory_stays_bounded_as_a_session_file_grows_tenfold(tmp_path: Path) -> None:
    """A file is streamed line by line, batch by batch: ten times the file, about the same
    peak memory (the 2 GB figure is in docs/performance.md, ``benchmarks.agents_ccusage``)."""
    small = _long_session(tmp_path / "small" / "-p", "77777777-0000-4000-8000-000000000001", 4)
    large = _long_session(tmp_path / "large" / "-p", "77777777-0000-4000-8000-000000000002", 40)
    assert large.stat().st_size > 9 * small.stat().st_size

    small_peak, _ = _peak_kib(tmp_path, tmp_path / "data-small", small)
    large_peak, _ = _peak_kib(tmp_path, tmp_path / "data-large", large)

    # Held whole, the large file alone would add 40 MiB (far more as parsed objects).
    assert large_peak < 1.25 * small_peak, f"{large_peak} KiB against {small_peak} KiB"
    rows = [r for r in trace_lines(tmp_path / "data-large") if r["payload"].get("type") == "text"]
    assert len(rows) == len(large.read_bytes().splitlines())
