"""Typed OmniMessage decode and encode against raw msgspec and stdlib json.

Run ``python -m benchmarks.omnimessage_codec`` (100k records) or with
``--records 20000`` for a quick look.  Every contender works on the same
generated lines held in memory; each is timed ``--repeat`` times, interleaved,
and the best run in CPU time is kept.  Only the ratios matter.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from typing import Any

import msgspec

from benchmarks._corpus import generate_records
from benchmarks._floor import print_rates
from pentrace.domain import omnimessage as om


class _RawEnvelope(msgspec.Struct, gc=False):
    """The floor: envelope header typed, payload left as raw JSON bytes."""

    timestamp: str
    type: str
    payload: msgspec.Raw
    origin: list[str] | None = None


def _each(items: list[Any], step: Callable[[Any], object]) -> Callable[[], int]:
    def run() -> int:
        for item in items:
            step(item)
        return len(items)

    return run


def _best_of(contenders: dict[str, Callable[[], int]], repeat: int) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, run in contenders.items():
            gc.collect()
            start = time.process_time()
            run()
            elapsed = time.process_time() - start
            best[name] = min(elapsed, best.get(name, elapsed))
    return best


def _retyped(envelope: om.Envelope) -> om.Envelope:
    payload = envelope.payload
    fresh = payload if isinstance(payload, om.UnknownPayload) else msgspec.structs.replace(payload)
    return msgspec.structs.replace(envelope, payload=fresh)


def main(argv: list[str] | None = None) -> None:
    """Time every codec on one corpus and print a Markdown table of rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000, help="records to generate")
    parser.add_argument("--seed", type=int, default=1, help="corpus seed")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per contender")
    args = parser.parse_args(argv)

    lines = list(generate_records(args.records, args.seed))
    decoded = [om.decode_envelope(line) for line in lines]
    if any(
        om.encode_envelope(envelope) != line for envelope, line in zip(decoded, lines, strict=True)
    ):
        raise SystemExit("decode + encode_envelope changed a line")
    retyped = [_retyped(envelope) for envelope in decoded]
    dicts = [json.loads(line) for line in lines]
    raw_decoder = msgspec.json.Decoder(_RawEnvelope)
    contenders = {
        "decode: msgspec Struct, payload Raw (floor)": _each(lines, raw_decoder.decode),
        "decode: decode_envelope (typed)": _each(lines, om.decode_envelope),
        "decode: msgspec to dict": _each(lines, msgspec.json.decode),
        "decode: stdlib json.loads": _each(lines, json.loads),
        "encode: encode_envelope, unmodified": _each(decoded, om.encode_envelope),
        "encode: encode_envelope, rebuilt Structs": _each(retyped, om.encode_envelope),
        "encode: msgspec from dict": _each(dicts, msgspec.json.encode),
        "encode: stdlib json.dumps": _each(
            dicts, lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
        ),
    }
    results = _best_of(contenders, args.repeat)
    stdlib = {
        kind: results[f"{kind}: stdlib json.{fn}"]
        for kind, fn in (("decode", "loads"), ("encode", "dumps"))
    }
    print_rates(
        "codec",
        results,
        {"vs stdlib json": lambda name, elapsed: stdlib[name.split(":")[0]] / elapsed},
        records=args.records,
        size=sum(map(len, lines)),
        repeat=args.repeat,
    )


if __name__ == "__main__":
    main()
