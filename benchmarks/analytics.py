"""Analytics benchmark: token projection catch-up, live lag, rebuild from traces, stats.

    python -m benchmarks.analytics                          # 400 sessions x 250 events
    python -m benchmarks.analytics --sessions 10000 --events 500   # the issue's 5M events
    python -m benchmarks.analytics --corpus /var/tmp/corpus   # traces (and ledger) already there
    PENTRACE_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1/test python -m ...

The corpus is ``benchmarks._corpus`` (realistic sessions, outputs up to 16k
characters), written as traces and indexed into a SQLite ledger.  The floor
measured in the same run is reading every ledger row through the recorder's
``select_notifications`` pages (what any projection must at least do).
All figures come from one run on one machine; compare ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks._corpus import generate_records
from pentrace.infrastructure.analytics import queries
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.database import AnalyticsDatabase, analytics_url
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.analytics.rebuild import rebuild
from pentrace.infrastructure.analytics.runner import (
    AnalyticsRunner,
    catch_up,
    open_ledger,
    relevant_head,
)
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.indexer import index_records
from pentrace.testing.files import write_shards

_MODELS = (b"deepseek-v4-pro", b"claude-sonnet-4", b"gpt-5")


def write_corpus(root: Path, sessions: int, events: int) -> int:
    """Write ``sessions`` traces of ``events`` records; returns the records written."""
    total = 0
    for number in range(sessions):
        model = _MODELS[number % len(_MODELS)]
        lines = [
            line.replace(b"deepseek-v4-pro", model) for line in generate_records(events, number)
        ]
        sid = f"session-2026-07-18-11-10-22-{number:08x}"
        write_shards(root, f"proj{number % 4}", f"agent{number % 7}", sid, [lines])
        total += len(lines)
    return total


def floor_read(root: Path, env: Mapping[str, str]) -> tuple[int, float]:
    """Read every ledger row as Notifications, page by page (the same-run floor)."""
    ledger = open_ledger(root, env)
    try:
        start, rows, last = time.perf_counter(), 0, 0
        while True:
            page = ledger.select_notifications(start=last, limit=500, inclusive_of_start=False)
            if not page:
                break
            rows += len(page)
            last = page[-1].id
        return rows, time.perf_counter() - start
    finally:
        ledger.close()


def timed_catch_up(root: Path, env: Mapping[str, str]) -> float:
    """Seconds for the token projection to catch up with the whole ledger."""
    start = time.perf_counter()
    catch_up(TokenUse, data_root=root, env=env, timeout=3600)
    return time.perf_counter() - start


def live_lag(root: Path, env: Mapping[str, str], batches: int, per_batch: int) -> list[float]:
    """Lag (s) from a committed ledger write to the projection having handled it."""
    lags: list[float] = []
    records = [(p, line) for p, line in enumerate(generate_records(per_batch * batches, 999), 1)]
    with AnalyticsRunner(TokenUse, data_root=root, env=env) as runner:
        ledger = open_ledger(root, env)
        try:
            for batch in range(batches):
                chunk = records[batch * per_batch : (batch + 1) * per_batch]
                index_records(ledger, "session-2026-07-18-11-10-22-live0001", chunk,
                              project="live", agent="live")  # fmt: skip
                written = time.perf_counter()
                head = ledger.max_notification_id() or 0
                runner.wait_handled(relevant_head(ledger, TokenUse.topics, head), 60)
                lags.append(time.perf_counter() - written)
                time.sleep(0.02)
        finally:
            ledger.close()
    return lags


def stats_seconds(root: Path, env: Mapping[str, str]) -> tuple[float, float]:
    """In-process query time, and the whole ``pentrace stats tokens`` command (with start-up)."""
    db = AnalyticsDatabase(analytics_url(root, env))
    try:
        start = time.perf_counter()
        queries.tokens(db, "model")
        queries.cost(db, load_prices(), "day")
        query = time.perf_counter() - start
    finally:
        db.close()
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), "stats", "tokens", "--json"],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return query, time.perf_counter() - start


def _postgres_env(root: Path) -> dict[str, str] | None:
    url = os.environ.get("PENTRACE_TEST_DATABASE_URL")
    if not url:
        return None
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return {
        "PENTRACE_LEDGER_URL": url,
        "PENTRACE_LEDGER_TABLE_PREFIX": f"{schema}_",
        "PENTRACE_ANALYTICS_URL": f"{url}?options=-csearch_path%3D{schema}",
    }


def _existing_corpus(root: Path) -> tuple[int, int]:
    """Sessions and records of the traces already under ``root``."""
    shards = list(root.glob("*/agents/*/traces/*/*.jsonl"))
    records = sum(1 for shard in shards for _ in shard.open("rb"))
    return len({shard.name.rsplit("_", 1)[0] for shard in shards}), records


def run(sessions: int, events: int, lag_batches: int, corpus: Path | None = None) -> dict[str, Any]:
    """Every figure of the table, for one corpus size (or the traces under ``corpus``)."""
    results: dict[str, Any] = {"sessions": sessions, "events_per_session": events}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) if corpus is None else corpus
        if corpus is None:
            results["records"] = write_corpus(root, sessions, events)
        else:
            results["sessions"], results["records"] = _existing_corpus(root)
            results["events_per_session"] = results["records"] // max(1, results["sessions"])
            (root / "analytics.db").unlink(missing_ok=True)  # cold: the read models start empty
        sqlite_env = {"PENTRACE_ANALYTICS_URL": f"sqlite:///{root / 'analytics.db'}"}
        for key in ("PENTRACE_LEDGER_URL", "PENGUIN_RUNTIME_EVENT_LEDGER_PATH"):
            os.environ.pop(key, None)
        limits = {
            f"PENGUIN_RUNTIME_EVENT_LEDGER_{k}": "0"
            for k in ("MAX_EVENTS", "MAX_AGE_DAYS", "MAX_BYTES")
        }
        os.environ.update(limits)
        ledger = open_ledger(root, sqlite_env)
        start = time.perf_counter()
        # With --corpus, a ledger a previous run (or `pentrace ledger sync`) filled is
        # reused: sync then only checks that nothing is missing.
        results["ledger_events_indexed"] = sync(ledger, root).indexed
        results["ledger_sync_s"] = time.perf_counter() - start
        ledger.close()
        rows, floor = floor_read(root, sqlite_env)
        results["floor_read_events_per_s"] = rows / floor
        seconds = timed_catch_up(root, sqlite_env)
        results["sqlite_catch_up_s"] = seconds
        results["sqlite_catch_up_events_per_s"] = rows / seconds
        results["stats_query_s"], results["stats_command_s"] = stats_seconds(root, sqlite_env)
        start = time.perf_counter()
        report = rebuild(TokenUse, data_root=root, env=sqlite_env)
        results["rebuild_from_traces_s"] = time.perf_counter() - start
        results["rebuild_records_per_s"] = results["records"] / results["rebuild_from_traces_s"]
        results["rebuild_events_fed"] = report.events
        lags = live_lag(root, sqlite_env, lag_batches, 50)
        results["live_lag_median_ms"] = statistics.median(lags) * 1000
        results["live_lag_max_ms"] = max(lags) * 1000
        pg_env = _postgres_env(root)
        if pg_env is not None:
            ledger = open_ledger(root, pg_env)
            sync(ledger, root)
            ledger.close()
            seconds = timed_catch_up(root, pg_env)
            results["postgres_catch_up_events_per_s"] = rows / seconds
            lags = live_lag(root, pg_env, lag_batches, 50)
            results["postgres_live_lag_median_ms"] = statistics.median(lags) * 1000
    return results


def main() -> None:
    """Parse arguments, run, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--events", type=int, default=250, help="records per session")
    parser.add_argument("--lag-batches", type=int, default=40)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="use the traces (and ledger) under this data root instead of writing a corpus, "
        "for example one kept by `benchmarks.cli_corpus --keep`",
    )
    args = parser.parse_args()
    results = run(args.sessions, args.events, args.lag_batches, args.corpus)
    width = max(map(len, results))
    for key, value in results.items():
        shown = f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"
        print(f"{key:<{width}}  {shown}")


if __name__ == "__main__":
    threading.current_thread().name = "benchmark"
    main()
