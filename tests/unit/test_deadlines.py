"""The client-side deadline on real sockets: a blocked read wakes when its deadline passes."""

from __future__ import annotations

import socket
import threading

from pentrace.infrastructure.ledger.backend.connections import Deadlines

GUARD = 30.0


class Conn:
    """What the watchdog needs of a driver connection: its socket's descriptor."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()


def blocked_read(sock: socket.socket) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []
    thread = threading.Thread(target=lambda: got.append(sock.recv(10)), daemon=True)
    thread.start()
    return thread, got


def test_a_read_that_gets_no_answer_wakes_when_its_deadline_passes() -> None:
    deadlines = Deadlines()
    ours, silent_peer = socket.socketpair()
    with ours, silent_peer:
        thread, got = blocked_read(ours)
        deadlines.arm(Conn(ours), 0.05)
        thread.join(GUARD)
        assert not thread.is_alive()
        assert got == [b""]  # the socket was shut down under the read
        assert deadlines.cut == 1
        assert ours.fileno() >= 0  # the descriptor itself stays open: the driver closes it


def test_the_thread_that_armed_learns_why_its_connection_broke() -> None:
    deadlines = Deadlines()
    ours, peer = socket.socketpair()
    with ours, peer:
        deadlines.arm(Conn(ours), 0.05)
        assert ours.recv(10) == b""
        assert deadlines.expired() == 0.05
        assert deadlines.expired() is None


def test_a_disarmed_or_rearmed_connection_is_not_cut_early() -> None:
    deadlines = Deadlines()
    first, first_peer = socket.socketpair()
    later, later_peer = socket.socketpair()
    probe, probe_peer = socket.socketpair()
    with first, first_peer, later, later_peer, probe, probe_peer:
        first_conn = Conn(first)
        deadlines.arm(first_conn, 0.01)
        deadlines.disarm(first_conn)
        later_conn = Conn(later)
        deadlines.arm(later_conn, 0.01)
        deadlines.arm(later_conn, GUARD * 10)  # re-armed before it passed: the later one holds
        deadlines.arm(Conn(probe), 0.05)
        assert probe.recv(10) == b""  # the probe's deadline passed, and it was cut
        first_peer.sendall(b"a")
        later_peer.sendall(b"b")
        assert first.recv(10) == b"a"
        assert later.recv(10) == b"b"
        assert deadlines.cut == 1
