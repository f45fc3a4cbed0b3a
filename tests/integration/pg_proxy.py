"""A TCP proxy on 127.0.0.1 in front of the real PostgreSQL that can stop answering.

``forward``: bytes flow both ways.  ``hang()``: new connections are accepted
and held (the kernel acknowledges what the client sends; nothing is read or
answered) and open ones stop relaying, like a server that froze.
``recover()``: held and frozen connections are closed (the client sees the
server drop them, as after a restart) and new ones are forwarded again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from types import TracebackType

from sqlalchemy.engine import make_url


class HangingProxy:
    """A loopback proxy to ``target`` (host, port) with a switch to "accept and never answer"."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._lock = threading.Lock()
        self._hanging = False
        self._open: list[socket.socket] = []
        self._stop = threading.Event()
        self.held = 0
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @classmethod
    def before(cls, url: str) -> HangingProxy:
        """A proxy in front of the server a SQLAlchemy URL names."""
        parsed = make_url(url)
        return cls((parsed.host or "127.0.0.1", parsed.port or 5432))

    def url_for(self, url: str) -> str:
        """``url`` pointed at this proxy."""
        parsed = make_url(url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    def hang(self) -> None:
        """Stop answering: hold new connections, freeze the open ones."""
        with self._lock:
            self._hanging = True

    def recover(self) -> None:
        """Close every held or frozen connection, then forward new ones again."""
        with self._lock:
            self._hanging = False
            doomed, self._open = self._open, []
        for sock in doomed:
            _close(sock)

    def close(self) -> None:
        """Stop the proxy and close every connection."""
        self._stop.set()
        self.recover()
        _close(self._server)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> HangingProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(client)
                if self._hanging:
                    self.held += 1
                    continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open.append(upstream)
            relay = threading.Thread(target=self._relay, args=(client, upstream), daemon=True)
            relay.start()
            self._threads.append(relay)

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._stop.is_set():
                with self._lock:
                    frozen = self._hanging
                    alive = client in self._open
                if not alive:
                    break
                if frozen:
                    self._stop.wait(0.05)
                    continue
                try:
                    ready = selector.select(timeout=0.05)
                except (OSError, ValueError):  # recover() closed a socket under us
                    break
                for key, _ in ready:
                    source = key.fileobj
                    assert isinstance(source, socket.socket)
                    try:
                        data = source.recv(65536)
                        if not data:
                            raise OSError("closed")
                        peers[source].sendall(data)
                    except OSError:
                        _close(client)
                        _close(upstream)
                        return
        _close(client)
        _close(upstream)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
