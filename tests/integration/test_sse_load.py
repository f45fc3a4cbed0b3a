"""Many concurrent clients and a stalled one: memory stays bounded and nothing is lost.

Thirty clients replay the tail of the ledger and follow live events written by
another process, while one client reads nothing for the whole run.  The server
reads each client's pages from the ledger at that client's pace, so the
stalled client costs its socket buffers and one page, not its backlog: the
server's RSS growth stays well below the bytes that client has not read.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

from tests.integration.sse_harness import (
    Server,
    SseClient,
    event_ids,
    seed,
    session_id,
    write_session,
)

SSE = "/api/v1/events/sse"
FAST_CLIENTS = 30
CACHE_MIB = 1
_ID = re.compile(rb"^id: (\S+)$", re.MULTILINE)


class StalledClient:
    """A raw socket that sends the request and then reads nothing until told to drain."""

    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
        self.sock.sendall(request.encode())

    def drain_ids(self, until: bytes) -> tuple[list[bytes], int]:
        """Read until the frame with id ``until`` arrives: every id seen, in order, and the
        number of bytes received."""
        data = bytearray()
        marker = b"id: " + until + b"\n"
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
            if marker in data[-(len(chunk) + len(marker)) :]:
                break
        self.sock.close()
        # Chunked transfer encoding puts size lines between frames, never inside an id line.
        return _ID.findall(bytes(data)), len(data)


class RssSampler:
    """The peak resident memory of the server while a block runs (sampled every 50 ms)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.peak = server.rss_kib()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, self.server.rss_kib())
            time.sleep(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *args: object) -> None:
        self._done.set()
        self._thread.join()


def test_thirty_clients_and_a_stalled_one_get_everything_with_bounded_server_memory(
    tmp_path: Path,
) -> None:
    sid = session_id(0x10AD)
    seeded = seed(tmp_path, sid, 600, text_bytes=16000)  # 2401 events, ~19 MiB of frames
    server = Server(
        tmp_path, args=["--page-size", "50", "--frame-cache-mib", str(CACHE_MIB)]
    ).start()
    clients: list[SseClient] = []
    try:
        # Warm up: worker threads, a pooled SQLite connection and its page cache.
        warm_from = event_ids(sid, seeded - 300, seeded - 300)[0]
        warm = SseClient(server.url + SSE, {"session_id": sid, "last_event_id": warm_from})
        warm.events(300)
        warm.close()
        baseline = server.rss_kib()
        # Phase 1: a client that reads nothing, with the whole ledger to replay.
        with RssSampler(server) as alone:
            stalled = StalledClient(
                server.port, f"{SSE}?session_id={sid}&last_event_id={event_ids(sid, 1, 1)[0]}"
            )
            time.sleep(1.5)
        # Phase 2: thirty clients replay the tail and follow live writes from another process.
        tail_start = seeded - 200
        cursor = event_ids(sid, tail_start, tail_start)[0]
        with RssSampler(server) as crowd:
            for _ in range(FAST_CLIENTS):
                clients.append(
                    SseClient(server.url + SSE, {"session_id": sid, "last_event_id": cursor})
                )
            write_session(tmp_path, sid, 25, delay=0.01, batch=5)  # 100 live events
            last = seeded + 100
            expected = event_ids(sid, tail_start + 1, last)
            for client in clients:
                assert [frame.id for frame in client.events(len(expected), timeout=60)] == expected
        stalled_ids, stalled_bytes = stalled.drain_ids(event_ids(sid, last, last)[0].encode())
    finally:
        for client in clients:
            client.close()
        server.stop()
    # Nothing lost, nothing repeated, for the stalled client either.
    assert [value.decode() for value in stalled_ids] == event_ids(sid, 2, last)
    alone_mib = (alone.peak - baseline) / 1024
    crowd_mib = (crowd.peak - baseline) / 1024
    backlog_mib = stalled_bytes / 2**20
    print(
        f"RSS growth: stalled alone {alone_mib:.1f} MiB (backlog {backlog_mib:.1f} MiB), "
        f"with 30 clients {crowd_mib:.1f} MiB"
    )
    # The stalled client costs the shared frame cache (its cap) plus a page and its socket;
    # buffering its backlog would cost about the backlog itself.
    assert alone_mib < CACHE_MIB + 4 < backlog_mib / 2, (alone_mib, backlog_mib)
    # 30 clients: the shared frame cache, a page or two per client in flight and
    # the worker threads; fixed by configuration (clients x page), not by the volume delivered.
    assert crowd_mib < 64, crowd_mib
