"""Resume throughput: the resume fold against a raw msgspec decode of the same lines.

Run ``python -m benchmarks.resume_fold`` (1M records) or ``--records 100000`` for a
quick look.  Every contender works on the same generated lines held in memory;
each is timed ``--repeat`` times, interleaved, and the best run (CPU time) is kept.
Only the ratios matter: absolute figures move with the machine's load.

* ``raw msgspec decode``: each line decoded to a Struct with the payload left raw
  (the floor DESIGN.md measures against);
* ``fold only``: ``resume_trace`` over records parsed beforehand;
* ``parse + fold``: ``resume_trace(read_records_from_bytes(data))``, what
  resuming a shard in memory costs end to end;
* ``parse only``: the reader alone, to show what the fold adds to it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import msgspec

from benchmarks._corpus import generate_records
from benchmarks._floor import RawEnvelope, best_cpu
from pentrace.domain.records import TraceRecord
from pentrace.infrastructure.trace.reader import read_records_from_bytes
from pentrace.projections.resume import resume_trace


def _raw_decode(lines: list[bytes]) -> Callable[[], int]:
    decode = msgspec.json.Decoder(RawEnvelope).decode

    def run() -> int:
        count = 0
        for line in lines:
            decode(line)
            count += 1
        return count

    return run


def _fold_only(parsed: list[TraceRecord]) -> Callable[[], int]:
    def run() -> int:
        return len(resume_trace(parsed).history)

    return run


def _parse_and_fold(data: bytes) -> Callable[[], int]:
    def run() -> int:
        return len(resume_trace(read_records_from_bytes(data)).history)

    return run


def _parse_only(data: bytes) -> Callable[[], int]:
    def run() -> int:
        return sum(1 for _ in read_records_from_bytes(data))

    return run


def main() -> None:
    """Generate the corpus, time every contender, print a table of ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    lines = list(generate_records(args.records, seed=7))
    data = b"\n".join(lines) + b"\n"
    parsed = list(read_records_from_bytes(data))
    result = resume_trace(parsed)
    print(
        f"{len(lines):,} records, {len(data) / 1e6:.0f} MB; history {len(result.history):,}, "
        f"carry-over {len(result.carry_over):,}, turns {result.session_turns:,}"
    )
    contenders = {
        "raw msgspec decode": _raw_decode(lines),
        "fold only": _fold_only(parsed),
        "parse + fold": _parse_and_fold(data),
        "parse only": _parse_only(data),
    }
    best = best_cpu(contenders, args.repeat)
    floor = best["raw msgspec decode"]
    print("| contender | best CPU s | records/s | time vs raw decode |")
    print("| --- | --- | --- | --- |")
    for name, seconds in best.items():
        rate = len(lines) / seconds if seconds else float("inf")
        print(f"| {name} | {seconds:.3f} | {rate:,.0f} | {seconds / floor:.2f}x |")


if __name__ == "__main__":
    main()
