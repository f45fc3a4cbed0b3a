"""What the benchmarks compare against: the raw msgspec decode floor and best-of CPU timing."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec


class RawEnvelope(msgspec.Struct, gc=False):
    """The floor: envelope header typed, payload left as raw JSON bytes."""

    timestamp: str | None = None
    type: str | None = None
    payload: msgspec.Raw = msgspec.Raw(b"null")
    origin: list[str] | None = None


raw_decoder = msgspec.json.Decoder(RawEnvelope)


def per_line(path: Path, decode: Callable[[bytes], object]) -> Callable[[], int]:
    """Read ``path`` and decode each non-empty line with ``decode``; returns the line count."""

    def run() -> int:
        count = 0
        for line in path.read_bytes().split(b"\n"):
            if line:
                decode(line)
                count += 1
        return count

    return run


def best_cpu(contenders: dict[str, Callable[[], int]], repeat: int) -> dict[str, float]:
    """Best CPU seconds of each contender over ``repeat`` interleaved rounds."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeat):
        for name, run in contenders.items():
            gc.collect()
            start = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - start)
    return best


def print_rates(
    head: str,
    elapsed: Mapping[str, float],
    ratios: Mapping[str, Callable[[str, float], float]],
    *,
    records: int,
    size: int,
    repeat: int,
) -> None:
    """A Markdown table of records per second, one row per contender.

    Each of ``ratios`` (column title -> ``f(name, seconds)``) adds a column, e.g.
    ``vs stdlib json``.  ``size`` is the corpus in bytes, shown in the line above.
    """
    print(f"{records} records, {size / 1e6:.1f} MB, best of {repeat}\n")
    print("| " + " | ".join([head, "rec/s", *ratios]) + " |")
    print("| --- | ---: |" + " ---: |" * len(ratios))
    for name, seconds in elapsed.items():
        cells = [f"{records / seconds / 1e3:,.0f}k"]
        cells += [f"{ratio(name, seconds):.2f}" for ratio in ratios.values()]
        print("| " + " | ".join([name, *cells]) + " |")
