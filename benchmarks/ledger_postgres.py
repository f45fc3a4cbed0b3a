"""Replay pages and topic reads of a PostgreSQL ledger, one tree's schema at a time (issue #16).

    python -m benchmarks.ledger_postgres build URL --prefix P [--rows 1000000]
    python -m benchmarks.ledger_postgres time URL --prefix P
    python -m benchmarks.ledger_postgres drop URL --prefix P

``build`` creates the ledger's tables with the schema of the tree it runs
from (a unique ``--prefix`` per tree, in one database), fills them with the
rows of ``benchmarks.ledger``'s replay pages through the dialect's bulk
insert (sessions 1 in 500, agents 1 in 250, directories 1 in 50, the four
record kinds a quarter each and one type in 1000 renamed ``run.error``),
then ``VACUUM ANALYZE`` as autovacuum would.  It prints the bytes of each
relation.  ``time`` prints the median milliseconds of a page of 1000 from
the middle of the ledger: raw, by session, by agent, by directory, and the
analytics runner's topic reads (one common topic, two, one thin one).
Run ``time`` for both trees in one quiet window and compare the ratios.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from sqlalchemy import Engine, create_engine, func, select, text

from benchmarks.ledger import _median_ms, envelopes
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.codec import add_dictionary
from pentrace.infrastructure.ledger.rows import envelope_row, stored_row
from pentrace.infrastructure.ledger.store import RuntimeEventLedger as LedgerRecorder

_BATCH = 10_000
_SESSIONS, _AGENTS, _DIRECTORIES = 500, 250, 50
_THIN = "run.error"


def _key(number: int) -> SessionKey:
    return SessionKey("bench", f"a{number % _AGENTS:03d}", f"s{number % _SESSIONS:04d}")


def _directory(number: int) -> str:
    return f"/srv/d{number % _DIRECTORIES:02d}"


def build(url: str, prefix: str, rows: int) -> None:
    """Create and fill the ledger; print its relations' bytes."""
    db = LedgerDatabase(url, table_prefix=prefix)
    samples = [envelope_row(e, 0)["event_json"] for e in envelopes(3000, sessions=7)][1000:]
    codec = add_dictionary(db, samples, 0)
    templates = list(envelopes(1000, sessions=1))
    templates[500] = {**templates[500], "type": _THIN}
    plain = [envelope_row(event, 0) for event in templates]
    events = db.tables.events
    columns = [c.name for c in events.columns if c.name != "notification_id"]
    insert = db.dialect.bulk_insert(events, columns)
    for start in range(0, rows, _BATCH):
        batch = []
        for number in range(start, min(rows, start + _BATCH)):
            key, sequence = _key(number), number // _SESSIONS + 1
            row = dict(plain[number % 1000])
            row.update(
                event_id=key.event_id(sequence),
                stream_id=key.stream_id,
                sequence=sequence,
                session_id=key.session_id,
                agent_id=key.agent,
                project_id=key.project,
                directory=_directory(number),
            )
            stored = stored_row(row, codec)
            batch.append(tuple(stored[c] for c in columns))
        with db.writing("fill the benchmark ledger") as conn:
            insert(conn, batch)
    db.close()
    _vacuum(url, prefix)
    print(f"| relation ({rows:,} rows) | bytes | per row |")
    print("| --- | ---: | ---: |")
    for name, size in relation_sizes(url, prefix):
        print(f"| {name} | {size:,} | {size / rows:.1f} |")


def _engine(url: str) -> Engine:
    return create_engine(url, isolation_level="AUTOCOMMIT")


def _vacuum(url: str, prefix: str) -> None:
    engine = _engine(url)
    with engine.connect() as conn:
        conn.execute(text(f'VACUUM ANALYZE "{prefix}runtime_events"'))
    engine.dispose()


