"""Bulk ``ledger sync``: events per second, wall and CPU, against a same-run raw-sqlite floor.

    python -m benchmarks.ledger_sync                         # 100 sessions, 50,000 records
    python -m benchmarks.ledger_sync --sessions 1000 --records 500000   # issue #16's corpus
    python -m benchmarks.ledger_sync --keep DIR --reuse   # the corpus in DIR again, fresh ledgers

The corpus is :mod:`benchmarks.cli_corpus`'s (realistic records spread over
projects, agents and days).  ``pentrace ledger sync`` runs as a real
subprocess into a fresh SQLite ledger; its wall time and its CPU time (user +
system of the child and of any process it waits for) give events per second.
A second sync of the unchanged traces shows the idempotent path.  Retention
is off for these (``ledger sync`` honours the configured limits); a last
sync into a fresh ledger with ``--max-events`` (default 100,000, the
ledger's default) shows the retention-aware path, which leaves out what the
count limit would delete (``retention_skipped``).

The floor, in the same run: the very rows the sync stored, read back, then
inserted with stdlib ``sqlite3`` ``executemany`` into a fresh file with the
same schema and indexes, in transactions of 1000 rows, WAL and
``synchronous=NORMAL`` as the ledger uses.  No Python runs per row beyond the
tuples already built, so it is what SQLite alone costs for these rows here.
A second floor inserts the same rows with the sync's own statement shape
(ADR 0066): packed by their NULL columns beforehand (not timed), then the
dialect's multi-row INSERTs with the ids given, the same transactions.

With ``--before PYTHON`` (the interpreter of another tree's ``.venv``, for
example the main #16 was filed against), that tree's ``pentrace ledger sync``
runs too, into a fresh ledger of its own, right after this tree's first sync:
the speed-up is then a ratio within one run, whatever the machine's speed.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine

from benchmarks.cli_corpus import corpus_parser, parse_corpus_args, write_corpus
from pentrace.infrastructure.ledger.backend.dialect import ledger_tables
from pentrace.infrastructure.ledger.backend.sqlite import SQLITE
from pentrace.infrastructure.ledger.bulk.build import pack
from pentrace.infrastructure.storage.layout import iter_sessions

_BATCH = 1000


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_sync(
    root: Path,
    ledger: Path,
    extra: tuple[str, ...] = (),
    max_events: str = "off",
    python: str | None = None,
) -> tuple[float, float, str]:
    """Run ``pentrace ledger sync --json``; returns (wall s, CPU s, its JSON output).

    ``python``: another tree's interpreter (``TREE/.venv/bin/python``), run from
    ``TREE`` so that its own ``pentrace`` is the one imported.
    """
    env = {
        **os.environ,
        "PENGUIN_HOME": str(root),
        "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(ledger),
        "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": max_events,
        "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_AGE_DAYS": "off",
        "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_BYTES": "off",
    }
    env.pop("PENTRACE_LEDGER_URL", None)
    cwd = None
    if python is not None:
        # absolute(), not resolve(): a venv's python is a symlink to the base interpreter.
        python = str(Path(python).absolute())
        cwd = Path(python).parent.parent.parent
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [
            python or sys.executable,
            "-m",
            "pentrace",
            "--data-root",
            str(root),
            "ledger",
            "sync",
            "--json",
            *extra,
        ],
        capture_output=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode("utf-8", "replace")[-2000:])
        raise SystemExit(f"ledger sync exited {done.returncode}")
    return wall, _children_cpu() - cpu, done.stdout.decode()


def stored_rows(ledger: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Every row of the ledger in insertion order, without ``notification_id``."""
    columns = [c.name for c in ledger_tables().events.columns if c.name != "notification_id"]
    conn = sqlite3.connect(ledger)
    try:
        rows = conn.execute(
            f"SELECT {', '.join(columns)} FROM runtime_events ORDER BY notification_id"
        ).fetchall()
    finally:
        conn.close()
    return columns, rows


def _floor_file(path: Path) -> None:
    """A fresh file with the ledger's schema and indexes."""
    for stale in path.parent.glob(f"{path.name}*"):
        stale.unlink()
    engine = create_engine(f"sqlite:///{path}")
    ledger_tables().metadata.create_all(engine)
    engine.dispose()


def raw_floor(folder: Path, columns: list[str], rows: list[tuple[Any, ...]]) -> tuple[float, float]:
    """Insert ``rows`` with plain sqlite3 into the ledger's schema; returns (wall s, CPU s)."""
    path = folder / "floor.db"
    _floor_file(path)
    sql = (
        f"INSERT INTO runtime_events ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' * len(columns))})"
    )
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    cpu = time.process_time()
    started = time.perf_counter()
    for start in range(0, len(rows), _BATCH):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows[start : start + _BATCH])
        conn.execute("COMMIT")
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    conn.close()
    return wall, cpu


