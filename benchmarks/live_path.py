"""The live path: recording throughput with the ledger hook, and save latency on a hung server.

Run ``python -m benchmarks.live_path`` (add ``PENTRACE_TEST_DATABASE_URL=...`` for the
PostgreSQL figures).

1. Throughput: the same requests recorded through ``SessionApplication`` with a
   SQLite ledger, by the hook as it was (``ledger.extend`` inside the save) and
   by today's :class:`LedgerHook` (a background writer; saves do not wait, or
   wait for their commit up to 50 ms).  Rounds alternate; each figure is the
   best wall time, the last commit included.
2. Latency: ``end_request`` (one save) against PostgreSQL through a loopback
   proxy, healthy and then hung (accepting and never answering), per save.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.live.hook import LedgerHook, LiveFanout
from pentrace.infrastructure.ledger.replay import LedgerEntry
from pentrace.infrastructure.ledger.rows import as_envelope
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts
from pentrace.infrastructure.trace.durability import Durability

_encode: Final = msgspec.json.Encoder().encode
_TEXT: Final = "I will create the file and check that it is there. " * 4


class InlineHook:
    """The hook before the live writer: the save itself writes the ledger."""

    def __init__(self, ledger: RuntimeEventLedger, root: Path) -> None:
        self.ledger = ledger
        self.fanout = LiveFanout()

    def __call__(self, session_id: str, records: Sequence[tuple[int, TraceRecord]]) -> None:
        mapper = SessionEvents(SessionKey("bench", "agent", session_id), None)
        events = [mapper.event(position, record) for position, record in records]
        envelopes = [as_envelope(event) for event in events]
        self.ledger.extend(envelopes)
        self.fanout.publish([LedgerEntry(env["id"], _encode(env)) for env in envelopes])


def _record(root: Path, hook: Any, requests: int) -> list[float]:
    """Record ``requests`` requests; the wall time of each save (``end_request``)."""
    saves = []
    with SessionApplication(
        root, "bench", "agent", durability=Durability.NONE, on_recorded=hook, clock=_now
    ) as app:
        handle = app.start_session(
            provider="p",
            model_id="m",
            model_context_window=10**6,
            system_prompt="s",
            workspace=root,
        )
        for n in range(requests):
            handle.record_user_input("Create hello.txt")
            handle.begin_request()
            handle.record_tool_call("exec", '{"cmd":"ls"}', f"c{n}")
            handle.record_tool_output(f"c{n}", "hello.txt")
            handle.record_text(_TEXT)
            started = time.perf_counter()
            handle.end_request("completed")
            saves.append(time.perf_counter() - started)
        handle.close()
    return saves


def _now() -> datetime:
    return datetime.now(UTC)


def throughput(requests: int, rounds: int) -> dict[str, float]:
    """Best events/s of each hook over alternating rounds, on a fresh SQLite ledger each."""
    makers: dict[str, Callable[[RuntimeEventLedger, Path], Any]] = {
        "inline (before)": InlineHook,
        "live writer (after; saves do not wait)": lambda ledger, root: LedgerHook(
            ledger, data_root=root, project="bench", agent="agent"
        ),
        "live writer, each save waits <= 50 ms for its commit": lambda ledger, root: LedgerHook(
            ledger, data_root=root, project="bench", agent="agent", wait_seconds=0.05
        ),
    }
    best = dict.fromkeys(makers, float("inf"))
    for _ in range(rounds):
        for name, make in makers.items():
            with tempfile.TemporaryDirectory() as folder:
                root = Path(folder)
                ledger = RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())
                hook = make(ledger, root)
                started = time.perf_counter()
                _record(root, hook, requests)
                if isinstance(hook, LedgerHook):
                    hook.close()  # every row committed, as inline
                best[name] = min(best[name], time.perf_counter() - started)
                assert ledger.count() == 2 + requests * 6
                ledger.close()
    return {name: (2 + requests * 6) / seconds for name, seconds in best.items()}


def hung_latency(url: str, requests: int) -> dict[str, list[float]]:
    """Per-save seconds on PostgreSQL through a proxy, healthy and then hung."""
    from tests.integration.pg_proxy import HangingProxy

    prefix = f"bench_{uuid.uuid4().hex[:8]}_"
    timeouts = DatabaseTimeouts(connect_seconds=2, statement_seconds=2, lock_seconds=2)
    figures: dict[str, list[float]] = {}
    with HangingProxy.before(url) as proxy, tempfile.TemporaryDirectory() as folder:
        db = LedgerDatabase(proxy.url_for(url), table_prefix=prefix, timeouts=timeouts)
        ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
        hook = LedgerHook(ledger, data_root=Path(folder), project="bench", agent="agent")
        for name, where in (("healthy", "a"), ("hung", "b")):
            (Path(folder) / where).mkdir()
            if name == "hung":
                proxy.hang()
            figures[name] = _record(Path(folder) / where, hook, requests)
            if name == "healthy":
                hook.flush(timeout=120)  # the healthy run's rows all in before the hang
        writer = hook.writer
        assert writer is not None
        started = time.perf_counter()
        writer.flush(timeout=120)  # the queue drains once the breaker opens
        figures["drained after, s"] = [time.perf_counter() - started]
        figures["breaker open"] = [float(writer.breaker.is_open)]
        figures["written, dropped"] = [float(writer.written), float(writer.dropped)]
        hook.close(timeout=0)
        proxy.recover()
    cleanup = LedgerDatabase(url, table_prefix=prefix)
    cleanup.drop_all()
    cleanup.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency-requests", type=int, default=400)
    args = parser.parse_args()
    print(f"| hook | events/s ({args.requests} requests, best of {args.rounds}) |")
    print("| --- | --- |")
    for name, rate in throughput(args.requests, args.rounds).items():
        print(f"| {name} | {rate:,.0f} |")
    url = os.environ.get("PENTRACE_TEST_DATABASE_URL")
    if url is None:
        print("PostgreSQL latency: skipped (set PENTRACE_TEST_DATABASE_URL)")
        return
    figures = hung_latency(url, args.latency_requests)
    print("\n| PostgreSQL | saves | median ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- |")
    for name in ("healthy", "hung"):
        values = sorted(figures[name])
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        print(
            f"| {name} | {len(values)} | {statistics.median(values) * 1000:.2f} | "
            f"{p99 * 1000:.2f} | {values[-1] * 1000:.2f} |"
        )
    written, dropped = figures["written, dropped"]
    print(
        f"after the hung run: queue drained in {figures['drained after, s'][0]:.1f} s, "
        f"breaker open: {bool(figures['breaker open'][0])}, events written {written:.0f} "
        f"(the healthy run), dropped {dropped:.0f} (for `ledger sync`)"
    )


if __name__ == "__main__":
    main()
