"""SIGKILL a real writer process at random moments: acknowledged requests always survive.

A child process (writer_child.py) appends requests with the default durability
policy and prints ``ACK <n>`` after each ``request_end`` append returns.  The
test kills it with SIGKILL after a seeded-random number of ACKs, either a random
few milliseconds later or while it appends an 8 MB record, then reads the shard
the way the trace reader does and checks that every acknowledged request is
present, whole, in order and exactly once.
The next child resumes appending to the same file, healing any torn tail.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from pentrace.domain.records import MalformedLine, TraceRecord, decode_line
from pentrace.infrastructure.trace.reader import ParseReport, read_shard

CHILD = Path(__file__).with_name("writer_child.py")
ITERATIONS = 25


def read_like_the_reader(path: Path) -> tuple[list[TraceRecord], int, int, bool]:
    """Records, malformed and healed middle lines, and whether the last line is torn."""
    report = ParseReport()
    records = list(read_shard(path, report=report))
    return records, report.skipped_count, report.healed_count, report.torn_tail is not None


def check_acknowledged(records: list[TraceRecord], acked: set[int]) -> None:
    """Each acknowledged request appears once, whole and contiguous."""
    starts = {}
    for i, rec in enumerate(records):
        if rec.ptype == "text":
            n = int(rec.payload()["text"].removeprefix("req-"))
            assert n not in starts, f"request {n} written twice"
            starts[n] = i
    for n in sorted(acked):
        assert n in starts, f"acknowledged request {n} is missing"
        i = starts[n]
        got = records[i + 1 : i + 5]
        assert [r.ptype for r in got] == [
            "request_begin",
            "tool_call",
            "tool_call_output",
            "request_end",
        ]
        assert got[1].tool_call_id == got[2].tool_call_id == f"call_{n}"
        assert got[3].status == "completed"


def run_and_kill(
    shard: Path, first: int, seed: int, rng: random.Random, mode: str = "requests"
) -> set[int]:
    """Start a writer, let it acknowledge a few requests, SIGKILL it; return its ACKs.

    ``mode`` is the writer_child command: ``session`` starts the shard with a session_meta.
    """
    wanted = rng.randint(1, 3)
    # Half the kills aim at an 8 MB write in progress, half at a random moment.
    big_after = wanted if rng.random() < 0.5 else -1
    child = subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(shard), str(first), str(seed), str(big_after)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    acked: set[int] = set()
    try:
        while True:
            word, number = child.stdout.readline().split()
            if word == "ACK":
                acked.add(int(number))
            if word == "BIG" or (big_after < 0 and len(acked) >= wanted):
                break
        if big_after >= 0:
            wait_for_growth(shard)
            time.sleep(rng.uniform(0, 0.001))
        else:
            time.sleep(rng.uniform(0, 0.004))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        # Anything the child printed before dying was acknowledged too.
        rest = [line.split() for line in child.stdout.read().splitlines()]
        acked.update(int(number) for word, number in rest if word == "ACK")
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return acked


def wait_for_growth(path: Path) -> None:
    """Return as soon as the shard grows: the child's 8 MB write(2) is then under way."""
    start = path.stat().st_size if path.exists() else 0
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        if path.exists() and path.stat().st_size > start:
            return


def ends_torn(path: Path) -> bool:
    """True when the shard's last line is a fragment that does not parse (a torn tail).

    A kill can also cut a write exactly before a record's newline: that last
    line parses, so it is a record, not a torn tail.
    """
    with path.open("rb") as handle:
        handle.seek(max(0, path.stat().st_size - 9_000_000))
        tail = handle.read()
    fragment = tail[tail.rfind(b"\n") + 1 :]
    try:
        decode_line(fragment)
    except MalformedLine:
        return True
    return False


def test_acknowledged_requests_survive_sigkill_and_the_next_writer_heals_the_tail(
    tmp_path: Path,
) -> None:
    shard = tmp_path / "session-2026-11-29-10-00-00-0123abcd_001.jsonl"
    rng = random.Random(20261129)
    acked: set[int] = set()
    torn_seen = 0
    for iteration in range(ITERATIONS):
        acked |= run_and_kill(shard, iteration * 1000, iteration, rng)
        torn_seen += ends_torn(shard)
    records, malformed, healed, torn = read_like_the_reader(shard)
    check_acknowledged(records, acked)
    # Every torn tail but a final one was healed by the next writer: it became one
    # healed torn fragment (legal, not malformed) and the records after it are intact.
    assert torn == ends_torn(shard)
    assert (healed, malformed) == (torn_seen - torn, 0)
    # Strict reading (what import does) accepts the healed fragments.
    assert len(list(read_shard(shard, strict=True))) == len(records)
    assert torn_seen > 0, "no kill landed mid-write; the healing path went untested"
    print(f"{len(acked)} acknowledged requests, {torn_seen} torn tails")
