"""Two real processes, one shard: the second is refused, or queues and never interleaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pentrace.domain.records import decode_line

CHILD = Path(__file__).with_name("writer_child.py")


def start(shard: Path, tag: str, count: int, mode: str, *extra: str) -> subprocess.Popen[str]:
    """Run writer_child.py in batch mode."""
    return subprocess.Popen(
        [sys.executable, str(CHILD), "batch", str(shard), tag, str(count), mode, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def finish(child: subprocess.Popen[str]) -> tuple[int, str]:
    """Let a child run to its end; return its exit code and output."""
    out, _ = child.communicate(input="go\n", timeout=120)
    return child.returncode, out


def texts(shard: Path) -> list[str]:
    """The text of every record, each line parsed on its own."""
    found = []
    for number, line in enumerate(shard.read_bytes().split(b"\n")[:-1], start=1):
        record = decode_line(line, number)
        assert record is not None
        found.append(record.payload()["text"])
    return found


def test_a_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    shard = tmp_path / "session-2026-11-29-10-00-00-0123abcd_001.jsonl"
    first = start(shard, "a", 5, "nowait", "hold")
    assert first.stdout is not None
    assert first.stdout.readline() == "LOCKED\n"
    code, out = finish(start(shard, "b", 5, "nowait"))
    assert code == 3
    assert out.startswith("LOCKED-OUT ")
    assert f"held by pid {first.pid} on host " in out
    assert "two writers would interleave" in out
    code, out = finish(first)
    assert (code, out) == (0, "DONE\n")
    assert texts(shard) == [f"a-{i}-" + "a" * (i % 7) * 3000 for i in range(5)]


def test_waiting_writers_take_turns_and_no_line_is_interleaved(tmp_path: Path) -> None:
    shard = tmp_path / "session-2026-11-29-10-00-00-0123abcd_001.jsonl"
    count = 300
    writers = [start(shard, tag, count, "wait") for tag in ("a", "b", "c")]
    for writer in writers:
        code, out = finish(writer)
        assert code == 0, out
        assert out == "LOCKED\nDONE\n"
    got = texts(shard)
    assert len(got) == 3 * count
    # Each writer held the lock for its whole run, so its records form one block.
    blocks = [got[i : i + count] for i in range(0, len(got), count)]
    tags = [block[0].split("-")[0] for block in blocks]
    assert sorted(tags) == ["a", "b", "c"]
    for tag, block in zip(tags, blocks, strict=True):
        assert block == [f"{tag}-{i}-" + tag * (i % 7) * 3000 for i in range(count)]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    shard = tmp_path / "session-2026-11-29-10-00-00-0123abcd_001.jsonl"
    holder = start(shard, "a", 1, "nowait", "hold")
    assert holder.stdout is not None
    assert holder.stdout.readline() == "LOCKED\n"
    assert f'"pid": {holder.pid}' in (tmp_path / f"{shard.name}.lock").read_text()
    give_up = time.monotonic() + 30
    while not shard.exists() and time.monotonic() < give_up:
        time.sleep(0.01)  # its one record, written right after it printed LOCKED
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=30)
    code, out = finish(start(shard, "b", 1, "nowait"))
    assert (code, out) == (0, "LOCKED\nDONE\n")
    assert f'"pid": {holder.pid}' not in (tmp_path / f"{shard.name}.lock").read_text()
    assert texts(shard) == ["a-0-", "b-0-"]