def relation_sizes(url: str, prefix: str) -> list[tuple[str, int]]:
    """The events table (heap and TOAST), each of its indexes, then the whole ledger."""
    table = f"{prefix}runtime_events"
    engine = _engine(url)
    with engine.connect() as conn:
        parts = conn.execute(
            text(
                "SELECT 'table (heap, TOAST)', pg_table_size(CAST(:t AS regclass)) UNION ALL "
                "SELECT CAST(indexrelid AS regclass)::text, pg_relation_size(indexrelid) "
                "FROM pg_index WHERE indrelid = CAST(:t AS regclass) UNION ALL "
                "SELECT 'the whole ledger (every table)', sum(pg_total_relation_size(oid)) "
                "FROM pg_class WHERE relkind = 'r' AND relname LIKE :p"
            ),
            {"t": table, "p": prefix.replace("_", r"\_") + "%"},
        ).all()
    engine.dispose()
    return [(str(name).removeprefix(prefix), int(size)) for name, size in parts]


def timings(url: str, prefix: str) -> dict[str, float]:
    """Median milliseconds of each read (see the module docstring)."""
    db = LedgerDatabase(url, table_prefix=prefix, read_only=True)
    ledger = RuntimeEventLedger(db, LedgerSettings())
    recorder = LedgerRecorder(db)
    with db.reading("count the benchmark rows") as conn:
        rows = int(conn.execute(select(func.max(db.tables.events.c.notification_id))).scalar_one())
    # A cursor is the event id of the row before notification id n (row number n - 1).
    numbers = {_key(n - 1).event_id((n - 1) // _SESSIONS + 1): n for n in range(rows // 2, 0, -97)}
    cursors = list(numbers)[:50]

    def replay(**scope: Callable[[int], str]) -> Callable[[str], object]:
        return lambda c: ledger.replay_after(
            c, 1000, **{name: of(numbers[c] - 1) for name, of in scope.items()}
        )

    def topics(*names: str) -> Callable[[str], object]:
        return lambda c: recorder.select_notifications(numbers[c], 1000, topics=names)

    figures = {
        "raw page": _median_ms(replay(), cursors),
        "one session's page (1 row in 500)": _median_ms(
            replay(session_id=lambda n: _key(n).session_id), cursors[:20]
        ),
        "one agent's page (1 row in 250)": _median_ms(
            replay(agent_id=lambda n: _key(n).agent), cursors[:20]
        ),
        "one directory's page (1 row in 50)": _median_ms(
            replay(directory=_directory), cursors[:20]
        ),
        "topic read, one type (1 row in 4)": _median_ms(topics("tool.called"), cursors[:20]),
        "topic read, two types (1 row in 2)": _median_ms(
            topics("tool.called", "tool.result"), cursors[:20]
        ),
        f"topic read, a thin type ({_THIN}, 1 row in 1000)": _median_ms(
            topics(_THIN), cursors[:20]
        ),
    }
    ledger.close()
    return figures


def drop(url: str, prefix: str) -> None:
    """Drop every table of the benchmark ledger."""
    engine = _engine(url)
    with engine.connect() as conn:
        names = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE tablename LIKE :p"),
            {"p": prefix.replace("_", r"\_") + "%"},
        ).scalars()
        for name in list(names):
            conn.execute(text(f'DROP TABLE "{name}" CASCADE'))
    engine.dispose()


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments and run one step."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("build", "time", "drop"))
    parser.add_argument("url", help="postgresql+psycopg://... of the database")
    parser.add_argument("--prefix", required=True, help="the ledger's table prefix")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if args.step == "build":
        build(args.url, args.prefix, args.rows)
    elif args.step == "time":
        print(f"| read of a 1000-row page from the middle ({args.prefix}) | median ms |")
        print("| --- | ---: |")
        for name, value in timings(args.url, args.prefix).items():
            print(f"| {name} | {value:.2f} |")
    else:
        drop(args.url, args.prefix)


if __name__ == "__main__":
    main()
