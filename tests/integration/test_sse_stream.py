"""The SSE stream against a real server (uvicorn subprocess) and real writer processes."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.live.follower import HeadFollower
from tests.integration.sse_harness import (
    Server,
    SseClient,
    event_ids,
    finish,
    session_id,
    start_writer,
    write_session,
    writer_thread,
)

SSE = "/api/v1/events/sse"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sse-root")


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[Server]:
    # Small pages make every replay span many reads, so hand-overs are exercised.
    running = Server(root, args=["--page-size", "50"]).start()
    yield running
    running.stop()


@pytest.fixture
def client_factory(server: Server) -> Iterator[list[SseClient]]:
    clients: list[SseClient] = []
    yield clients
    for client in clients:
        client.close()


def connect(
    server: Server, clients: list[SseClient], headers: dict[str, str] | None = None, **params: str
) -> SseClient:
    client = SseClient(server.url + SSE, params, headers)
    clients.append(client)
    return client


def test_the_response_has_the_event_stream_headers_and_starts_with_an_id_less_connected_frame(
    server: Server, client_factory: list[SseClient]
) -> None:
    client = connect(server, client_factory)
    first = client.next()
    assert client.status == 200
    assert client.headers is not None
    assert client.headers["content-type"].startswith("text/event-stream")
    assert client.headers["cache-control"] == "no-store"  # events never land in a cache
    assert client.headers["x-accel-buffering"] == "no"
    assert first.type == "server.connected"
    assert first.id is None  # W10: a control frame never moves the browser's Last-Event-ID
    assert first.retry == 1000


def test_an_idle_stream_gets_keepalive_comments(
    server: Server, client_factory: list[SseClient]
) -> None:
    client = connect(server, client_factory, session_id=session_id(0xDEAD))
    assert client.comment() == "keepalive"


def test_replay_after_an_id_sends_exactly_the_later_events_in_order(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    sid = session_id(1)
    write_session(root, sid, 30)  # positions 1..122
    client = connect(server, client_factory, last_event_id=event_ids(sid, 7, 7)[0])
    frames = client.events(115)
    assert [frame.id for frame in frames] == event_ids(sid, 8, 122)
    assert [frame.data["order"] for frame in frames[:3]] == [8, 9, 10]
    assert frames[0].data["properties"]["sessionID"] == sid


def test_the_query_cursor_wins_over_the_last_event_id_header(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    sid = session_id(2)
    write_session(root, sid, 2)  # positions 1..10
    client = connect(
        server,
        client_factory,
        headers={"Last-Event-ID": event_ids(sid, 2, 2)[0]},
        last_event_id=event_ids(sid, 8, 8)[0],
        session_id=sid,
    )
    assert [frame.id for frame in client.events(2)] == event_ids(sid, 9, 10)
    header_only = connect(
        server, client_factory, headers={"Last-Event-ID": event_ids(sid, 8, 8)[0]}, session_id=sid
    )
    assert [frame.id for frame in header_only.events(2)] == event_ids(sid, 9, 10)


def test_filters_keep_one_session_agent_or_directory(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    one, two = session_id(3), session_id(4)
    write_session(root, one, 1, agent="alpha", workspace="ws-one")  # 6 events
    write_session(root, two, 1, agent="beta", workspace="ws-two")  # 6 events
    start = event_ids(one, 1, 1, agent="alpha")[0]
    by_session = connect(server, client_factory, last_event_id=start, session_id=two)
    by_alias = connect(server, client_factory, last_event_id=start, conversation_id=two)
    by_agent = connect(server, client_factory, last_event_id=start, agent_id="beta")
    by_directory = connect(
        server, client_factory, last_event_id=start, directory=str(root / "ws-two") + "/./"
    )
    for client in (by_session, by_alias, by_agent, by_directory):
        assert [frame.id for frame in client.events(6)] == event_ids(two, 1, 6, agent="beta")
    by_other_dir = connect(
        server, client_factory, last_event_id=start, directory=str(root / "ws-one")
    )
    assert [frame.id for frame in by_other_dir.events(5)] == event_ids(one, 2, 6, agent="alpha")


def test_session_id_and_conversation_id_that_disagree_are_a_400(server: Server) -> None:
    import httpx

    response = httpx.get(
        server.url + SSE, params={"session_id": "a", "conversation_id": "b"}, timeout=5
    )
    assert response.status_code == 400
    assert "conversation_id is an alias" in response.json()["error"]["message"]


def test_a_reconnect_with_the_last_seen_id_repeats_nothing_and_misses_nothing(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    sid = session_id(5)
    write_session(root, sid, 10)  # positions 1..42
    first = connect(server, client_factory, session_id=sid, last_event_id=event_ids(sid, 1, 1)[0])
    seen = [frame.id for frame in first.events(20)]
    first.close()
    write_session(root, sid, 5)  # 43..62, written while disconnected
    assert seen[-1] is not None
    second = connect(server, client_factory, session_id=sid, last_event_id=seen[-1])
    control = second.next()
    assert control.type == "server.connected"
    assert control.id is None
    seen += [frame.id for frame in second.events(41)]
    assert seen == event_ids(sid, 2, 62)


def test_events_written_by_another_process_during_the_replay_arrive_once_in_order(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    sid = session_id(6)
    write_session(root, sid, 100)  # 402 events already in the ledger
    # The test process is the recorder here: a different process from the server.
    writer = writer_thread(root, sid, 150, delay=0.01, batch=5)  # 600 more, over ~0.5-1 s
    client = connect(server, client_factory, session_id=sid, last_event_id=event_ids(sid, 1, 1)[0])
    frames = client.events(1001, timeout=60)
    writer.join()
    assert [frame.id for frame in frames] == event_ids(sid, 2, 1002)
    with pytest.raises(queue.Empty):
        client.events(1, timeout=0.5)


def test_a_pruned_cursor_gets_a_scoped_evicted_gap_then_the_retained_events(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    sid, other = session_id(7), session_id(8)
    write_session(root, sid, 5)  # positions 1..22
    ledger = RuntimeEventLedger.open(root, LedgerSettings(max_events=None).with_limits_off())
    try:
        # Keep only the newest 12 rows of the whole ledger: this session's 13..22, then 2 of other.
        write_session(root, other, 0)  # positions 1..2 of another session
        keep = RuntimeEventLedger(ledger.db, LedgerSettings(max_events=12))
        keep.cleanup()
    finally:
        ledger.close()
    client = connect(server, client_factory, session_id=sid, last_event_id=event_ids(sid, 4, 4)[0])
    assert client.next().type == "server.connected"
    gap = client.next()
    assert gap.type == "server.replay_gap"
    assert gap.id is None
    assert gap.data["properties"] == {
        "lastEventID": event_ids(sid, 4, 4)[0],
        "oldestEventID": event_ids(sid, 13, 13)[0],  # W6: bounds of this session, not global
        "newestEventID": event_ids(sid, 22, 22)[0],
        "reason": "last_event_id_not_available",
        "detail": "evicted",
        "replayFrom": event_ids(sid, 13, 13)[0],
        "sessionID": sid,
    }
    # W6: after the gap, the retained events still come (Penguin sent nothing).
    assert [frame.id for frame in client.events(10)] == event_ids(sid, 13, 22)


def test_an_id_that_never_existed_is_an_unknown_gap_not_an_eviction(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    sid = session_id(9)
    write_session(root, sid, 0)  # positions 1..2
    client = connect(server, client_factory, session_id=sid, last_event_id=f"evt:session:{sid}:x")
    client.next()
    gap = client.next()
    assert gap.type == "server.replay_gap"
    assert gap.data["properties"]["reason"] == "last_event_id_not_available"
    assert gap.data["properties"]["detail"] == "unknown_event_id"
    assert [frame.id for frame in client.events(2)] == event_ids(sid, 1, 2)


def test_w8_events_saved_by_a_killed_recorder_are_replayed_with_no_client_connected(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    # Penguin kept events in an unflushed batch until an SSE loop ran: a process exit lost them.
    sid = session_id(10)
    writer = start_writer(root, sid, 3, hang=True)
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == b"ready"
    assert writer.stdout.readline().strip() == b"written"
    writer.send_signal(signal.SIGKILL)
    finish(writer)
    client = connect(server, client_factory, session_id=sid, last_event_id=f"evt:session:{sid}:x")
    assert [frame.id for frame in client.events(14)] == event_ids(sid, 1, 14)


def test_w9_events_of_a_quiet_session_are_persisted_and_delivered_without_other_traffic(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    # Penguin left session B's events unpersisted while a client of session A saw no traffic.
    quiet, busy = session_id(11), session_id(12)
    watcher_a = connect(server, client_factory, session_id=quiet)
    watcher_b = connect(server, client_factory, session_id=busy)
    assert watcher_a.next().type == "server.connected"
    assert watcher_b.next().type == "server.connected"
    write_session(root, busy, 5)  # in the test process, not the server's
    ledger = RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())
    try:
        held = [ledger.contains(event_id) for event_id in event_ids(busy, 1, 22)]
    finally:
        ledger.close()
    assert all(held)
    assert [frame.id for frame in watcher_b.events(22)] == event_ids(busy, 1, 22)
    with pytest.raises(queue.Empty):
        watcher_a.events(1, timeout=0.5)


def test_w10_a_reconnect_that_only_saw_control_frames_keeps_its_cursor(
    root: Path, server: Server, client_factory: list[SseClient]
) -> None:
    # Penguin's server.connected carried evt:session:<sid>:00000001 and became the last id.
    sid = session_id(13)
    write_session(root, sid, 1)  # positions 1..6
    last_id = event_ids(sid, 3, 3)[0]
    quiet = connect(server, client_factory, session_id=sid, last_event_id=last_id)
    frames = [quiet.next(), *quiet.events(3)]
    quiet.close()
    # EventSource's rule: the last id is the last non-empty id: line received.
    ids = [frame.id for frame in frames if frame.id is not None]
    assert frames[0].id is None
    assert ids == event_ids(sid, 4, 6)
    again = connect(server, client_factory, session_id=sid, last_event_id=ids[-1])
    assert again.next().id is None
    with pytest.raises(queue.Empty):
        again.events(1, timeout=0.5)


_CHILD_WRITER = """
import sys, time
from pathlib import Path
from pentrace.domain.runtime import build_event
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger

