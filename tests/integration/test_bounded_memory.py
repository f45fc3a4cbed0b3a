"""Commands over huge sessions hold memory that does not grow with the session (issue #32).

Each command runs as a real process, inside a small wrapper process that reports the
peak resident size of its children (``getrusage(RUSAGE_CHILDREN).ru_maxrss``: the
command and any worker it forks).  The same command runs on a session and on one four
times as long, in the same test; the longer one may hold only a little more (a ratio,
never a time).  Before the bound, ``stats tokens --sync`` built a session's ledger rows
all at once (about a kilobyte per record, even for a ``{}`` line): four times the
records took about twice the peak.  ``docs/performance.md`` has the real-size figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from tests.support import clean_env

pytestmark = pytest.mark.usefixtures("own_stores")

META: Final = (
    b'{"timestamp":"2026-07-18T03:10:22.531Z","type":"session_meta","payload":'
    b'{"session_id":"s1","provider":"p","model_id":"m"}}\n'
)
TINY: Final = b'{"type":"event_msg","payload":{"type":"request_begin"}}\n'
SESSION: Final = "default_project/default_agent/s1"
# The peak of the longer run may exceed the shorter one's by this share: what is left is
# the interpreter, the read buffers and the batches, which do not grow with the session.
SLACK: Final = 1.25

_WRAPPER: Final = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "pentrace", *sys.argv[1:]],
                      stdin=subprocess.DEVNULL, capture_output=True)
sys.stderr.buffer.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _shard(root: Path, body: list[bytes]) -> None:
    folder = root / "default_project" / "agents" / "default_agent" / "traces" / "2026-07-18"
    folder.mkdir(parents=True)
    with (folder / "s1_001.jsonl").open("wb") as handle:
        handle.write(META)
        for part in body:
            handle.write(part)


def peak_kib(root: Path, *args: str) -> int:
    """The command's peak resident size in KiB (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, "--data-root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=clean_env(),
    )
    code, peak = done.stdout.split()
    assert code == "0", done.stderr
    return int(peak)


def _blank_and_empty(root: Path, count: int) -> None:
    # The shard: blank lines, then ``{}`` lines (records of no known type).
    _shard(root, [b"\n" * count, b"{}\n" * count])


@pytest.mark.timeout(900)
def test_stats_sync_over_blank_and_empty_lines_holds_the_same_memory_for_four_times_as_many(
    tmp_path: Path,
) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    _blank_and_empty(small, 25_000)
    _blank_and_empty(large, 100_000)
    base = peak_kib(small, "stats", "tokens", "--sync")
    grown = peak_kib(large, "stats", "tokens", "--sync")
    assert grown <= base * SLACK, (base, grown)


@pytest.mark.timeout(900)
def test_resume_check_over_tiny_records_holds_the_same_memory_for_four_times_as_many(
    tmp_path: Path,
) -> None:
    # Requests that never complete: resume returns none of them, and must keep none.
    small, large = tmp_path / "small", tmp_path / "large"
    _shard(small, [TINY * 100_000])
    _shard(large, [TINY * 400_000])
    base = peak_kib(small, "resume-check", SESSION, "--json")
    grown = peak_kib(large, "resume-check", SESSION, "--json")
    assert grown <= base * SLACK, (base, grown)
