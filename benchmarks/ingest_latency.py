"""Ingest latency: from a foreign process's write(2) to the SSE frame at a connected client.

    python -m benchmarks.ingest_latency                  # 200 records per configuration
    python -m benchmarks.ingest_latency --records 100 --pause 0.02

The writer is not pentrace: tests/integration/foreign_writer.py appends
PenguinHarness-style lines with one os.write per line and prints the clock
just before each write.  A client on a raw socket (in a thread) timestamps
each ``id:`` line of ``/api/v1/events/sse``.  Both read the same clock.
Configurations, all on a SQLite ledger, in one run:

* ``serve --ingest``: the follower embedded in the server (filesystem
  notifications; its commits wake the SSE streams in-process);
* ``ingest --follow`` + ``serve``: two processes, the server polls the ledger;
* ``ingest --poll`` + ``serve``: the polling fallback, two processes.

Writing starts once the follower's first pass is done and the client is connected.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.integration.ingest_harness import WRITER, shard
from tests.integration.sse_harness import REPO, Server, child_env

SSE = "/api/v1/events/sse"


class Arrivals:
    """Reads the SSE stream on a socket in a thread; the arrival time of each event id."""

    def __init__(self, port: int) -> None:
        self.times: dict[int, float] = {}
        self._sock = socket.create_connection(("127.0.0.1", port))
        self._sock.sendall(f"GET {SSE} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        carry = b""
        while True:
            try:
                chunk = self._sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            now = time.time()
            *lines, carry = (carry + chunk).split(b"\n")
            for line in lines:
                if line.startswith(b"id: "):
                    self.times[int(line.rsplit(b":", 1)[1])] = now

    def close(self) -> None:
        self._sock.close()
        self._thread.join(5)


def _follower(root: Path, *args: str) -> subprocess.Popen[bytes]:
    """A standalone follower, returned once its first pass is done (its health file exists)."""
    health = root / "ingest-health.json"
    command = [sys.executable, "-m", "pentrace", "--data-root", str(root), "ingest", "--follow"]
    process = subprocess.Popen(
        [*command, "--health-file", str(health), *args],
        env=child_env(root),
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not health.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return process


def measure(name: str, records: int, pause: float) -> list[float]:
    """Write ``records`` lines and return the write-to-frame latencies in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        embedded = name == "serve --ingest"
        server = Server(root, args=["--ingest"] if embedded else []).start()
        follower = None
        if not embedded:
            follower = _follower(
                root, *(["--poll", "--interval", "0.05"] if "poll" in name else [])
            )
        assert server.process is not None
        try:
            client = Arrivals(server.port)
            time.sleep(0.3)
            out = subprocess.run(
                [sys.executable, str(WRITER), str(shard(root)), "1", str(records), str(pause)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            written = {
                int(parts[1]): float(parts[2])
                for parts in (text.split() for text in out.splitlines())
                if parts and parts[0] == "WROTE"
            }
            deadline = time.monotonic() + 60
            while len(client.times) < records and time.monotonic() < deadline:
                time.sleep(0.05)
            client.close()
        finally:
            if follower is not None:
                follower.terminate()
                follower.wait(30)
            server.stop()
    missing = records - len(client.times)
    if missing:
        raise SystemExit(f"{name}: {missing} of {records} records never reached the client")
    return [(client.times[n] - written[n]) * 1000 for n in sorted(written)]


# The head of a latency table; :func:`latency_row` makes its rows.
LATENCY_HEADER = "| configuration | samples | p50 ms | p95 ms | max ms |\n|---|---|---|---|---|"


def latency_row(name: str, samples: list[float]) -> str:
    """One Markdown row of a latency table: how many samples, their p50, p95 and max in ms."""
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return (
        f"| {name} | {len(samples)} | {statistics.median(ordered):.1f} | {p95:.1f} "
        f"| {ordered[-1]:.1f} |"
    )


def latency_options(doc: str | None, unit: str) -> tuple[int, float]:
    """A latency benchmark's ``--UNIT`` (how many, 200) and ``--pause`` (seconds, 0.02) options.

    The ledger stays the data root's own SQLite file (``PENTRACE_LEDGER_URL`` is dropped);
    prints the machine's line and the head of the latency table, then returns the two.
    """
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument(f"--{unit}", type=int, default=200)
    parser.add_argument("--pause", type=float, default=0.02, help=f"seconds between {unit}")
    args = parser.parse_args()
    count, pause = int(getattr(args, unit)), float(args.pause)
    os.environ.pop("PENTRACE_LEDGER_URL", None)
    print(f"{os.cpu_count()} CPUs; {count} {unit}, {pause * 1000:.0f} ms apart")
    print(LATENCY_HEADER)
    return count, pause


def main() -> None:
    records, pause = latency_options(__doc__, "records")
    for name in ("serve --ingest", "ingest --follow + serve", "ingest --poll + serve"):
        print(latency_row(name, measure(name, records, pause)), flush=True)


if __name__ == "__main__":
    main()
