"""Ledger benchmark: our extend vs raw sqlite3, replay pages, and Penguin's original algorithm.

    python -m benchmarks.ledger                       # 200k indexed, 1M-row replay
    python -m benchmarks.ledger --events 20000 --replay-rows 100000 --original-events 2000
    python -m benchmarks.ledger --floors --events 100000   # what SQLite alone can do here

All figures come from one run on one machine; compare the ratios.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine

from pentrace.domain.records import decode_line
from pentrace.domain.redaction import is_redacted
from pentrace.domain.runtime import runtime_event_from_record
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.codec import add_dictionary
from pentrace.infrastructure.ledger.backend.dialect import ledger_tables
from pentrace.infrastructure.ledger.rows import envelope_row, stored_row
from pentrace.testing.render import envelope_line

_BATCH = 1000


def trace_line(number: int) -> bytes:
    """One realistic trace line: text, tool call, tool output or token usage."""
    stamp = f"2026-11-29T10:{number // 60000 % 60:02d}:{number // 1000 % 60:02d}.000Z"
    kind = number % 4
    if kind == 0:
        payload: dict[str, Any] = {"type": "text", "role": "assistant", "text": "word " * 60}
    elif kind == 1:
        payload = {
            "type": "tool_call",
            "role": "assistant",
            "name": "shell",
            "arguments": json.dumps({"cmd": "ls -la /srv/project", "timeout": 30}),
            "tool_call_id": f"call_{number}",
        }
    elif kind == 2:
        payload = {
            "type": "tool_call_output",
            "role": "user",
            "output": "file.txt\n" * 40,
            "tool_call_id": f"call_{number - 1}",
        }
    else:
        counts = {"cache_read": 10, "cache_write": 0, "output": 120, "total": 900}
        return envelope_line(
            stamp, "event_msg", {"type": "token_usage", "session": counts, "request": counts}
        )
    return envelope_line(stamp, "model_msg", payload)


def envelopes(count: int, sessions: int = 50) -> Iterator[dict[str, Any]]:
    """Envelopes built by the real trace-record mapping, spread over ``sessions`` sessions."""
    for number in range(count):
        record = decode_line(trace_line(number), number + 1)
        assert record is not None
        event = runtime_event_from_record(
            record,
            session_id=f"session-2026-11-29-10-00-00-{number % sessions:08x}",
            position=number // sessions + 1,
            project="bench",
            agent="default_agent",
            directory="/srv/project",
        )
        yield event.to_builtins()


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def ours_extend(folder: Path, events: list[dict[str, Any]]) -> float:
    ledger = RuntimeEventLedger(
        LedgerDatabase.for_path(folder / "ours.db"), LedgerSettings().with_limits_off()
    )

    def run() -> None:
        for start in range(0, len(events), _BATCH):
            ledger.extend(events[start : start + _BATCH])

    seconds = timed(run)
    ledger.close()
    return seconds


def raw_executemany(
    folder: Path,
    events: list[dict[str, Any]],
    *,
    name: str = "raw",
    drop: tuple[str, ...] = (),
    empty_envelope: bool = False,
) -> float:
    """The floor: the same rows (precomputed) into the same schema with stdlib sqlite3.

    ``drop`` leaves out indexes (by name suffix, ``"all"`` for every secondary
    index); ``empty_envelope`` stores only the indexed columns.
    """
    path = folder / f"{name}.db"
    tables = ledger_tables()
    engine = create_engine(f"sqlite:///{path}")
    tables.metadata.create_all(engine)
    engine.dispose()
    columns = [c.name for c in tables.events.columns if c.name != "notification_id"]
    rows = [tuple(envelope_row(e, 0)[c] for c in columns) for e in events]
    if empty_envelope:
        at = columns.index("event_json")
        rows = [(*row[:at], b"", *row[at + 1 :]) for row in rows]
    sql = (
        f"INSERT INTO runtime_events ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})"
    )
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for index in tables.events.indexes:
        if "all" in drop or any(str(index.name).endswith(suffix) for suffix in drop):
            conn.execute(f"DROP INDEX {index.name}")

    def run() -> None:
        for start in range(0, len(rows), _BATCH):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows[start : start + _BATCH])
            conn.execute("COMMIT")

    seconds = timed(run)
    conn.close()
    return seconds


# -- Penguin's original algorithm (stdlib sqlite3, JSON text, INSERT OR IGNORE) -----------
_ORIGINAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS runtime_events (
  event_id TEXT PRIMARY KEY, stream_id TEXT NOT NULL, sequence INTEGER NOT NULL,
  event_type TEXT NOT NULL, category TEXT NOT NULL, event_time INTEGER NOT NULL,
  inserted_at INTEGER NOT NULL, session_id TEXT, conversation_id TEXT, agent_id TEXT,
  task_id TEXT, run_id TEXT, project_id TEXT, directory TEXT,
  privacy_classification TEXT NOT NULL, redacted INTEGER NOT NULL,
  payload_json TEXT NOT NULL, projection_json TEXT, event_json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS idx_stream ON runtime_events(stream_id, sequence);
CREATE INDEX IF NOT EXISTS idx_scope ON runtime_events(session_id, agent_id, directory);
CREATE INDEX IF NOT EXISTS idx_time ON runtime_events(event_time);
"""
_SECRET_EXACT = {
    "authorization", "bearer_token", "client_secret", "id_token", "password",
    "private_key", "refresh_token", "secret", "secret_key", "token",
}  # fmt: skip
_TOKEN_PAIRS = {"access", "auth", "bearer", "id", "refresh", "session"}


