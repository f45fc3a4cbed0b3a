"""The trace recorder keeps eventsourcing's AggregateRecorder contract on real JSONL shards.

The cases mirror ``eventsourcing.tests.persistence.AggregateRecorderTestCase``.
The library's suite cannot run as is: it stores arbitrary bytes (``b"state1"``)
under arbitrary topics, while a trace stores JSON envelopes and derives each
topic from the line's header.  So the same cases run here with trace-shaped
stored events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from eventsourcing.application import Application
from eventsourcing.persistence import IntegrityError, NotSupportedError, StoredEvent
from eventsourcing.utils import get_topic

from pentrace import testing as pt
from pentrace.domain.session.events import (
    RecordAppended,
    RequestBegan,
    SessionStarted,
    ShardOpened,
    TextRecorded,
    ToolsListed,
)
from pentrace.errors import TraceConflictError, TraceLockedError
from pentrace.infrastructure.eventstore.persistence import Factory, TraceRecorder
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.durability import Durability

META = (
    b'{"timestamp":"2026-07-18T03:10:22.531Z","type":"session_meta","payload":{"session_id":"s"}}'
)
TOOLS = (
    b'{"timestamp":"2026-07-18T03:10:22.531Z","type":"event_msg",'
    b'"payload":{"type":"tool_list_ready","tools":[]}}'
)


def text(n: int) -> bytes:
    return (
        b'{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":'
        b'{"type":"text","role":"user","text":"msg %d"}}' % n
    )


def stored(session_id: str, version: int, state: bytes, topic: str = "") -> StoredEvent:
    return StoredEvent(session_id, version, topic or "ignored:Topic", state)


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "data")


@pytest.fixture
def recorder(root: DataRoot) -> Iterator[TraceRecorder]:
    rec = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    yield rec
    rec.close()


def shard_lines(root: DataRoot, session_id: str) -> list[list[bytes]]:
    shards = root.find_shards("proj", "agent", session_id)
    return [s.path.read_bytes().splitlines() for s in shards]


def test_insert_and_select_follow_the_aggregate_recorder_contract(
    recorder: TraceRecorder, root: DataRoot
) -> None:
    assert recorder.insert_events([]) is None
    assert recorder.select_events("s1", desc=True, limit=1) == []

    first = stored("s1", 1, META)
    assert recorder.insert_events([first]) is None
    selected = recorder.select_events("s1")
    assert selected == [StoredEvent("s1", 1, get_topic(SessionStarted), META)]

    # A version clash raises and writes nothing; so does a clash inside one batch.
    with pytest.raises(IntegrityError, match="expected the next record at position 2"):
        recorder.insert_events([first])
    second = stored("s1", 2, TOOLS)
    with pytest.raises(IntegrityError):
        recorder.insert_events([first, second])
    with pytest.raises(IntegrityError, match="consecutive versions"):
        recorder.insert_events([second, second])
    assert shard_lines(root, "s1") == [[META]]

    third = stored("s1", 3, text(3))
    recorder.insert_events([second, third])
    assert [(e.originator_version, e.topic, e.state) for e in recorder.select_events("s1")] == [
        (1, get_topic(SessionStarted), META),
        (2, get_topic(ToolsListed), TOOLS),
        (3, get_topic(TextRecorded), text(3)),
    ]

    last = recorder.select_events("s1", desc=True, limit=1)
    assert [e.originator_version for e in last] == [3]
    before = recorder.select_events("s1", lte=2, desc=True, limit=1)
    assert [e.originator_version for e in before] == [2]
    between = recorder.select_events("s1", gt=1, lte=2)
    assert [e.state for e in between] == [TOOLS]
    assert [e.originator_version for e in recorder.select_events("s1", limit=2)] == [1, 2]
    assert [e.originator_version for e in recorder.select_events("s1", desc=True)] == [3, 2, 1]

    # Sequences of different sessions are distinguished.
    assert recorder.select_events("s2") == []
    recorder.insert_events([stored("s2", 1, META)])
    assert [e.originator_id for e in recorder.select_events("s2")] == ["s2"]
    assert len(recorder.select_events("s1")) == 3


def test_topics_are_rebuilt_from_each_line_header(recorder: TraceRecorder) -> None:
    foreign = b'{"type":"event_msg","payload":{"type":"brand_new_kind"}}'
    begin = b'{"type":"event_msg","payload":{"type":"request_begin"}}'
    recorder.insert_events([stored("s", 1, META), stored("s", 2, begin), stored("s", 3, foreign)])
    topics = [e.topic for e in recorder.select_events("s")]
    assert topics == [get_topic(c) for c in (SessionStarted, RequestBegan, RecordAppended)]


def test_a_session_meta_copy_in_a_save_starts_the_next_shard_with_the_rest(
    recorder: TraceRecorder, root: DataRoot
) -> None:
    recorder.insert_events([stored("s", 1, META), stored("s", 2, TOOLS), stored("s", 3, text(3))])
    shard_opened = get_topic(ShardOpened)
    batch = [
        stored("s", 4, text(4)),
        stored("s", 5, META, shard_opened),
        stored("s", 6, TOOLS),
        stored("s", 7, text(7)),
    ]
    recorder.insert_events(batch)
    assert shard_lines(root, "s") == [[META, TOOLS, text(3), text(4)], [META, TOOLS, text(7)]]
    positions = [(e.originator_version, e.state) for e in recorder.select_events("s", gt=4)]
    assert positions == [(5, META), (6, TOOLS), (7, text(7))]


def test_insert_lines_writes_and_refuses_what_insert_events_does(root: DataRoot) -> None:
    opened = get_topic(ShardOpened)
    batches = [
        [(META, ""), (TOOLS, ""), (text(3), "")],
        [(text(4), ""), (META, opened), (TOOLS, ""), (text(7), ""), (META, opened), (TOOLS, "")],
        [(META, opened), (TOOLS, ""), (text(11), ""), (META, opened), (TOOLS, ""), (text(14), "")],
        [(text(15), "")],
    ]
    by_events = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    by_lines = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    try:
        position = 1
        for batch in batches:
            by_events.insert_events(
                [stored("e", position + n, line, topic) for n, (line, topic) in enumerate(batch)]
            )
            rotations = [n for n, (_, topic) in enumerate(batch) if topic]
            by_lines.insert_lines("l", position, [line for line, _ in batch], rotations)
            position += len(batch)
        by_lines.insert_lines("l", 99, [])  # an empty batch writes and checks nothing
        with pytest.raises(
            IntegrityError, match=f"expected the next record at position {position}"
        ):
            by_lines.insert_lines("l", position - 1, [text(0)])
    finally:
        by_events.close()
        by_lines.close()
    written = shard_lines(root, "l")
    assert len(written) == 5
    assert written == shard_lines(root, "e")


def test_positions_survive_a_new_recorder_and_skip_malformed_lines(root: DataRoot) -> None:
    first = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    first.insert_events([stored("s", 1, META), stored("s", 2, TOOLS)])
    first.close()
    shard = root.find_shards("proj", "agent", "s")[0].path
    with shard.open("ab") as handle:
        handle.write(b"not json\n\n")
    second = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    try:
        with pytest.raises(IntegrityError, match="expected the next record at position 3"):
            second.insert_events([stored("s", 2, text(2))])
        second.insert_events([stored("s", 3, text(3))])
        assert [e.originator_version for e in second.select_events("s")] == [1, 2, 3]
    finally:
        second.close()


def test_one_writer_per_session_holds_its_lock(root: DataRoot) -> None:
    first = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    second = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    try:
        first.insert_events([stored("s", 1, META)])
        with pytest.raises(TraceLockedError):
            second.insert_events([stored("s", 2, TOOLS)])
        first.release("s")
        second.insert_events([stored("s", 2, TOOLS)])
        assert len(second.select_events("s")) == 2
    finally:
        first.close()
        second.close()


def test_notifications_and_tracking_are_left_to_the_ledger(recorder: TraceRecorder) -> None:
    with pytest.raises(NotSupportedError, match="notification log"):
        recorder.max_notification_id()
    with pytest.raises(NotSupportedError):
        recorder.select_notifications(start=None, limit=10)
    factory = Factory({"PENTRACE_PROJECT": "p", "PENTRACE_AGENT": "a"})
    with pytest.raises(NotSupportedError):
        factory.tracking_recorder()
    with pytest.raises(NotSupportedError):
        factory.aggregate_recorder(purpose="snapshots")


def test_a_stock_application_selects_the_trace_store_by_persistence_module(
    tmp_path: Path,
) -> None:
    env = {
        "PERSISTENCE_MODULE": "pentrace.infrastructure.eventstore.persistence",
        "PENTRACE_DATA_ROOT": str(tmp_path),
        "PENTRACE_PROJECT": "proj",
        "PENTRACE_AGENT": "agent",
        "PENTRACE_DURABILITY": "none",
    }
    now = datetime(2026, 7, 18, tzinfo=UTC)
    with Application[str](env=env) as app:
        session = pt.start_session(pt.StartSession(), session_id="s", now=now)
        session.record_user_input("hi", now=now)
        app.save(session)
        assert app.repository.get("s") == session
    lines = shard_lines(DataRoot(tmp_path), "s")
    assert len(lines) == 1
    assert len(lines[0]) == 3


def test_a_writer_that_waited_for_the_lock_gets_a_pentrace_error_with_a_hint(
    root: DataRoot,
) -> None:
    first = TraceRecorder(root, "proj", "agent", durability=Durability.NONE)
    waiting = TraceRecorder(root, "proj", "agent", durability=Durability.NONE, wait=30.0)
    outcome: list[BaseException | None] = []
    try:
        first.insert_events([stored("s", 1, META)])

        def save_after_the_lock() -> None:
            try:
                # Its aggregate was at version 1 when it began: it saves version 2.
                waiting.insert_events([stored("s", 2, TOOLS)])
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome.append(exc)
            else:
                outcome.append(None)

        thread = threading.Thread(target=save_after_the_lock)
        thread.start()
        first.insert_events([stored("s", 2, text(2))])  # the other writer gets there first
        first.release("s")
        thread.join(timeout=60)
    finally:
        first.close()
        waiting.close()

    [error] = outcome
    assert isinstance(error, TraceConflictError)
    assert isinstance(error, IntegrityError)  # what eventsourcing's callers catch
    assert "expected the next record at position 3, found version 2" in error.message
    assert error.hint is not None
    assert "reload the session" in error.hint
    assert [len(lines) for lines in shard_lines(root, "s")] == [2]
