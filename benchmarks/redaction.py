"""Redaction and RuntimeEvent building throughput, against a key-only baseline.

Run ``python -m benchmarks.redaction`` (50k realistic records) or
``python -m benchmarks.redaction 5000`` for a quick look.  The baseline is a
deep copy that applies Penguin's key-only rule (what Penguin pays per event);
pentrace's policy adds structure and value rules, so the interesting figure is
the ratio.  The steps after it build on each other: ``redact`` of the payload,
``runtime_event_from_record`` (the whole envelope, every field redacted), then
the msgspec encode, the ledger's re-redaction check (``is_redacted`` on the
envelope's builtins), then the ledger's row (``envelope_row``: builtins, the
check, three encodes) - the indexing path of ``ledger sync``.  The last line
times the check alone on envelopes built beforehand, every string unseen.
Each contender is timed ``--repeat`` times, interleaved, best run kept;
``--clock cpu`` (the default) counts this process's CPU time, which other jobs
sharing the machine skew far less than wall time.  Only ratios within one run
matter.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import msgspec

from benchmarks._corpus import generate_records
from pentrace.domain.records import TraceRecord, decode_line
from pentrace.domain.redaction import is_redacted, redact
from pentrace.domain.runtime_events import runtime_event_from_record
from pentrace.infrastructure.ledger.rows import as_envelope, envelope_row

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_PUNCT = re.compile(r"[^A-Za-z0-9_]+")
_EXACT = frozenset(
    {"authorization", "bearer_token", "client_secret", "id_token", "password"}
    | {"private_key", "refresh_token", "secret", "secret_key", "token"}
)
_encode = msgspec.json.Encoder().encode
_CACHES = frozenset({"_fixed", "_memo", "_plain_key_sets", "_headers", "_clean_stems"})


def _penguin_secret(key: str) -> bool:
    normal = _PUNCT.sub("_", _CAMEL.sub(r"\1_\2", key).replace("-", "_")).strip("_").lower()
    parts = normal.split("_")
    if normal in _EXACT or {"authorization", "password", "secret"} & set(parts):
        return True
    if {"key", "keys"} & set(parts) and {"api", "private"} & set(parts):
        return True
    prefixes = {"access", "auth", "bearer", "id", "refresh", "session"}
    return any(a in prefixes and b == "token" for a, b in pairwise(parts))


def key_only(value: Any) -> Any:
    """Penguin's policy: deep copy, whole value hidden under a secret key, nothing else."""
    if isinstance(value, dict):
        return {k: "[redacted]" if _penguin_secret(k) else key_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [key_only(item) for item in value]
    return value


def cold_caches() -> None:
    """Empty every memo of the redaction code, as if each text were new.

    Indexing sees each trace record once, so a run that found the previous
    run's texts already cached would flatter the memos.  Works on older
    checkouts too: it clears whatever ``lru_cache``s and memo containers
    (``_CACHES``) the ``pentrace.domain`` modules hold.
    """
    for name, module in list(sys.modules.items()):
        if not name.startswith("pentrace.domain"):
            continue
        for attribute, value in vars(module).items():
            if hasattr(value, "cache_clear"):
                value.cache_clear()
            elif attribute in _CACHES and hasattr(value, "clear"):
                value.clear()


def timed(run: Callable[[], int], clock: Callable[[], float]) -> tuple[float, int]:
    """Seconds one run takes on ``clock`` from cold caches, collector off, and its result."""
    cold_caches()
    gc.collect()
    gc.disable()
    try:
        started = clock()
        result = run()
        return clock() - started, result
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    """Build the corpus, time every contender and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("records", nargs="?", type=int, default=50_000, help="records to process")
    parser.add_argument("--seed", type=int, default=1, help="corpus seed")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per contender")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="what to time")
    args = parser.parse_args(argv)

    lines = list(generate_records(args.records, args.seed))
    records = [record for record in map(decode_line, lines) if record is not None]
    payloads = [record.payload() for record in records]

    def baseline() -> int:
        return sum(1 for payload in payloads if key_only(payload) is not None)

    def policy() -> int:
        return sum(len(redact(payload).paths) >= 0 for payload in payloads)

    def event(position: int, line: bytes) -> Any:
        return runtime_event_from_record(
            TraceRecord(line, position),
            session_id="session-2026-07-18-11-10-22-0000abcd",
            position=position,
            project="bench",
            agent="agent",
            directory="/srv/bench",
        )

    def events() -> int:
        return sum(event(position, line) is not None for position, line in numbered)

    def encoded() -> int:
        return sum(len(_encode(event(position, line))) > 0 for position, line in numbered)

    def checked() -> int:
        return sum(
            is_redacted(msgspec.to_builtins(event(position, line))) for position, line in numbered
        )

    def check_only() -> int:
        return sum(is_redacted(envelope) for envelope in built)

    def rows() -> int:
        return sum(
            len(envelope_row(as_envelope(event(position, line)), 0)) > 0
            for position, line in numbered
        )

    numbered = list(enumerate(lines, start=1))
    built = [msgspec.to_builtins(event(position, line)) for position, line in numbered]
    contenders: dict[str, Callable[[], int]] = {
        "key-only deep copy (Penguin's policy, baseline)": baseline,
        "pentrace redact(payload)": policy,
        "runtime_event_from_record": events,
        "runtime_event_from_record + msgspec encode": encoded,
        "runtime_event_from_record + is_redacted (the ledger's check)": checked,
        "runtime_event_from_record + ledger row (envelope_row)": rows,
        "is_redacted alone (envelopes built beforehand)": check_only,
    }
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, run in contenders.items():
            elapsed, count = timed(run, clock)
            if count != len(records):
                raise SystemExit(f"{name} processed {count} of {len(records)} records")
            best[name] = min(elapsed, best.get(name, elapsed))

    size = sum(len(line) for line in lines)
    base = len(records) / best["key-only deep copy (Penguin's policy, baseline)"]
    print(
        f"{len(records)} records, {size / 1e6:.1f} MB, best of {args.repeat}, {args.clock} time\n"
    )
    print("| step | rec/s | MB/s | vs key-only baseline |")
    print("| --- | ---: | ---: | ---: |")
    for name, elapsed in best.items():
        rate = len(records) / elapsed
        print(f"| {name} | {rate / 1e3:,.1f}k | {size / elapsed / 1e6:,.1f} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
