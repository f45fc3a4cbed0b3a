"""Redaction and RuntimeEvent building throughput, against a key-only baseline.

The screen (ADR 0021) rows: the screen alone over each record's bytes (both
engines), ``redact_decoded`` (screen, then the walk where it cannot clear the
record) over the whole mix and over the records it clears, the full
redaction of records that do hold secrets (the provider corpus planted in
tool output), and ``runtime_event_from_record`` and ``ledger sync`` with the
screen off ("before") and on ("after"), in the same run.

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
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec

from benchmarks._corpus import generate_records
from pentrace.domain.records import TraceRecord, decode_line
from pentrace.domain.redaction import is_redacted, redact, redact_decoded
from pentrace.domain.redaction.screen import HYPERSCAN, may_change, use_engine
from pentrace.domain.runtime import runtime_event_from_record
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.rows import as_envelope, envelope_row
from pentrace.infrastructure.storage.layout import DataRoot

_SESSION = "session-2026-07-18-11-10-22-0000abcd"

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_PUNCT = re.compile(r"[^A-Za-z0-9_]+")
_EXACT = frozenset(
    {"authorization", "bearer_token", "client_secret", "id_token", "password"}
    | {"private_key", "refresh_token", "secret", "secret_key", "token"}
)
_encode = msgspec.json.Encoder().encode
_CACHES = frozenset(
    {"_fixed", "_memo", "_plain_key_sets", "_headers", "_clean_stems", "_verdicts"}
    | {"_key_verdicts"}
)
_PROVIDERS = Path(__file__).parent.parent / "tests" / "fixtures" / "redaction_providers.json"


def secret_records(lines: list[bytes]) -> list[tuple[dict[str, Any], bytes]]:
    """One tool output per provider-corpus credential, planted among realistic text."""
    cases = json.loads(_PROVIDERS.read_text("utf-8"))["cases"]
    out: list[tuple[dict[str, Any], bytes]] = []
    for number, case in enumerate(cases * 20):
        text = f"$ deploy\n{lines[number % len(lines)][:200]!r}\n{''.join(case['parts'])}\nok"
        payload = {"type": "tool_call_output", "role": "user", "output": text}
        out.append((payload, msgspec.json.encode({"type": "model_msg", "payload": payload})))
    return out


def sync_seconds(lines: list[bytes], engine: str, clock: Callable[[], float]) -> float:
    """``ledger sync`` of the lines as one session into a fresh SQLite ledger."""
    with tempfile.TemporaryDirectory() as folder:
        root = DataRoot(Path(folder))
        shard = root.shard_path("bench", "agent", _SESSION, 1, date(2026, 7, 18))
        shard.parent.mkdir(parents=True)
        shard.write_bytes(b"\n".join(lines) + b"\n")
        ledger = RuntimeEventLedger.open(root.path, LedgerSettings().with_limits_off())
        use_engine(engine)
        cold_caches()
        try:
            started = clock()
            sync(ledger, root)
            return clock() - started
        finally:
            use_engine("hs" if HYPERSCAN else "off")
            ledger.close()


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
            session_id=_SESSION,
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

    def screened() -> int:
        return sum(
            len(redact_decoded(payload, record.raw).paths) >= 0
            for payload, record in zip(payloads, records, strict=True)
        )

    use_engine("off")
    numbered = list(enumerate(lines, start=1))
    built = [msgspec.to_builtins(event(position, line)) for position, line in numbered]
    use_engine("hs" if HYPERSCAN else "off")
    cleared = [(p, r.raw) for p, r in zip(payloads, records, strict=True) if not may_change(r.raw)]
    planted = secret_records(lines)

    def engine_run(engine: str, run: Callable[[], int]) -> Callable[[], int]:
        def wrapped() -> int:
            use_engine(engine)
            try:
                return run()
            finally:
                use_engine("hs" if HYPERSCAN else "off")

        return wrapped

    def screen_only() -> int:
        return sum(may_change(line) or True for line in lines)

    def on_cleared() -> int:
        return sum(redact_decoded(payload, raw) is not None for payload, raw in cleared)

    def on_planted() -> int:
        return sum(bool(redact_decoded(payload, raw).paths) for payload, raw in planted)

    engines = ("hs", "re") if HYPERSCAN else ("re",)
    contenders: dict[str, tuple[int, Callable[[], int]]] = {
        "key-only deep copy (Penguin's policy, baseline)": (len(records), baseline),
        "pentrace redact(payload) (the walk alone)": (len(records), policy),
        **{
            f"screen alone ({name})": (len(records), engine_run(name, screen_only))
            for name in engines
        },
        **{
            f"redact_decoded, whole mix ({name})": (len(records), engine_run(name, screened))
            for name in engines
        },
        "redact_decoded, the records the screen clears": (len(cleared), on_cleared),
        "redact_decoded, records holding a secret": (len(planted), on_planted),
        "runtime_event_from_record, screen off (before)": (
            len(records),
            engine_run("off", events),
        ),
        "runtime_event_from_record, screen on (after)": (len(records), events),
        "+ ledger row (envelope_row), screen off (before)": (len(records), engine_run("off", rows)),
        "+ ledger row (envelope_row), screen on (after)": (len(records), rows),
    }
    contenders["runtime_event_from_record + msgspec encode"] = (len(records), encoded)
    contenders["runtime_event_from_record + is_redacted (unscreened check)"] = (
        len(records),
        checked,
    )
    contenders["is_redacted alone (envelopes built beforehand)"] = (len(records), check_only)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, (expected, run) in contenders.items():
            elapsed, count = timed(run, clock)
            if count != expected:
                raise SystemExit(f"{name} processed {count} of {expected} records")
            best[name] = min(elapsed, best.get(name, elapsed))
        for engine, label in (("off", "before: screen off"), (None, "after: screen on")):
            name = f"ledger sync ({label})"
            elapsed = sync_seconds(lines, engine or ("hs" if HYPERSCAN else "re"), clock)
            best[name] = min(elapsed, best.get(name, elapsed))

    size = sum(len(line) for line in lines)
    base = len(records) / best["key-only deep copy (Penguin's policy, baseline)"]
    print(
        f"{len(records)} records, {size / 1e6:.1f} MB, best of {args.repeat}, {args.clock} time\n"
    )
    print("| step | rec/s | MB/s | vs key-only baseline |")
    print("| --- | ---: | ---: | ---: |")
    for name, elapsed in best.items():
        count = contenders[name][0] if name in contenders else len(records)
        rate = count / elapsed
        print(f"| {name} | {rate / 1e3:,.1f}k | {size / elapsed / 1e6:,.1f} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
