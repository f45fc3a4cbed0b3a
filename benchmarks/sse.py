"""SSE benchmark: delivery rate to 1 and 50 clients, a 100k-event replay, save-to-client latency.

    python -m benchmarks.sse                         # 20k events, 100k replay, 40 latency samples
    python -m benchmarks.sse --events 5000 --replay 20000 --samples 20
    python -m benchmarks.sse --latency-only --samples 200   # save() -> SSE frame, p50 / p95
    PENTRACE_TEST_DATABASE_URL=postgresql+psycopg://... python -m benchmarks.sse  # adds PostgreSQL

The latency is that of issue #32: ``save()`` in another process (a recorder
writing through ``SessionApplication`` with the ledger hook, which commits the
SQLite ledger from its background writer) to the frame's arrival at a client
connected to ``pentrace serve`` before the save; the server learns of the commit
from the ledger file's change (ADR 0081), its 50 ms poll being the fallback.

Real parts only: ``pentrace serve`` (uvicorn) in a subprocess, clients on raw
sockets in one asyncio loop (so the client side is not what is measured), and
a recorder process writing through SessionApplication with the ledger hook.
Latency is from just before ``end_request()`` (which saves the request: trace
then ledger) in the recorder to the frame's arrival at the client; both
processes read the same clock.  Figures are from one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from pentrace.infrastructure.ledger import LedgerDatabase
from tests.integration.sse_harness import (
    PREFIX_ENV,
    Server,
    event_ids,
    finish,
    seed,
    session_id,
    start_writer,
)

SSE = "/api/v1/events/sse"


async def _read_until(
    port: int, query: str, last_id: str, arrivals: dict[str, float] | None = None
) -> tuple[int, float]:
    """Stream until the frame ``last_id`` arrives; returns (bytes received, seconds)."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {SSE}?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    await writer.drain()
    marker = f"id: {last_id}\n".encode()
    received = 0
    tail = b""
    while True:
        chunk = await reader.read(1 << 20)
        if not chunk:
            raise RuntimeError("the stream ended before the last event")
        received += len(chunk)
        window = tail + chunk
        if arrivals is not None:
            now = time.time()
            for line in window.split(b"\n"):
                if line.startswith(b"id: ") and line[4:].decode() not in arrivals:
                    arrivals[line[4:].decode()] = now
        if marker in window:
            break
        tail = window[-(len(marker) + 200) :]
    elapsed = time.perf_counter() - started
    writer.close()
    return received, elapsed


def _fan_out(port: int, sid: str, events: int, clients: int) -> tuple[float, float]:
    """Clients replaying every event at once; returns (events/s delivered, MB/s)."""
    first, last = event_ids(sid, 1, 1)[0], event_ids(sid, events, events)[0]
    query = f"session_id={sid}&last_event_id={first}"

    async def run() -> tuple[int, float]:
        started = time.perf_counter()
        results = await asyncio.gather(*(_read_until(port, query, last) for _ in range(clients)))
        return sum(size for size, _ in results), time.perf_counter() - started

    size, elapsed = asyncio.run(run())
    delivered = (events - 1) * clients
    return delivered / elapsed, size / elapsed / 1e6


def _latency(server: Server, root: Path, samples: int, env: dict[str, str]) -> list[float]:
    """Milliseconds from save() in a recorder process to the frame at a live client."""
    sid = session_id(int(uuid.uuid4().hex[:8], 16))
    arrivals: dict[str, float] = {}
    last = event_ids(sid, 2 + 4 * samples, 2 + 4 * samples)[0]

    async def run() -> list[tuple[int, float]]:
        task = asyncio.create_task(_read_until(server.port, f"session_id={sid}", last, arrivals))
        await asyncio.sleep(0.5)  # connected, live-only
        writer = start_writer(root, sid, samples, delay=0.05, batch=1, stamp=True, env=env)
        assert writer.stdout is not None
        saved = []
        lines = await asyncio.to_thread(writer.stdout.read)
        finish(writer)
        for line in lines.decode().splitlines():
            if line.startswith("saved "):
                _, position, before = line.split()
                saved.append((int(position), float(before)))
        await task
        return saved

    saved = asyncio.run(run())
    return [
        (arrivals[event_ids(sid, position, position)[0]] - before) * 1000
        for position, before in saved
    ]


def _row(name: str, value: str) -> None:
    print(f"| {name} | {value} |")


def main() -> None:
    """Run every measurement and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events for the fan-out runs")
    parser.add_argument("--replay", type=int, default=100_000, help="events for the replay run")
    parser.add_argument("--samples", type=int, default=40, help="latency samples per backend")
    parser.add_argument(
        "--latency-only", action="store_true", help="only save() -> client latency (p50 / p95)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pentrace-sse-bench-") as tmp:
        root = Path(tmp)
        sid, big = session_id(1), session_id(2)
        quick = args.latency_only  # no corpus to seed: the latency needs none
        events = 0 if quick else seed(root, sid, (args.events - 1) // 4, text_bytes=200)
        replay = 0 if quick else seed(root, big, (args.replay - 1) // 4, text_bytes=200)
        server = Server(root).start()
        try:
            print("| measurement | figure |\n| --- | --- |")
            for clients in () if args.latency_only else (1, 50):
                rate, mbps = _fan_out(server.port, sid, events, clients)
                _row(
                    f"replay {events:,} events to {clients} client(s), all at once",
                    f"{rate:,.0f} events/s delivered ({mbps:,.0f} MB/s)",
                )
            if not args.latency_only:
                first = event_ids(big, 1, 1)[0]
                last = event_ids(big, replay, replay)[0]
                query = f"session_id={big}&last_event_id={first}"
                size, seconds = asyncio.run(_read_until(server.port, query, last))
                rate = (replay - 1) / seconds
                _row(
                    f"reconnecting client replays {replay - 1:,} events",
                    f"{seconds:.2f} s ({rate:,.0f} events/s, {size / 1e6:.0f} MB)",
                )
            sqlite_ms = _latency(server, root, args.samples, {})
        finally:
            server.stop()
        _row("latency save() -> client, SQLite (median / p95 / max)", _summary(sqlite_ms))
        url = os.environ.get("PENTRACE_TEST_DATABASE_URL")
        if url:
            prefix = f"ssebench_{uuid.uuid4().hex[:8]}_"
            env = {"PENTRACE_LEDGER_URL": url, PREFIX_ENV: prefix}
            pg_server = Server(root, env=env).start()
            try:
                pg_ms = _latency(pg_server, root, args.samples, env)
            finally:
                pg_server.stop()
                database = LedgerDatabase(url, table_prefix=prefix)
                database.drop_all()
                database.close()
            _row("latency save() -> client, PostgreSQL (median / p95 / max)", _summary(pg_ms))
        else:
            _row("latency save() -> client, PostgreSQL", "skipped: set PENTRACE_TEST_DATABASE_URL")


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"{statistics.median(ordered):.1f} / {p95:.1f} / {ordered[-1]:.1f} ms (n={len(ordered)})"


if __name__ == "__main__":
    main()
