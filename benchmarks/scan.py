"""How fast ``pentrace scan`` reads a data root, for ``docs/performance.md``.

Run ``python -m benchmarks.scan 200000``: it writes that many realistic
records (``benchmarks._corpus``) into a temporary data root as sessions of
``--per-session`` records, plants one provider credential in every
``--every``-th session, then times the library scan (every record read,
screened, walked where the screen hits) and the whole ``pentrace scan --json``
process.  Prints records per second and the time a 5M-record root would take
at that rate (scanning is linear in records: one pass, no state across them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from benchmarks._corpus import generate_records
from pentrace.infrastructure.audit.secrets import scan_traces
from pentrace.infrastructure.storage.layout import DataRoot

_TOKEN = "gh" + "p_" + "R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sXy"


def write_root(root: DataRoot, records: int, per_session: int, every: int) -> int:
    """Write the corpus as sessions; return how many sessions hold a planted secret."""
    lines = list(generate_records(records, seed=3))
    planted = 0
    for number, start in enumerate(range(0, len(lines), per_session)):
        chunk = lines[start : start + per_session]
        if number % every == 0:
            payload = {"type": "text", "role": "user", "text": f"use {_TOKEN} to push"}
            chunk = [*chunk, json.dumps({"type": "model_msg", "payload": payload}).encode()]
            planted += 1
        sid = f"session-2026-07-18-11-10-22-{number:08x}"
        shard = root.shard_path("bench", "agent", sid, 1, date(2026, 7, 18))
        shard.parent.mkdir(parents=True, exist_ok=True)
        shard.write_bytes(b"\n".join(chunk) + b"\n")
    return planted


def main(argv: list[str] | None = None) -> None:
    """Write the root, time both scans and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("records", nargs="?", type=int, default=200_000)
    parser.add_argument("--per-session", type=int, default=2_000)
    parser.add_argument("--every", type=int, default=10, help="plant a secret every N sessions")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = DataRoot(Path(folder))
        planted = write_root(root, args.records, args.per_session, args.every)
        size = sum(path.stat().st_size for path in Path(folder).rglob("*.jsonl"))
        refs = list(root.iter_sessions())
        started = time.process_time()
        found = sum(1 for _ in scan_traces(refs))
        library = time.process_time() - started
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "pentrace", "--data-root", folder, "scan", "--json"],
            capture_output=True,
            check=False,
            timeout=3600,
        )
        process = time.perf_counter() - started
    findings = len(json.loads(result.stdout)["findings"])
    records = args.records + planted
    print(f"{records} records, {size / 1e6:.0f} MB, {len(refs)} sessions, {planted} planted\n")
    print("| run | seconds | records/s | MB/s | 5M records at this rate |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, seconds in (
        (f"scan_traces, CPU ({found} findings)", library),
        (f"pentrace scan --json, wall (exit {result.returncode}, {findings} findings)", process),
    ):
        rate = records / seconds
        print(
            f"| {name} | {seconds:.1f} | {rate / 1e3:.0f}k | {size / seconds / 1e6:.0f} "
            f"| {5e6 / rate / 60:.1f} min |"
        )


if __name__ == "__main__":
    main()
