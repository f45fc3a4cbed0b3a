"""Retention that deletes rows a slow client has not read yet is reported as a gap, not hidden.

Drives the real stream generator over a real SQLite ledger (no HTTP: the
point is the order of pages and retention, which a socket would blur).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import msgspec

from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.pages import Scope
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


def test_rows_pruned_ahead_of_a_slow_client_produce_an_evicted_gap_then_the_rest(
    tmp_path: Path,
) -> None:
    sid = session_id(0x9A)
    total = seed(tmp_path, sid, 50)  # positions 1..201
    ledger = RuntimeEventLedger.open(tmp_path, LedgerSettings().with_limits_off())

    async def run() -> list[bytes]:
        follower = LedgerFollower(ledger)
        follower.start()
        context = ServiceContext(
            ServiceSettings(data_root=tmp_path, page_size=50), ledger, follower
        )
        frames = stream_events(context, Scope(session_id=sid), event_ids(sid, 1, 1)[0])
        try:
            got = [await _take(frames), await _take(frames)]  # connected, positions 2..51
            # The client is slow; meanwhile retention keeps only the newest 100 rows (102..201).
            await asyncio.to_thread(
                RuntimeEventLedger(ledger.db, LedgerSettings(max_events=100)).cleanup
            )
            got += [await _take(frames), await _take(frames)]  # the gap, then 102..151
            return got
        finally:
            await frames.aclose()
            follower.stop()

    try:
        connected, first, gap, after = asyncio.run(run())
    finally:
        ledger.close()
    assert _data(connected)["type"] == "server.connected"
    assert _ids(first) == event_ids(sid, 2, 51)
    assert _ids(gap) == []  # a control frame: no id line
    assert _data(gap) == {
        "type": "server.replay_gap",
        "properties": {
            "lastEventID": event_ids(sid, 51, 51)[0],
            "oldestEventID": event_ids(sid, 102, 102)[0],
            "newestEventID": event_ids(sid, total, total)[0],
            "reason": "evicted",
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

    async def run() -> list[bytes]:
        follower = LedgerFollower(ledger)
        follower.start()
        context = ServiceContext(
            ServiceSettings(data_root=tmp_path, page_size=50), ledger, follower
        )
        frames = stream_events(context, Scope(session_id=sid), event_ids(sid, 1, 1)[0])
        try:
            got = [await _take(frames), await _take(frames)]  # connected, positions 2..51
            # W13: the file is deleted; the next writer creates a new one, ids start at 1 again.
            for suffix in ("", "-wal", "-shm"):
                Path(f"{database}{suffix}").unlink(missing_ok=True)
            await asyncio.to_thread(write_session, tmp_path, sid, 1)  # positions 202..205
            got += [await _take(frames), await _take(frames)]  # the gap, then 202..205
            return got
        finally:
            await frames.aclose()
            follower.stop()

    try:
        _, first, gap, after = asyncio.run(run())
    finally:
        ledger.close()
    assert _ids(first) == event_ids(sid, 2, 51)
    assert _data(gap) == {
        "type": "server.replay_gap",
        "properties": {
            "lastEventID": event_ids(sid, 51, 51)[0],
            "oldestEventID": event_ids(sid, 202, 202)[0],
            "newestEventID": event_ids(sid, 205, 205)[0],
            "reason": "ledger_replaced",
            "replayFrom": event_ids(sid, 202, 202)[0],
            "sessionID": sid,
        },
    }
    assert _ids(after) == event_ids(sid, 202, 205), after