ledger = RuntimeEventLedger(LedgerDatabase.for_path(Path(sys.argv[1])), LedgerSettings())
stop = Path(sys.argv[2])
sequence = 0
while not stop.exists() and sequence < 600:
    sequence += 1
    ledger.append(build_event(event_type="message.updated", payload={"n": sequence},
                              time_ms=1, sequence=sequence, stream_id="global:wake"))
    time.sleep(0.1)
ledger.close()
"""


def test_a_listening_follower_wakes_on_another_processs_commit_to_a_sqlite_ledger(
    tmp_path: Path,
) -> None:
    """ADR 0081: with polling set to an hour, only the watch of the ledger's file can wake
    the follower for a commit made in another process."""
    path = tmp_path / "ledger.db"
    ledger = RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings())
    heads = HeadFollower(ledger, poll_interval=3600, listen=True).start()
    stop = tmp_path / "stop"
    child = None
    try:
        assert heads.wait(timeout=30)  # the listener started
        heads.clear()
        before = heads.head()
        child = subprocess.Popen([sys.executable, "-c", _CHILD_WRITER, str(path), str(stop)])
        while True:
            assert heads.wait(timeout=60), "no wake-up from another process's commit"
            heads.clear()
            if heads.head() > before:
                break
    finally:
        stop.touch()
        if child is not None:
            child.wait(timeout=60)
        heads.stop()
        ledger.close()
    assert "pentrace-ledger-listen" not in {thread.name for thread in threading.enumerate()}
