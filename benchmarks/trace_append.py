"""Trace append throughput: pentrace's ShardWriter against raw buffered appends.

Run ``python -m benchmarks.trace_append`` (200k realistic records, about 77 MB)
or ``python -m benchmarks.trace_append 20000`` for a quick look.  Every
contender starts from the same decoded envelopes and encodes them itself, so
the figures are "envelope in memory to line in the page cache".  Each is timed
``--repeat`` times, interleaved, best run kept; the fsync contender runs once
on the first ``--fsync-records`` records only (it is bound by the disk, not
the CPU).  Only ratios within one run matter.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from benchmarks._corpus import generate_records
from benchmarks._floor import print_rates
from pentrace.infrastructure.trace.writer import Durability, ShardWriter

Contender = Callable[[Path, list[Any]], None]
_encode = msgspec.json.Encoder().encode


def raw_msgspec(path: Path, values: list[Any]) -> None:
    """The floor: msgspec encode and a buffered file write, no per-record syscall."""
    with path.open("wb") as out:
        write = out.write
        for value in values:
            write(_encode(value) + b"\n")


def stdlib_json(path: Path, values: list[Any]) -> None:
    """What a plain Python writer does: json.dumps and a buffered write."""
    with path.open("wb") as out:
        write = out.write
        for value in values:
            write(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")


def one_write_per_record(path: Path, values: list[Any]) -> None:
    """The syscall floor: one O_APPEND write(2) per record, no checks, no lock."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for value in values:
            os.write(fd, _encode(value) + b"\n")
    finally:
        os.close(fd)


def writer(durability: Durability) -> Contender:
    """ShardWriter.append, one record per call, with the given policy."""

    def run(path: Path, values: list[Any]) -> None:
        with ShardWriter(path, durability=durability) as shard:
            append = shard.append
            for value in values:
                append(_encode(value))

    return run


def writer_per_request(path: Path, values: list[Any]) -> None:
    """ShardWriter.append_many, one batch per request (an aggregate saved per request)."""
    with ShardWriter(path, durability=Durability.NONE) as shard:
        batch: list[bytes] = []
        for value in values:
            batch.append(_encode(value))
            if value["payload"].get("type") == "request_end":
                shard.append_many(batch)
                batch = []
        shard.append_many(batch)


def timed(run: Contender, folder: Path, values: list[Any]) -> tuple[float, int]:
    """Seconds for one run into a fresh file, and the bytes it wrote."""
    path = folder / "session-2026-07-18-11-10-22-00000000_001.jsonl"
    gc.collect()
    start = time.perf_counter()
    run(path, values)
    elapsed = time.perf_counter() - start
    size = path.stat().st_size
    path.unlink()
    return elapsed, size


def main(argv: list[str] | None = None) -> None:
    """Generate the corpus, time every contender and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("records", nargs="?", type=int, default=200_000, help="records to write")
    parser.add_argument("--seed", type=int, default=1, help="corpus seed")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per contender")
    parser.add_argument(
        "--fsync-records", type=int, default=20_000, help="records for the fsync run (disk-bound)"
    )
    args = parser.parse_args(argv)

    values = [msgspec.json.decode(line) for line in generate_records(args.records, args.seed)]
    contenders: dict[str, Contender] = {
        "raw: msgspec encode + buffered write (floor)": raw_msgspec,
        "one O_APPEND write(2) per record, no checks": one_write_per_record,
        "ShardWriter.append, Durability.NONE": writer(Durability.NONE),
        "ShardWriter.append_many per request, NONE": writer_per_request,
        "stdlib json.dumps + buffered write": stdlib_json,
    }
    best: dict[str, float] = {}
    sizes: set[int] = set()
    with tempfile.TemporaryDirectory(
        prefix="pentrace-bench-", dir=os.environ.get("BENCH_DIR")
    ) as tmp:
        folder = Path(tmp)
        for _ in range(args.repeat):
            for name, run in contenders.items():
                elapsed, size = timed(run, folder, values)
                sizes.add(size)
                best[name] = min(elapsed, best.get(name, elapsed))
        synced = values[: args.fsync_records]
        elapsed, _ = timed(writer(Durability.PER_REQUEST), folder, synced)
        rate_name = f"ShardWriter.append, PER_REQUEST (fsync at request_end; {len(synced)} rec)"
        # Stored as the time the whole corpus would take at the measured rate.
        best[rate_name] = elapsed * args.records / len(synced)

    if len(sizes) != 1:
        raise SystemExit(f"contenders wrote different amounts: {sorted(sizes)}")
    floor = args.records / best["raw: msgspec encode + buffered write (floor)"]
    stdlib = args.records / best["stdlib json.dumps + buffered write"]
    ratios = {
        "vs raw msgspec": lambda _name, elapsed: args.records / elapsed / floor,
        "vs stdlib json": lambda _name, elapsed: args.records / elapsed / stdlib,
    }
    print_rates("writer", best, ratios, records=args.records, size=sizes.pop(), repeat=args.repeat)


if __name__ == "__main__":
    main()
