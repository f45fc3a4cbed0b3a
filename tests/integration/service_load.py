"""Load on a real ``pentrace serve`` from loopback: many SSE clients and a stream of page
requests, the server's memory and descriptors watched, then SIGTERM with streams still open.

Used by ``benchmarks/service_load.py`` (issue #32: 200 clients, 50 requests a second, 60 s)
and by ``test_service_load.py`` (a bounded version).  The clients are raw sockets in one
asyncio loop, so the client side stays light next to the server on a small machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.integration.sse_harness import REPO, Server, child_env

SSE = "/api/v1/events/sse"


@dataclass(frozen=True)
class Load:
    """What to send: ``sse_clients`` streams held for ``seconds`` while ``rate`` page
    requests a second go out, then ``settle`` seconds of watching with everything closed."""

    sse_clients: int = 200
    rate: float = 50.0
    seconds: float = 60.0
    settle: float = 10.0
    # Streams open when SIGTERM is sent (shutdown must end them).
    open_at_sigterm: int = 50


@dataclass
class Figures:
    """What one run measured."""

    statuses: Counter[int] = field(default_factory=Counter)
    # Seconds from connecting to the last byte, per page request answered under load.
    page_seconds: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    sse_opened: int = 0
    rss_cold_kib: int = 0
    rss_idle_kib: int = 0
    rss_peak_kib: int = 0
    rss_after_kib: int = 0
    fds_cold: int = 0
    fds_idle: int = 0
    fds_peak: int = 0
    fds_after: int = 0
    # Seconds from the last close until the descriptors were back to idle (None: never).
    fds_back_after: float | None = None
    sigterm_seconds: float = 0.0
    exit_code: int | None = None
    errors_in_log: list[str] = field(default_factory=list)

    @property
    def server_errors(self) -> int:
        """Answers with a 5xx status."""
        return sum(count for status, count in self.statuses.items() if status >= 500)


def build_root(root: Path, demos: int = 3) -> None:
    """A data root of ``2 * demos`` sessions (``pentrace demo``) indexed in the ledger."""
    env = child_env(root)
    for _ in range(demos):
        subprocess.run(
            [sys.executable, "-m", "pentrace", "--data-root", str(root), "demo"],
            env=env,
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )


def page_paths(server: Server) -> list[str]:
    """The request mix: the viewer's pages, a search, usage, session pages and the API."""
    listing = httpx.get(server.url + "/api/v1/sessions", timeout=30).json()
    sessions = listing["sessions"] if isinstance(listing, dict) else listing
    paths = ["/web/traces", "/web/traces?q=foo", "/web/usage", "/api/v1/sessions"]
    paths += ["/api/v1/stats/tokens", "/web/traces?q=tool"]
    for row in sessions[:4]:
        reference = f"{row['project']}/{row['agent']}/{row['session_id']}"
        paths += [f"/web/sessions/{reference}", f"/api/v1/sessions/{reference}"]
    return paths


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def fd_count(pid: int) -> int:
    """Open descriptors of ``pid`` (Linux /proc)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _status(reader: asyncio.StreamReader) -> int:
    line = await reader.readline()
    parts = line.split()
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"no status line: {line[:80]!r}")
    return int(parts[1])


def _request(path: str, port: int, keep: bool) -> bytes:
    connection = "keep-alive" if keep else "close"
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: {connection}\r\n"
        "Accept: */*\r\n\r\n"
    ).encode()


class _Driver:
    """The clients of one run, in one event loop."""

    def __init__(self, port: int, figures: Figures) -> None:
        self.port = port
        self.figures = figures
        self.streams: list[asyncio.StreamWriter] = []
        self.counting = True

    async def open_stream(self, query: str) -> None:
        """Open an SSE stream and read its headers; it stays open until closed."""
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            writer.write(_request(f"{SSE}?{query}" if query else SSE, self.port, keep=True))
            await writer.drain()
            status = await asyncio.wait_for(_status(reader), 30)
        except (OSError, TimeoutError) as error:
            self.figures.failures[f"sse {type(error).__name__}"] += 1
            return
        self.figures.statuses[status] += 1
        self.figures.sse_opened += 1
        self.streams.append(writer)
        asyncio.get_running_loop().create_task(self._drain(reader))

    async def _drain(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while await reader.read(1 << 16):
                pass

    async def page(self, path: str) -> None:
        """One request on its own connection, read to the end."""
        started = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            writer.write(_request(path, self.port, keep=False))
            await writer.drain()
            status = await asyncio.wait_for(_status(reader), 60)
            await asyncio.wait_for(reader.read(), 60)
            writer.close()
        except (OSError, TimeoutError, ConnectionError) as error:
            if self.counting:
                self.figures.failures[f"page {type(error).__name__}"] += 1
            return
        if self.counting:
            self.figures.statuses[status] += 1
            self.figures.page_seconds.append(time.monotonic() - started)

    async def close_streams(self) -> None:
        """Close every stream from the client side."""
        for writer in self.streams:
            writer.close()
        for writer in self.streams:
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        self.streams.clear()


def _queries(count: int, sessions: list[str]) -> list[str]:
    """Stream scopes: everything, one session, and a cursor the ledger never held (a gap)."""
    kinds = ["", "last_event_id=0-0-unknown"] + [f"session_id={sid}" for sid in sessions]
    return [kinds[index % len(kinds)] for index in range(count)]


async def _run(server: Server, load: Load, paths: list[str], figures: Figures) -> None:
    assert server.process is not None
    pid = server.process.pid
    driver = _Driver(server.port, figures)

    def sample() -> None:
        figures.rss_peak_kib = max(figures.rss_peak_kib, rss_kib(pid))
        figures.fds_peak = max(figures.fds_peak, fd_count(pid))

    sessions = [path.rsplit("/", 1)[1] for path in paths if path.startswith("/api/v1/sessions/")]
    for query in _queries(load.sse_clients, sessions):
        await driver.open_stream(query)
    pending: set[asyncio.Task[None]] = set()
    started = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - started) < load.seconds:
        due = int(elapsed * load.rate) + 1
        while sent < due:
            task = asyncio.create_task(driver.page(paths[sent % len(paths)]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
        if sent % 10 == 0:
            sample()
        await asyncio.sleep(min(0.02, 1 / load.rate))
    if pending:
        await asyncio.wait(pending, timeout=120)
    sample()
    await driver.close_streams()
    closed = time.monotonic()
    while time.monotonic() - closed < load.settle:
        await asyncio.sleep(0.25)
        fds = fd_count(pid)
        if fds <= figures.fds_idle and figures.fds_back_after is None:
            figures.fds_back_after = time.monotonic() - closed
    figures.rss_after_kib = rss_kib(pid)
    figures.fds_after = fd_count(pid)
    # Shutdown with streams open and requests in flight: both must end promptly.
    for query in _queries(load.open_at_sigterm, sessions):
        await driver.open_stream(query)
    driver.counting = False  # requests cut by the shutdown are not the server's errors
    # A second's worth of requests queued at once: some are still running at the signal.
    burst_size = max(len(paths), int(load.rate))
    burst = [asyncio.create_task(driver.page(paths[i % len(paths)])) for i in range(burst_size)]
    await asyncio.sleep(0.2)
    sent_at = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    while server.process.poll() is None and time.monotonic() - sent_at < 30:
        await asyncio.sleep(0.01)
    figures.sigterm_seconds = time.monotonic() - sent_at
    figures.exit_code = server.process.poll()
    await asyncio.wait(burst, timeout=30)
    await driver.close_streams()


def _warm(server: Server, paths: list[str]) -> None:
    """Each request once: imports, templates and derived stores made before idle is read."""
    for path in paths:
        httpx.get(server.url + path, timeout=120)


def measure(
    root: Path,
    load: Load,
    progress: Callable[[str], None] | None = None,
    server_args: list[str] | None = None,
    server_env: dict[str, str] | None = None,
) -> Figures:
    """Start ``pentrace serve`` on ``root`` (already built), run ``load``, stop it with
    SIGTERM; every figure of :class:`Figures`."""
    say = progress or (lambda _text: None)
    args = ["--keepalive", "15", *(server_args or [])]
    server = Server(root, env=child_env(root, server_env), args=args)
    server.start()
    assert server.process is not None
    pid = server.process.pid
    figures = Figures(rss_cold_kib=rss_kib(pid), fds_cold=fd_count(pid))
    try:
        paths = page_paths(server)
        _warm(server, paths)
        time.sleep(1)
        figures.rss_idle_kib, figures.fds_idle = rss_kib(pid), fd_count(pid)
        figures.rss_peak_kib, figures.fds_peak = figures.rss_idle_kib, figures.fds_idle
        say(f"idle: {figures.rss_idle_kib / 1024:.1f} MiB, {figures.fds_idle} fds")
        asyncio.run(_run(server, load, paths, figures))
    finally:
        server.stop()
    figures.errors_in_log = [
        line for line in server.output().splitlines() if "Traceback" in line or " 500 " in line
    ]
    return figures
