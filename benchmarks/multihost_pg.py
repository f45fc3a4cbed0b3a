"""Multi-host ingest on PostgreSQL: throughput from two agent hosts at once, and the latency
from a write on a host to an SSE client (issue #16).  Needs root, ``ip netns`` and a server:

    sudo PENTRACE_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1/db \\
        .venv/bin/python -m benchmarks.multihost_pg [--sessions 20 --records 2000 --latency 200]

Agent hosts are network namespaces joined to the root namespace by veth
links; PostgreSQL is reached at the link's root-side address through
``tests/multihost/forwarder.py`` (as the test does, ADR 0033).  Each host's
corpus is PenguinHarness-style lines (``tests/integration/foreign_writer.py``).

Throughput (events per second of wall time, process start to exit, each
configuration into a fresh table prefix):

* one host on loopback, no namespace, no forwarder (the same-run baseline);
* one host across its veth link;
* two hosts at once, each with its own corpus (the sum of both);
* ``ledger sync`` instead of ``ingest --once``, two hosts at once.

Latency: a foreign writer on host A appends one line every ``--pause``
seconds; ``ingest --follow`` runs on host A, ``pentrace serve`` on a third
host, and a raw-socket client in the root namespace timestamps each SSE
``id:`` line (one kernel, one clock).  Baseline: the same three processes on
loopback in the root namespace.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.ingest_latency import LATENCY_HEADER, SSE, Arrivals, latency_row
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.foreign_writer import line
from tests.integration.ingest_harness import DAY, WRITER, wait_until
from tests.integration.sse_harness import child_env, session_id
from tests.multihost.fleet import TOKEN, Follower, host_env, start_server
from tests.multihost.netns import Network, netns_unavailable


class TokenArrivals(Arrivals):
    """:class:`Arrivals` for a server on another host, with the bearer token."""

    def __init__(self, host: str, port: int) -> None:
        self.times = {}
        self._sock = socket.create_connection((host, port))
        request = f"GET {SSE} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}"
        self._sock.sendall(f"{request}\r\n\r\n".encode())
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()


def corpus(root: Path, tag: int, sessions: int, records: int) -> int:
    """``sessions`` foreign sessions of ``records`` lines under ``root``; the event count."""
    body = b"".join(line(n) for n in range(1, records + 1))
    for n in range(sessions):
        path = DataRoot(root).shard_path("fleet", "harness", session_id(tag * 1000 + n), 1, DAY)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return sessions * records


def loopback_env(network: Network, root: Path) -> dict[str, str]:
    """A root-namespace process's environment: the real server URL, this network's tables."""
    return child_env(root) | {
        "PENTRACE_LEDGER_URL": network.database_url,
        "PENTRACE_LEDGER_TABLE_PREFIX": network.prefix,
    }


def timed(commands: list[tuple[list[str], dict[str, str]]]) -> float:
    """Run the commands at once; the wall seconds until the last has exited (each must pass)."""
    start = time.perf_counter()
    running = [
        subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for argv, env in commands
    ]
    for (argv, _), process in zip(commands, running, strict=True):
        _, err = process.communicate(timeout=1800)
        if process.returncode != 0:
            raise SystemExit(f"{argv}: exit {process.returncode}\n{err.decode()[-2000:]}")
    return time.perf_counter() - start


INGEST = [sys.executable, "-m", "pentrace", "ingest", "--once"]
SYNC = [sys.executable, "-m", "pentrace", "ledger", "sync"]
# (configuration, agent hosts (0: loopback, no namespace), command)
THROUGHPUT = (
    ("1 host, loopback (baseline)", 0, INGEST),
    ("1 host, veth", 1, INGEST),
    ("2 hosts at once, veth", 2, INGEST),
    ("2 hosts at once, veth, `ledger sync`", 2, SYNC),
)


def throughput(
    url: str, tmp: Path, hosts: int, command: list[str], sessions: int, records: int
) -> tuple[int, float]:
    """(events, wall seconds) of one throughput configuration, into fresh tables."""
    network = Network(url)
    try:
        runs, events = [], 0
        for number in range(max(1, hosts)):
            root = tmp / f"{network.tag}-{number}"
            events += corpus(root, number + 1, sessions, records)
            if hosts == 0:
                runs.append((command, loopback_env(network, root)))
                continue
            host = network.add_host(f"h{number}")
            runs.append((host.command(command), host_env(network, host, root)))
        if hosts:
            network.start_forwarder()
        return events, timed(runs)
    finally:
        network.close()


def latency(url: str, tmp: Path, records: int, pause: float, across: bool) -> list[float]:
    """Write-to-SSE-frame latencies in ms, across namespaces or all on loopback."""
    network = Network(url)
    root, web_root = tmp / f"{network.tag}-agent", tmp / f"{network.tag}-web"
    root.mkdir()
    web_root.mkdir()
    inside: Callable[[list[str]], list[str]] = list  # the writer's command, where it runs
    try:
        if across:
            agent, web = network.add_host("agent"), network.add_host("web")
            inside = agent.command
            network.start_forwarder()
            base = start_server(network, web, web_root)
            host, port = base.removeprefix("http://").rsplit(":", 1)
            client: Arrivals = TokenArrivals(host, int(port))
            Follower(network, agent, root).start()
        else:
            client = _loopback(network, root, web_root)
        time.sleep(0.3)
        path = DataRoot(root).shard_path("fleet", "harness", session_id(0xAA), 1, DAY)
        argv = [sys.executable, str(WRITER), str(path), "1", str(records), str(pause)]
        writer = subprocess.run(
            inside(argv),
            check=True,
            capture_output=True,
            text=True,
            env=child_env(root),
        )
        written = _write_times(writer.stdout)
        wait_until(lambda: len(client.times) >= records, "every record at the client")
        client.close()
    finally:
        network.close()
    return [(client.times[n] - written[n]) * 1000 for n in sorted(written)]


def _write_times(output: str) -> dict[int, float]:
    """The writer's ``WROTE <n> <time>`` lines: each record's clock just before its write."""
    times: dict[int, float] = {}
    for text in output.splitlines():
        kind, _, rest = text.partition(" ")
        if kind == "WROTE":
            number, stamp = rest.split()
            times[int(number)] = float(stamp)
    return times


def _loopback(network: Network, root: Path, web_root: Path) -> Arrivals:
    """Follower and server in the root namespace, on the real server's address."""
    health = root / "health.json"
    follow = [sys.executable, "-m", "pentrace", "ingest", "--follow", "--health-file", str(health)]
    network.processes.append(
        subprocess.Popen(follow, env=loopback_env(network, root), stderr=subprocess.DEVNULL)
    )
    port = _free_port()
    serve = [sys.executable, "-m", "pentrace", "serve", "--port", str(port)]
    network.processes.append(
        subprocess.Popen(
            serve,
            env=loopback_env(network, web_root),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            client = Arrivals(port)
        except OSError:
            time.sleep(0.1)
            continue
        while not health.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return client
    raise SystemExit("the loopback server did not come up")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions per host")
    parser.add_argument("--records", type=int, default=2000, help="records per session")
    parser.add_argument("--latency", type=int, default=200, help="records for the latency run")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between writes")
    parser.add_argument("--repeat", type=int, default=2, help="rounds of every configuration")
    args = parser.parse_args()
    url = os.environ.get("PENTRACE_TEST_DATABASE_URL")
    os.environ["PENTRACE_NETNS_TESTS"] = "1"
    reason = netns_unavailable(url)
    if reason is not None or url is None:
        raise SystemExit(f"multihost_pg: {reason}")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.repeat} rounds")
    walls: dict[str, list[float]] = {name: [] for name, _, _ in THROUGHPUT}
    counts: dict[str, int] = {}
    latencies: dict[str, list[float]] = {name: [] for name, _ in LATENCY}
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.repeat):
            # Rounds alternate the order, so a change in the machine's load hits every row.
            flip = -1 if round_number % 2 else 1
            for name, hosts, command in THROUGHPUT[::flip]:
                sizes = (args.sessions, args.records)
                counts[name], wall = throughput(url, Path(tmp), hosts, command, *sizes)
                walls[name].append(wall)
            for name, across in LATENCY[::flip]:
                samples = latency(url, Path(tmp), args.latency, args.pause, across)
                latencies[name] += samples
    print(f"\n{args.sessions} sessions x {args.records} records per host; best of the rounds")
    print("| configuration | events | wall s | events/s | vs baseline |")
    print("|---|---|---|---|---|")
    base = counts[THROUGHPUT[0][0]] / min(walls[THROUGHPUT[0][0]])
    for name, _, _ in THROUGHPUT:
        wall = min(walls[name])
        rate = counts[name] / wall
        print(f"| {name} | {counts[name]} | {wall:.2f} | {rate:,.0f} | {rate / base:.2f}x |")
    print(f"\n{args.latency} records per round, {args.pause * 1000:.0f} ms apart; all rounds")
    print(LATENCY_HEADER)
    for name, _ in LATENCY:
        print(latency_row(name, latencies[name]))


LATENCY = (("loopback (baseline)", False), ("agent host -> serve host", True))


if __name__ == "__main__":
    main()
