"""Ledger size against the trace bytes it indexes, on SQLite and PostgreSQL (issue #16).

    python -m benchmarks.ledger_size                               # 100 sessions, 50,000 records
    python -m benchmarks.ledger_size --postgres postgresql+psycopg://postgres@127.0.0.1/db
    python -m benchmarks.ledger_size --keep DIR --reuse --python /other/tree/.venv/bin/python
    python -m benchmarks.ledger_size --keep DIR --reuse --no-sqlite --postgres URL

``pentrace ledger sync`` runs as a real subprocess (``--python`` picks the
interpreter, so another tree's sync is measured on the same corpus in the
same run) into a fresh SQLite file, and with ``--postgres`` into fresh
tables of that database (a unique table prefix, dropped afterwards).  The
SQLite figure is the file after a WAL checkpoint, split by table and index
with the ``dbstat`` virtual table; the PostgreSQL one is
``pg_total_relation_size`` of the ledger's tables (heap, TOAST and indexes),
split by table (``pg_table_size``) and index (``pg_relation_size``).
The sizes are read from the database alone, so they mean the same for any
version of pentrace.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text

from benchmarks.cli_corpus import corpus_parser, parse_corpus_args, write_corpus
from pentrace.infrastructure.storage.layout import iter_sessions

_LIMITS_OFF = {
    "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": "off",
    "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_AGE_DAYS": "off",
    "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_BYTES": "off",
}


def sync(python: str, root: Path, **env: str) -> None:
    """``pentrace ledger sync`` with ``python`` into the ledger the variables name."""
    variables = {**os.environ, **_LIMITS_OFF, "PENGUIN_HOME": str(root), **env}
    command = [python, "-m", "pentrace", "--data-root", str(root), "ledger", "sync", "--json"]
    done = subprocess.run(command, capture_output=True, env=variables, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise SystemExit(f"ledger sync exited {done.returncode}")


def sqlite_size(python: str, root: Path, path: Path) -> tuple[int, dict[str, int]]:
    """The SQLite ledger's bytes after a checkpoint, and the bytes of each table and index."""
    sync(python, root, PENGUIN_RUNTIME_EVENT_LEDGER_PATH=str(path), PENTRACE_LEDGER_URL="")
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        parts = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
    finally:
        conn.close()
    total = sum(p.stat().st_size for p in path.parent.glob(f"{path.name}*"))
    return total, {str(name): int(size) for name, size in parts.items()}


def postgres_size(python: str, root: Path, url: str) -> tuple[int, dict[str, int]]:
    """``pg_total_relation_size`` of every table of a fresh ledger in ``url``, and the bytes
    of each table (heap and TOAST, ``pg_table_size``) and of each index."""
    prefix = f"size{uuid.uuid4().hex[:8]}_"
    engine = create_engine(url)
    try:
        sync(python, root, PENTRACE_LEDGER_URL=url, PENTRACE_LEDGER_TABLE_PREFIX=prefix)
        with engine.begin() as conn:
            tables = list(
                conn.execute(
                    text("SELECT tablename FROM pg_tables WHERE tablename LIKE :p"),
                    {"p": prefix + "%"},
                ).scalars()
            )
            conn.execute(text("CHECKPOINT"))
            total = sum(
                int(conn.execute(text("SELECT pg_total_relation_size(:t)"), {"t": t}).scalar_one())
                for t in tables
            )
            parts: dict[str, int] = {}
            for table in tables:
                parts[table.removeprefix(prefix)] = int(
                    conn.execute(text("SELECT pg_table_size(:t)"), {"t": table}).scalar_one()
                )
                for name, size in conn.execute(
                    text(
                        "SELECT CAST(indexrelid AS regclass)::text, pg_relation_size(indexrelid) "
                        "FROM pg_index WHERE indrelid = CAST(:t AS regclass)"
                    ),
                    {"t": table},
                ):
                    parts[str(name).removeprefix(prefix)] = int(size)
            for table in tables:
                conn.execute(text(f'DROP TABLE "{table}" CASCADE'))
    finally:
        engine.dispose()
    return total, parts


def _parts_table(title: str, parts: dict[str, int], total: int, records: int) -> None:
    print()
    print(f"| {title} | bytes | per event |")
    print("| --- | ---: | ---: |")
    for name, bytes_ in sorted(parts.items(), key=lambda item: -item[1]):
        if bytes_ >= total / 200:
            print(f"| {name} | {bytes_:,} | {bytes_ / records:.1f} |")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure, print Markdown tables."""
    parser = corpus_parser(__doc__, sessions=100, records=50_000)
    parser.add_argument("--python", default=sys.executable, help="the interpreter that syncs")
    parser.add_argument("--postgres", default=None, help="also measure a ledger in this database")
    parser.add_argument("--no-sqlite", action="store_true", help="measure PostgreSQL only")
    args = parse_corpus_args(parser, argv)
    folder = args.keep if args.keep is not None else Path(tempfile.mkdtemp(prefix="ledger-size-"))
    root = folder / "root"
    if args.reuse:
        shards = [shard.path for ref in iter_sessions(root) for shard in ref.shards]
        records, size = (
            sum(1 for s in shards for _ in s.open("rb")),
            sum(s.stat().st_size for s in shards),
        )
    else:
        root.mkdir(parents=True, exist_ok=True)
        records, size = write_corpus(root, args.sessions, args.records)
    print(f"corpus: {records:,} records, {size:,} trace bytes ({size / records:.0f} per record)")
    print()
    print("| ledger | bytes | per event | x trace bytes |")
    print("| --- | ---: | ---: | ---: |")
    if not args.no_sqlite:
        path = folder / f"size-{uuid.uuid4().hex[:8]}.db"
        total, parts = sqlite_size(args.python, root, path)
        for stale in path.parent.glob(f"{path.name}*"):
            stale.unlink()
        print(f"| SQLite | {total:,} | {total / records:.0f} | {total / size:.2f} |")
    if args.postgres:
        pg, pg_parts = postgres_size(args.python, root, args.postgres)
        print(f"| PostgreSQL | {pg:,} | {pg / records:.0f} | {pg / size:.2f} |")
    if not args.no_sqlite:
        _parts_table("SQLite table or index", parts, total, records)
    if args.postgres:
        _parts_table("PostgreSQL table or index", pg_parts, pg, records)


if __name__ == "__main__":
    main()
