"""The sync's per-event build cost: ``build_session`` over a corpus, µs of CPU per event.

    python -m benchmarks.sync_build ROOT                 # every session under ROOT
    python -m benchmarks.sync_build ROOT --sessions 200  # the first 200 sessions
    python -m benchmarks.sync_build ROOT --profile 50    # cProfile over 50 sessions, by type

``ROOT`` is a data root (``PENGUIN_HOME``), such as the 500k corpus that
:func:`benchmarks.cli_corpus.write_corpus` writes.  Each round times, in this
one process and interleaved:

* the floor: the same shards read and each line decoded by msgspec into
  builtins (what any reader of these records pays at least);
* ``build_session`` of every session with a row form 2 codec (a zstd
  dictionary trained on the corpus' first envelopes, derived columns NULL),
  exactly what a ``ledger sync`` worker does per session.

Figures are CPU seconds of this process (``time.process_time``), with the
cycle collector on as in a sync; the best of ``--rounds`` is kept for each.
Only ratios within one run matter.  ``--profile N`` prints where the time of
``build_session`` goes over the first N sessions, and the µs per event of
each record type (``event_msg/token_usage`` ...), each timed alone.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path

import msgspec

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.runtime import SessionEvents
from pentrace.infrastructure.ledger.backend.codec import RowCodec, train_dictionary
from pentrace.infrastructure.ledger.bulk import build_session
from pentrace.infrastructure.ledger.rows import (
    ROW_COLUMNS,
    encoded_values,
    envelope_row,
    stored_row,
)
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, iter_sessions
from pentrace.infrastructure.trace.reader import read_session

_SAMPLES = 2000
_PER_SESSION = 20
_decode = msgspec.json.Decoder().decode
_encode = JsonEncoder().encode


def codec_for(refs: list[SessionRef]) -> RowCodec:
    """A row form 2 codec with a dictionary trained as ``ledger sync`` trains its first."""
    samples: list[bytes] = []
    for ref in refs:
        mapper = SessionEvents(ref.key)
        for position, record in enumerate(read_session(ref.shards), start=1):
            samples.append(encoded_values(mapper.encoded(position, record), 0)[-1])
            if position >= _PER_SESSION:
                break
        if len(samples) >= _SAMPLES:
            break
    dictionary = train_dictionary(samples[:_SAMPLES], 1)
    return RowCodec({1: dictionary}, 1, derived_ids=True)


def floor(refs: list[SessionRef]) -> int:
    """Read every shard and msgspec-decode each non-empty line; returns the lines."""
    count = 0
    for ref in refs:
        for shard in ref.shards:
            for line in shard.path.read_bytes().split(b"\n"):
                if line:
                    _decode(line)
                    count += 1
    return count


def build(refs: list[SessionRef], codec: RowCodec) -> int:
    """``build_session`` of every session into row form 2; returns the rows."""
    count = 0
    for ref in refs:
        built = build_session(ref, frozenset(), 0, 1, codec)
        if built.failures:
            raise SystemExit(f"{ref.session_id}: {built.failures[0].message}")
        count += len(built.rows)
    return count


def timed(run: object, *args: object) -> tuple[float, int]:
    """CPU seconds of ``run(*args)`` and its result."""
    started = time.process_time()
    result = run(*args)  # type: ignore[operator]
    return time.process_time() - started, int(result)


def by_type(refs: list[SessionRef], codec: RowCodec) -> dict[str, tuple[int, float]]:
    """Per record type (envelope type / payload type): records and µs of CPU per record."""
    gc.disable()
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for ref in refs:
        mapper = SessionEvents(ref.key)
        for position, record in enumerate(read_session(ref.shards), start=1):
            started = time.perf_counter_ns()
            encoded_values(mapper.encoded(position, record), 1, codec)
            spent = time.perf_counter_ns() - started
            slot = totals[f"{record.kind}/{record.ptype}"]
            slot[0] += 1
            slot[1] += spent / 1000
    gc.enable()
    return {kind: (int(n), us / n) for kind, (n, us) in totals.items()}


def check(refs: list[SessionRef], codec: RowCodec) -> int:
    """Hold every row ``build_session`` gives to the exact path's (full redaction, every
    check of ``envelope_row``, ``stored_row``); returns the rows compared."""
    compared = 0
    for ref in refs:
        built = build_session(ref, frozenset(), 0, 1, codec)
        mapper = SessionEvents(ref.key)
        for row, (position, record) in zip(
            built.rows, enumerate(read_session(ref.shards), start=1), strict=True
        ):
            event = mapper.event(position, record)
            plain = envelope_row(event.to_builtins(), 1, _encode(event.to_builtins()))
            exact = stored_row(plain, codec)
            if row != tuple(exact[column] for column in ROW_COLUMNS):
                raise SystemExit(f"{ref.session_id} record {position}: the rows differ")
            compared += 1
    return compared


def main(argv: list[str] | None = None) -> None:
    """Time the floor and the build, or profile the build."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("root", type=Path, help="a data root (PENGUIN_HOME)")
    parser.add_argument("--sessions", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; best kept")
    parser.add_argument("--profile", type=int, default=0, help="cProfile N sessions instead")
    parser.add_argument(
        "--check", action="store_true", help="compare every row to the exact path's instead"
    )
    args = parser.parse_args(argv)
    refs = list(iter_sessions(DataRoot(args.root)))
    if args.sessions:
        refs = refs[: args.sessions]
    codec = codec_for(refs)
    if args.check:
        print(f"{check(refs, codec)} rows of {len(refs)} sessions equal the exact path's")
        return
    if args.profile:
        sample = refs[: args.profile]
        build(sample, codec)  # warm the caches a long sync has warm
        profiler = cProfile.Profile()
        profiler.enable()
        build(sample, codec)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(35)
        rows = sorted(by_type(sample, codec).items(), key=lambda item: -item[1][0] * item[1][1])
        print("| record type | records | µs per record (wall, collector off) |")
        print("|---|---:|---:|")
        for kind, (count, micros) in rows:
            print(f"| `{kind}` | {count} | {micros:.1f} |")
        return
    best_floor = best_build = float("inf")
    events = lines = 0
    for _ in range(args.rounds):
        seconds, lines = timed(floor, refs)
        best_floor = min(best_floor, seconds)
        seconds, events = timed(build, refs, codec)
        best_build = min(best_build, seconds)
    floor_us = best_floor / lines * 1e6
    build_us = best_build / events * 1e6
    print(f"sessions {len(refs)}, lines {lines}, events {events}, rounds {args.rounds}")
    print("| contender | CPU s (best) | µs per event | x floor |")
    print("|---|---:|---:|---:|")
    print(f"| floor: read + msgspec decode | {best_floor:.2f} | {floor_us:.2f} | 1.00 |")
    print(f"| build_session, row form 2 | {best_build:.2f} | {build_us:.2f} | "
          f"{build_us / floor_us:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