def _original_is_secret(key: str) -> bool:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    text = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
    parts = text.split("_")
    if text in _SECRET_EXACT or {"authorization", "password", "secret"} & set(parts):
        return True
    if ({"key", "keys"} & set(parts)) and ({"api", "private"} & set(parts)):
        return True
    return any(a in _TOKEN_PAIRS and b == "token" for a, b in itertools.pairwise(parts))


def _original_redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: "[redacted]" if _original_is_secret(str(k)) else _original_redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_original_redact(v) for v in value]
    return value


class OriginalLedger:
    """Penguin's append path: validate by re-redaction, INSERT OR IGNORE, cleanup, commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path)
        self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA busy_timeout=30000")
        self.conn.executescript(_ORIGINAL_SCHEMA)
        self.last_cleanup = 0.0

    def append(self, event: dict[str, Any]) -> bool:
        inserted = self._insert(event)
        if inserted is None:
            return False
        self._cleanup_if_due()
        self.conn.commit()
        return inserted

    def extend(self, events: Sequence[dict[str, Any]]) -> int:
        """Penguin's batch path: one transaction, invalid events skipped, cleanup once."""
        inserted = sum(1 for event in events if self._insert(event))
        self._cleanup_if_due()
        self.conn.commit()
        return inserted

    def _insert(self, event: dict[str, Any]) -> bool | None:
        canonical = json.dumps(event, sort_keys=True, separators=(",", ":"))
        if json.dumps(_original_redact(event), sort_keys=True, separators=(",", ":")) != canonical:
            return None
        scope = event.get("scope") or {}
        cursor = self.conn.execute(
            "INSERT OR IGNORE INTO runtime_events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                event["id"], event["stream_id"], event["sequence"], event["type"],
                event["category"], event["time"], int(time.time() * 1000),
                scope.get("session_id"), scope.get("conversation_id"), scope.get("agent_id"),
                scope.get("task_id"), scope.get("run_id"), scope.get("project_id"),
                scope.get("directory"), event["privacy"]["classification"],
                int(event["privacy"]["redacted"]),
                json.dumps(event["payload"], sort_keys=True, separators=(",", ":")),
                None, canonical,
            ),
        )  # fmt: skip
        return cursor.rowcount == 1

    def _cleanup_if_due(self) -> None:
        if time.monotonic() - self.last_cleanup >= 60:
            self.last_cleanup = time.monotonic()
            self.conn.execute("DELETE FROM runtime_events WHERE event_time < ?", (0,))

    def replay_after(
        self,
        cursor_id: str,
        limit: int,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[dict[str, Any]]:
        conn = sqlite3.connect(self.path)  # Penguin opens a connection per replay
        try:
            row = conn.execute(
                "SELECT rowid FROM runtime_events WHERE event_id = ?", (cursor_id,)
            ).fetchone()
            scope, values = "", tuple[str, ...]()
            if session_id is not None:
                scope, values = " AND (session_id = ? OR session_id IS NULL)", (session_id,)
            if agent_id is not None:
                scope += " AND (agent_id = ? OR agent_id IS NULL)"
                values = (*values, agent_id)
            rows = conn.execute(
                f"SELECT event_json FROM runtime_events WHERE rowid > ?{scope} "
                "ORDER BY rowid LIMIT ?",
                (row[0], *values, limit),
            ).fetchall()
            return [json.loads(r[0]) for r in rows]
        finally:
            conn.close()


def original_append(folder: Path, events: Sequence[dict[str, Any]]) -> float:
    ledger = OriginalLedger(folder / "original.db")
    seconds = timed(lambda: [ledger.append(e) for e in events])
    ledger.conn.close()
    return seconds


def original_extend(folder: Path, events: Sequence[dict[str, Any]]) -> float:
    """Penguin's ``extend`` in its service's batches of 256."""
    ledger = OriginalLedger(folder / "original-extend.db")
    seconds = timed(
        lambda: [ledger.extend(events[s : s + 256]) for s in range(0, len(events), 256)]
    )
    ledger.conn.close()
    return seconds


def replay_pages(folder: Path, rows: int) -> dict[str, float]:
    """Median milliseconds for a 1000-event page from the middle of a ``rows``-row ledger.

    Both ledgers are filled with raw executemany (1000 template envelopes, renumbered):
    this step measures reading, not indexing.
    """
    templates = list(envelopes(1000, sessions=1))
    ours_path, original_path = folder / "replay.db", folder / "replay-original.db"
    # The stored form (ADR 0058): a dictionary trained on other envelopes than the rows'.
    db = LedgerDatabase.for_path(ours_path)
    samples = [envelope_row(e, 0)["event_json"] for e in envelopes(3000, sessions=7)][1000:]
    codec = add_dictionary(db, samples, 0)
    db.close()
    original = OriginalLedger(original_path)
    columns = [c.name for c in ledger_tables().events.columns if c.name != "notification_id"]
    insert = (
        f"INSERT INTO runtime_events ({','.join(columns)}) VALUES ({','.join('?' * len(columns))})"
    )
    template_rows = [envelope_row(event, 0) for event in templates]  # redaction checked once
    ours_conn = sqlite3.connect(ours_path)
    for start in range(0, rows, 10_000):
        batch, ours_rows = [], []
        for number in range(start, min(rows, start + 10_000)):
            session = f"s{number % 500:04d}"
            agent = f"a{number % 500:04d}"
            stream = f"session:{session}"
            template = templates[number % 1000]
            renumbered = {
                "id": f"evt:{stream}:{number // 500 + 1:08d}",
                "stream_id": stream,
                "sequence": number // 500 + 1,
                "scope": {**template["scope"], "session_id": session, "agent_id": agent},
            }
            batch.append({**template, **renumbered})
            row = {**template_rows[number % 1000], "event_id": renumbered["id"]}
            row.update(
                stream_id=stream,
                sequence=renumbered["sequence"],
                session_id=session,
                agent_id=agent,
            )
            stored = stored_row(row, codec)
            ours_rows.append(tuple(stored[c] for c in columns))
        ours_conn.executemany(insert, ours_rows)
        ours_conn.commit()
        original.conn.executemany(
            "INSERT INTO runtime_events VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [_original_row(e) for e in batch],
        )
        original.conn.commit()
    ours_conn.close()
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(ours_path), LedgerSettings())
    middle = ledger.replay_after(None, limit=rows // 2 + 1).events
    cursors = [middle[-1 - n].event_id for n in range(0, 50 * 97, 97)]
    figures = {
        "ours page (raw JSON bytes)": _median_ms(lambda c: ledger.replay_after(c, 1000), cursors),
        "ours page, decoded": _median_ms(
            lambda c: [e.envelope() for e in ledger.replay_after(c, 1000).events], cursors
        ),
        "original page, decoded": _median_ms(lambda c: original.replay_after(c, 1000), cursors),
        "ours page of one session (1 row in 500), raw": _median_ms(
            lambda c: ledger.replay_after(c, 1000, session_id=_session_of(c)), cursors[:10]
        ),
        "original page of one session, decoded": _median_ms(
            lambda c: original.replay_after(c, 1000, session_id=_session_of(c)), cursors[:10]
        ),
        "ours page of one agent (1 row in 500), raw": _median_ms(
            lambda c: ledger.replay_after(c, 1000, agent_id=_agent_of(c)), cursors[:10]
        ),
        "original page of one agent, decoded": _median_ms(
            lambda c: original.replay_after(c, 1000, agent_id=_agent_of(c)), cursors[:10]
        ),
    }
    ledger.close()
    original.conn.close()
    return figures


def _session_of(event_id: str) -> str:
    return event_id.split(":")[2]


def _agent_of(event_id: str) -> str:
    return "a" + _session_of(event_id)[1:]


def _original_row(event: dict[str, Any]) -> tuple[Any, ...]:
    scope = event["scope"]
    return (
        event["id"], event["stream_id"], event["sequence"], event["type"], event["category"],
        event["time"], 0, scope.get("session_id"), None, scope.get("agent_id"), None, None,
        None, scope.get("directory"), event["privacy"]["classification"], 0,
        json.dumps(event["payload"]), None, json.dumps(event, sort_keys=True),
    )  # fmt: skip


def _median_ms(action: Callable[[str], object], cursors: list[str]) -> float:
    for cursor in cursors[:3]:
        action(cursor)  # warm the page cache
    samples = []
    for cursor in cursors:
        started = time.perf_counter()
        action(cursor)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


_FLOORS: Final[tuple[tuple[str, dict[str, Any]], ...]] = (
    ("our rows, table and all indexes", {}),
    ("our rows without the inserted-at index", {"drop": ("_inserted_idx",)}),
    ("our rows without the agent and directory indexes",
     {"drop": ("_agent_idx", "_directory_idx")}),
    ("our rows with no secondary index at all", {"drop": ("all",)}),
    ("the indexed columns only, the envelope left empty", {"empty_envelope": True}),
)  # fmt: skip


def floors(events: list[dict[str, Any]], original_events: int) -> None:
    """How fast SQLite alone can take these rows, against Penguin's append in the same run."""
    with tempfile.TemporaryDirectory(prefix="pentrace-bench-") as tmp:
        folder = Path(tmp)
        original = original_events / original_append(folder, events[:original_events])
        print(f"Penguin's append: {original:,.0f} events/s; 30x would be {30 * original:,.0f}")
        print()
        print("| what raw sqlite3 inserts | events/s | x Penguin's append |")
        print("| --- | ---: | ---: |")
        for number, (label, options) in enumerate(_FLOORS):
            rate = len(events) / raw_executemany(folder, events, name=f"floor{number}", **options)
            print(f"| {label} | {rate:,.0f} | {rate / original:.1f}x |")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--original-events", type=int, default=10_000)
    parser.add_argument("--replay-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--floors",
        action="store_true",
        help="only measure raw sqlite3 with fewer indexes or no envelope, against Penguin's append",
    )
    args = parser.parse_args(argv)
    events = list(envelopes(args.events))
    if args.floors:
        floors(events, args.original_events)
        return
    with tempfile.TemporaryDirectory(prefix="pentrace-bench-") as tmp:
        folder = Path(tmp)
        check = timed(lambda: [is_redacted(event) for event in events])
        ours = ours_extend(folder, events)
        raw = raw_executemany(folder, events)
        original = original_append(folder, events[: args.original_events])
        original_batched = original_extend(folder, events[: args.original_events])
        pages = replay_pages(folder, args.replay_rows)
    ours_rate, raw_rate = args.events / ours, args.events / raw
    original_rate = args.original_events / original
    batched_rate = args.original_events / original_batched
    print(f"| step ({args.events} events) | events/s | ratio |")
    print("| --- | --- | --- |")
    print(f"| raw sqlite3 executemany (floor) | {raw_rate:,.0f} | 1.00 |")
    print(
        f"| ledger extend (batches of {_BATCH}) | {ours_rate:,.0f} | {ours_rate / raw_rate:.2f} |"
    )
    storage = args.events / max(ours - check, 1e-9)
    print(
        f"| redaction re-check alone | {args.events / check:,.0f} | {check / ours:.0%} of extend |"
    )
    print(f"| ledger extend minus the re-check | {storage:,.0f} | {storage / raw_rate:.2f} |")
    print(
        f"| original append ({args.original_events} events) | {original_rate:,.0f} | "
        f"{original_rate / raw_rate:.3f} (ours is {ours_rate / original_rate:.1f}x faster) |"
    )
    print(
        f"| original extend, batches of 256 ({args.original_events} events) | "
        f"{batched_rate:,.0f} | {batched_rate / raw_rate:.3f} "
        f"(ours is {ours_rate / batched_rate:.1f}x faster) |"
    )
    print()
    print(f"| replay page of 1000 from {args.replay_rows} rows | median ms |")
    print("| --- | --- |")
    for name, value in pages.items():
        print(f"| {name} | {value:.2f} |")


if __name__ == "__main__":
    main()
