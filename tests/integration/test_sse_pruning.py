"""Retention that deletes rows a slow client has not read yet is reported as a gap, not hidden.

Drives the real stream generator over a real SQLite ledger (no HTTP: the
point is the order of pages and retention, which a socket would blur).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from pathlib import Path

import msgspec

from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.replay import Scope
from pentrace.service.context import ServiceContext
from pentrace.service.events.follower import LedgerFollower
from pentrace.service.events.sse import stream_events
from pentrace.service.settings import ServiceSettings
from tests.integration.sse_harness import event_ids, seed, session_id, write_session

_ID_LINE = b"id: "


def _ids(chunk: bytes) -> list[str]:
    return [line[4:].decode() for line in chunk.split(b"\n") if line.startswith(_ID_LINE)]


def _data(chunk: bytes) -> dict[str, object]:
    line = next(line for line in chunk.split(b"\n") if line.startswith(b"data: "))
    value = msgspec.json.decode(line[6:])
    assert isinstance(value, dict)
    return value


async def _take(frames: AsyncGenerator[bytes, None]) -> bytes:
    return await asyncio.wait_for(frames.__anext__(), 10)


def _frames_around(
    root: Path, sid: str, ledger: RuntimeEventLedger, meanwhile: Callable[[], object]
) -> list[bytes]:
    """Stream ``sid`` from its first event: two frames (connected, positions 2..51), then
    ``meanwhile`` runs in a thread, then two more frames.  ``ledger`` is closed at the end."""

    async def run() -> list[bytes]:
        follower = LedgerFollower(ledger)
        follower.start()
        context = ServiceContext(ServiceSettings(data_root=root, page_size=50), ledger, follower)
        frames = stream_events(context, Scope(session_id=sid), event_ids(sid, 1, 1)[0])
        try:
            got = [await _take(frames), await _take(frames)]
            await asyncio.to_thread(meanwhile)
            return [*got, await _take(frames), await _take(frames)]
        finally:
            await frames.aclose()
            follower.stop()

    try:
        return asyncio.run(run())
    finally:
        ledger.close()


def test_rows_pruned_ahead_of_a_slow_client_produce_an_evicted_gap_then_the_rest(
    tmp_path: Path,
) -> None:
    sid = session_id(0x9A)
    total = seed(tmp_path, sid, 50)  # positions 1..201
    ledger = RuntimeEventLedger.open(tmp_path, LedgerSettings().with_limits_off())

    def prune() -> None:
        # The client is slow; meanwhile retention keeps only the newest 100 rows (102..201).
        RuntimeEventLedger(ledger.db, LedgerSettings(max_events=100)).cleanup()

    # connected, positions 2..51, the gap, then 102..151
    connected, first, gap, after = _frames_around(tmp_path, sid, ledger, prune)
    assert _data(connected)["type"] == "server.connected"
    assert _ids(first) == event_ids(sid, 2, 51)
    assert _ids(gap) == []  # a control frame: no id line
    assert _data(gap) == {
        "type": "server.replay_gap",
        "properties": {
            "lastEventID": event_ids(sid, 51, 51)[0],
            "oldestEventID": event_ids(sid, 102, 102)[0],
            "newestEventID": event_ids(sid, total, total)[0],
            "reason": "last_event_id_not_available",
            "detail": "evicted",
            "replayFrom": event_ids(sid, 102, 102)[0],
            "sessionID": sid,
        },
    }
    assert _ids(after) == event_ids(sid, 102, 151)


def test_a_ledger_replaced_under_the_server_is_reported_and_streaming_restarts_on_it(
    tmp_path: Path,
) -> None:
    sid = session_id(0x9B)
    seed(tmp_path, sid, 50)  # positions 1..201, notification ids 1..201
    ledger = RuntimeEventLedger.open(tmp_path, LedgerSettings().with_limits_off())
    database = ledger.db.path
    assert database is not None

    def replace() -> None:
        # W13: the file is deleted; the next writer creates a new one, ids start at 1 again.
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        write_session(tmp_path, sid, 1)  # positions 202..205

    # connected, positions 2..51, the gap, then 202..205
    _, first, gap, after = _frames_around(tmp_path, sid, ledger, replace)
    assert _ids(first) == event_ids(sid, 2, 51)
    assert _data(gap) == {
        "type": "server.replay_gap",
        "properties": {
            "lastEventID": event_ids(sid, 51, 51)[0],
            "oldestEventID": event_ids(sid, 202, 202)[0],
            "newestEventID": event_ids(sid, 205, 205)[0],
            "reason": "last_event_id_not_available",
            "detail": "ledger_replaced",
            "replayFrom": event_ids(sid, 202, 202)[0],
            "sessionID": sid,
        },
    }
    assert _ids(after) == event_ids(sid, 202, 205), after
