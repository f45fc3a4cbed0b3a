"""The SSE stream over a PostgreSQL ledger: live events from another process via LISTEN/NOTIFY.

Skipped without ``PENTRACE_TEST_DATABASE_URL``.  Each run uses its own table
prefix, dropped at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pentrace.infrastructure.ledger import LedgerDatabase
from tests.integration.sse_harness import (
    PREFIX_ENV,
    Server,
    SseClient,
    event_ids,
    session_id,
    write_session,
    writer_thread,
)
from tests.support import NEEDS_POSTGRES, POSTGRES_URL

URL = POSTGRES_URL
SSE = "/api/v1/events/sse"

pytestmark = NEEDS_POSTGRES


@pytest.fixture(scope="module")
def pg_env() -> Iterator[dict[str, str]]:
    assert URL is not None
    prefix = f"sse_{uuid.uuid4().hex[:10]}_"
    yield {"PENTRACE_LEDGER_URL": URL, PREFIX_ENV: prefix}
    database = LedgerDatabase(URL, table_prefix=prefix)
    database.drop_all()
    database.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pg-root")


@pytest.fixture(scope="module")
def server(root: Path, pg_env: dict[str, str]) -> Iterator[Server]:
    running = Server(root, env=pg_env).start()
    yield running
    running.stop()


def test_live_events_from_another_process_reach_the_client_and_replay_after_a_reconnect(
    root: Path, server: Server, pg_env: dict[str, str]
) -> None:
    sid = session_id(0x6006)
    live = SseClient(server.url + SSE, {"session_id": sid})
    assert live.next().type == "server.connected"
    write_session(root, sid, 5, env=pg_env)  # positions 1..22, from this process
    frames = live.events(22)
    live.close()
    assert [frame.id for frame in frames] == event_ids(sid, 1, 22)
    assert frames[0].data["properties"]["sessionID"] == sid
    writer = writer_thread(root, sid, 25, delay=0.01, batch=5, env=pg_env)  # 23..122
    cursor = event_ids(sid, 10, 10)[0]
    resumed = SseClient(server.url + SSE, {"session_id": sid}, {"Last-Event-ID": cursor})
    try:
        got = resumed.events(112, timeout=60)
    finally:
        writer.join()
        resumed.close()
    assert [frame.id for frame in got] == event_ids(sid, 11, 122)
    assert "LISTEN on the ledger failed" not in server.output()


def test_an_unknown_cursor_on_postgres_is_a_scoped_gap(
    root: Path, server: Server, pg_env: dict[str, str]
) -> None:
    sid = session_id(0x6007)
    write_session(root, sid, 1, env=pg_env)  # positions 1..6
    client = SseClient(
        server.url + SSE, {"session_id": sid, "last_event_id": "evt:session:gone:00000009"}
    )
    try:
        client.next()
        gap = client.next()
        events = client.events(6)
    finally:
        client.close()
    assert gap.type == "server.replay_gap"
    assert gap.data["properties"]["reason"] == "last_event_id_not_available"
    assert gap.data["properties"]["detail"] == "unknown_event_id"
    # W6: bounds within this session, though another session's rows are in the ledger.
    assert gap.data["properties"]["oldestEventID"] == event_ids(sid, 1, 1)[0]
    assert gap.data["properties"]["newestEventID"] == event_ids(sid, 6, 6)[0]
    assert [frame.id for frame in events] == event_ids(sid, 1, 6)