def packed_floor(
    folder: Path, columns: list[str], rows: list[tuple[Any, ...]]
) -> tuple[float, float]:
    """:func:`raw_floor` with the sync's statement shape: the rows packed first (untimed),
    then the dialect's packed insert on a plain sqlite3 connection, no SQLAlchemy."""
    path = folder / "floor.db"
    _floor_file(path)
    runs = [pack(rows[start : start + _BATCH]) for start in range(0, len(rows), _BATCH)]
    insert = SQLITE.packed_insert(ledger_tables().events, columns)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    cpu = time.process_time()
    started = time.perf_counter()
    for run in runs:
        conn.execute("BEGIN IMMEDIATE")
        insert(_Bare(conn), [run])  # type: ignore[arg-type]
        conn.execute("COMMIT")
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    conn.close()
    return wall, cpu


class _Bare:
    """What the packed insert reads of a SQLAlchemy connection: the driver connection."""

    def __init__(self, driver: sqlite3.Connection) -> None:
        self.connection = self
        self.driver_connection = driver


def run(
    sessions: int,
    records: int,
    keep: Path | None,
    reuse: bool = False,
    extra: tuple[str, ...] = (),
    max_events: int = 100_000,
    before: str | None = None,
) -> list[tuple[str, float, float, int]]:
    """Rows of ``(step, wall s, CPU s, events)``."""
    folder = keep if keep is not None else Path(tempfile.mkdtemp(prefix="pentrace-sync-bench-"))
    root = folder / "root"
    if reuse:
        refs = list(iter_sessions(root))
        sessions = len(refs)
        shards = [shard.path for ref in refs for shard in ref.shards]
        written = sum(1 for shard in shards for _ in shard.open("rb"))
        size = sum(shard.stat().st_size for shard in shards)
    else:
        root.mkdir(parents=True, exist_ok=True)
        written, size = write_corpus(root, sessions, records)
    for name in ("ledger.db*", "floor.db*", "kept.db*", "before.db*"):
        for stale in folder.glob(name):
            stale.unlink()
    print(f"corpus: {sessions} sessions, {written} records, {size / 1e6:.1f} MB", file=sys.stderr)
    ledger = folder / "ledger.db"
    results: list[tuple[str, float, float, int]] = []
    wall, cpu, _ = timed_sync(root, ledger, extra)
    results.append(("ledger sync, fresh ledger", wall, cpu, written))
    if before is not None:
        wall, cpu, _ = timed_sync(root, folder / "before.db", extra, python=before)
        results.append(("before: ledger sync, fresh ledger", wall, cpu, written))
        kept = sum(p.stat().st_size for p in folder.glob("before.db*"))
        print(f"before's ledger: {kept / 1e6:.1f} MB ({kept / size:.2f}x traces)", file=sys.stderr)
    wall, cpu, _ = timed_sync(root, ledger, extra)
    results.append(("ledger sync again (nothing new)", wall, cpu, written))
    columns, rows = stored_rows(ledger)
    if len(rows) != written:
        raise SystemExit(f"expected {written} ledger rows, found {len(rows)}")
    wall, cpu = raw_floor(folder, columns, rows)
    results.append(("raw sqlite3 floor (same rows, schema, indexes)", wall, cpu, len(rows)))
    wall, cpu = packed_floor(folder, columns, rows)
    results.append(("raw sqlite3 floor, the sync's packed statements", wall, cpu, len(rows)))
    ledger_bytes = sum(p.stat().st_size for p in folder.glob("ledger.db*"))
    print(
        f"ledger: {ledger_bytes / 1e6:.1f} MB ({ledger_bytes / size:.2f}x traces)", file=sys.stderr
    )
    if max_events:
        wall, cpu, output = timed_sync(root, folder / "kept.db", extra, str(max_events))
        skipped = json.loads(output).get("retention_skipped", "n/a")
        label = f"ledger sync, max_events {max_events:,} (retention_skipped {skipped})"
        results.append((label, wall, cpu, written))
    return results


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print a Markdown table."""
    parser = corpus_parser(__doc__, sessions=100, records=50_000)
    parser.add_argument(
        "--workers", default=None, help="pass `--workers N` to the sync (default: its own choice)"
    )
    parser.add_argument(
        "--max-events",
        type=int,
        default=100_000,
        help="the count limit of the last, retention-aware sync (0: no such run)",
    )
    parser.add_argument(
        "--before", metavar="PYTHON", help="also time another tree's sync (TREE/.venv/bin/python)"
    )
    args = parse_corpus_args(parser, argv)
    extra = ("--workers", args.workers) if args.workers is not None else ()
    results = run(
        args.sessions, args.records, args.keep, args.reuse, extra, args.max_events, args.before
    )
    floor_wall = next(wall for label, wall, _, _ in results if label.startswith("raw"))
    packed_wall = next(wall for label, wall, _, _ in results if "packed" in label)
    print(
        "| step | wall s | CPU s | events/s wall | events/s CPU | floor / step (wall) "
        "| packed floor / step (wall) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, wall, cpu, events in results:
        print(
            f"| {label} | {wall:.2f} | {cpu:.2f} | {events / wall:,.0f} | "
            f"{events / cpu:,.0f} | {floor_wall / wall:.2f} | {packed_wall / wall:.2f} |"
        )


if __name__ == "__main__":
    main()
