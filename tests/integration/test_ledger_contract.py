"""The ledger's own behaviour, one suite run against SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from pentrace.domain.runtime import build_event
from pentrace.errors import LedgerConflictError, RedactionError
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from tests.integration.ledger_backends import LedgerBackend

__all__ = ["make_ledger"]  # the fixture other suites import
NO_LIMITS = LedgerSettings().with_limits_off()

MakeLedger = Callable[..., RuntimeEventLedger]


class FakeClock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_event(
    session: str | None,
    sequence: int,
    payload: dict[str, Any] | None = None,
    *,
    time_ms: Any = 1_700_000_000_000,
    agent: str | None = "agent-a",
    directory: str | None = "/srv/work",
) -> dict[str, Any]:
    """A RuntimeEvent from the domain builder, as builtins; ``time_ms=None`` drops ``time``.

    Non-integer times make the raw envelopes other producers send (Penguin's W3 cases).
    """
    scope = {
        key: value
        for key, value in (("session_id", session), ("agent_id", agent), ("directory", directory))
        if value is not None
    }
    event = build_event(
        event_type="message.updated",
        payload=payload if payload is not None else {"text": f"message {sequence}"},
        time_ms=1_700_000_000_000,
        sequence=sequence,
        stream_id=f"session:{session}" if session else "global",
        scope=scope,
    ).to_builtins()
    if time_ms is None:
        del event["time"]
    else:
        event["time"] = time_ms
    return event


def ids(result_events: Any) -> list[str]:
    """The event ids of replayed entries."""
    return [entry.event_id for entry in result_events]


def assert_gap(result: Any, reason: str, oldest: str, newest: str) -> None:
    """``result`` (a replay) did not find its cursor: a gap of ``reason``, oldest to newest kept."""
    assert result.found is False
    assert result.gap is not None
    assert result.gap.reason == reason
    assert (result.gap.oldest_event_id, result.gap.newest_event_id) == (oldest, newest)


@pytest.fixture
def make_ledger(ledger_backend: LedgerBackend) -> MakeLedger:
    """Open ledgers on each backend in turn; every one is closed (and dropped) afterwards."""

    def make(settings: LedgerSettings = NO_LIMITS, **kwargs: Any) -> RuntimeEventLedger:
        return RuntimeEventLedger(ledger_backend.database(), settings, **kwargs)

    return make


@pytest.fixture
def ledger(make_ledger: MakeLedger) -> RuntimeEventLedger:
    """A ledger without retention limits."""
    return make_ledger()


def test_an_appended_event_is_replayed_with_its_envelope_unchanged(
    ledger: RuntimeEventLedger,
) -> None:
    event = make_event("s1", 1, {"text": "hello", "password": "hunter2"})
    assert ledger.append(event) is True
    result = ledger.replay_after(None)
    assert result.found is True
    assert [entry.envelope() for entry in result.events] == [event]
    assert "hunter2" not in result.events[0].event_json.decode()


def test_extend_stores_a_batch_and_counts_only_new_events(ledger: RuntimeEventLedger) -> None:
    assert ledger.extend([make_event("s1", n) for n in (1, 2, 3)]) == 3
    assert ledger.extend([make_event("s1", n) for n in (2, 3, 4, 4)]) == 1
    assert ids(ledger.replay_after(None).events) == [
        f"evt:session:s1:{n:08d}" for n in (1, 2, 3, 4)
    ]


def test_an_identical_repeat_is_an_idempotent_no_op(ledger: RuntimeEventLedger) -> None:
    ledger.append(make_event("s1", 1))
    assert ledger.append(make_event("s1", 1)) is False
    assert ledger.count() == 1


def test_different_content_under_a_held_id_is_refused_not_dropped(
    ledger: RuntimeEventLedger,
) -> None:
    ledger.append(make_event("s1", 1, {"text": "first"}))
    with pytest.raises(LedgerConflictError, match=r"evt:session:s1:00000001.*different content"):
        ledger.append(make_event("s1", 1, {"text": "second"}))
    assert ledger.replay_after(None).events[0].envelope()["payload"] == {"text": "first"}


def test_a_batch_that_fails_in_the_database_rolls_back_every_row(
    ledger: RuntimeEventLedger,
) -> None:
    ledger.append(make_event("s1", 1))
    clash = make_event("s1", 1, {"text": "same position, other id"})
    clash["id"] = "evt:other-id:00000001"
    with pytest.raises(LedgerConflictError):
        ledger.extend([make_event("s1", 2), make_event("s1", 3), clash])
    assert ids(ledger.replay_after(None).events) == ["evt:session:s1:00000001"]


def test_an_unredacted_envelope_is_refused_naming_paths_but_not_values(
    ledger: RuntimeEventLedger,
) -> None:
    event = make_event("s1", 1)
    event["actor"] = {"api_key": "sk-live-value-that-must-not-leak"}
    with pytest.raises(RedactionError, match=r"evt:session:s1:00000001.*actor\.api_key") as caught:
        ledger.append(event)
    assert "sk-live-value" not in str(caught.value)
    assert ledger.count() == 0


def test_replay_pages_in_global_order_across_streams(ledger: RuntimeEventLedger) -> None:
    ledger.extend([make_event("s1", 1), make_event("s2", 1), make_event("s1", 2)])
    ledger.append(make_event("s2", 2))
    first = ledger.replay_after(None, limit=2)
    assert ids(first.events) == ["evt:session:s1:00000001", "evt:session:s2:00000001"]
    second = ledger.replay_after(first.next_cursor, limit=2)
    assert ids(second.events) == ["evt:session:s1:00000002", "evt:session:s2:00000002"]
    assert ledger.replay_after(second.next_cursor).events == []
    assert ledger.replay_after(second.next_cursor).found is True


def test_filters_match_their_scope_or_unscoped_events(ledger: RuntimeEventLedger) -> None:
    ledger.extend(
        [
            make_event("s1", 1, agent="a"),
            make_event("s2", 1, agent="b"),
            make_event(None, 1, agent=None, directory=None),
            make_event("s1", 2, agent="a", directory="/elsewhere"),
        ]
    )
    by_session = ledger.replay_after(None, session_id="s1")
    assert ids(by_session.events) == [
        "evt:session:s1:00000001",
        "evt:global:00000001",
        "evt:session:s1:00000002",
    ]
    by_agent_and_dir = ledger.replay_after(None, agent_id="b", directory="/srv/work")
    assert ids(by_agent_and_dir.events) == ["evt:session:s2:00000001", "evt:global:00000001"]


def test_every_scope_pages_exactly_the_rows_penguins_filter_selects(
    ledger: RuntimeEventLedger,
) -> None:
    # Scoped pages are read as two index range scans (the session's rows, the
    # unscoped rows) merged by position; the oracle is Penguin's filter applied
    # to the insertion order: each given value matches itself or no value.
    values = {"session": ["s1", "s2", None], "agent": ["a", "b", None], "dir": ["/x", "/y", None]}
    stored: list[tuple[str, str | None, str | None, str | None]] = []
    counters: dict[str | None, int] = {}
    for number in range(60):
        session = values["session"][number % 3]
        agent = values["agent"][number * 7 // 3 % 3]
        directory = values["dir"][number * 5 // 9 % 3]
        counters[session] = counters.get(session, 0) + 1
        event = make_event(session, counters[session], agent=agent, directory=directory)
        ledger.append(event)
        stored.append((event["id"], session, agent, directory))
    for session in values["session"]:
        for agent in values["agent"]:
            for directory in values["dir"]:
                expected = [
                    event_id
                    for event_id, *scope in stored
                    if all(
                        wanted is None or held in (wanted, None)
                        for wanted, held in zip((session, agent, directory), scope, strict=True)
                    )
                ]
                for limit in (1, 4, 0):
                    paged, cursor = [], None
                    while True:
                        page = ledger.replay_after(
                            cursor, limit, session_id=session, agent_id=agent, directory=directory
                        )
                        assert page.found is True
                        paged.extend(ids(page.events))
                        if limit == 0 or not page.events:
                            break
                        cursor = page.next_cursor
                    assert paged == expected, (session, agent, directory, limit)
                bounds = ledger.bounds(session, agent, directory)
                assert bounds == ((expected[0], expected[-1]) if expected else (None, None))


def test_an_unknown_cursor_is_a_gap_followed_by_the_oldest_retained_page(
    ledger: RuntimeEventLedger,
) -> None:
    ledger.extend([make_event("s1", n) for n in (1, 2, 3)])
    result = ledger.replay_after("evt:session:s1:00000099", limit=2)
    assert_gap(result, "unknown_event_id", "evt:session:s1:00000001", "evt:session:s1:00000003")
    assert ids(result.events) == ["evt:session:s1:00000001", "evt:session:s1:00000002"]


def test_count_retention_keeps_the_newest_events(make_ledger: MakeLedger) -> None:
    ledger = make_ledger(NO_LIMITS.model_copy(update={"max_events": 3}))
    ledger.extend([make_event("s1", n) for n in range(1, 8)])
    report = ledger.cleanup()
    assert report.by_count == 4
    assert ids(ledger.replay_after(None).events) == [f"evt:session:s1:{n:08d}" for n in (5, 6, 7)]


def test_age_retention_deletes_by_insertion_time(make_ledger: MakeLedger) -> None:
    clock = FakeClock()
    ledger = make_ledger(NO_LIMITS.model_copy(update={"max_age_days": 1.0}), clock=clock)
    ledger.append(make_event("s1", 1))
    clock.now += 2 * 86_400
    ledger.append(make_event("s1", 2))
    assert ledger.cleanup().by_age == 1
    assert ids(ledger.replay_after(None).events) == ["evt:session:s1:00000002"]


def test_size_retention_prunes_the_oldest_but_never_the_last_event(
    make_ledger: MakeLedger,
) -> None:
    ledger = make_ledger(NO_LIMITS.model_copy(update={"max_bytes": 1}))
    ledger.extend([make_event("s1", n, {"text": "x" * 2000}) for n in range(1, 30)])
    report = ledger.cleanup()
    assert not report.size_skipped
    assert report.by_size == 28
    assert ids(ledger.replay_after(None).events) == ["evt:session:s1:00000029"]


def test_automatic_cleanup_runs_at_most_once_per_interval(make_ledger: MakeLedger) -> None:
    ticks = FakeClock(100.0)
    settings = NO_LIMITS.model_copy(update={"max_events": 1, "cleanup_interval_seconds": 60.0})
    ledger = make_ledger(settings, monotonic=ticks)
    ledger.append(make_event("s1", 1))
    ledger.append(make_event("s1", 2))
    ledger.append(make_event("s1", 3))
    assert ledger.count() == 3  # the first write cleaned (one row), the next two did not clean
    ticks.now += 60
    ledger.append(make_event("s1", 4))
    assert ids(ledger.replay_after(None).events) == ["evt:session:s1:00000004"]


def test_ledger_rows_are_eventsourcing_notifications(ledger: RuntimeEventLedger) -> None:
    event = make_event("s1", 7)
    ledger.append(event)
    (notification,) = ledger.select_notifications(start=None, limit=10)
    assert notification.id == ledger.max_notification_id()
    assert (notification.originator_id, notification.originator_version) == ("session:s1", 7)
    assert notification.topic == "message.updated"
    assert ledger.replay_after(None).events[0].event_json == notification.state
    assert ledger.select_events("session:s1") == [
        StoredEvent("session:s1", 7, "message.updated", notification.state)
    ]


def test_a_batch_gets_each_rows_own_id_while_another_writer_inserts(
    make_ledger: MakeLedger,
) -> None:
    # On PostgreSQL the batch is one INSERT ... SELECT FROM unnest(...) whose ids are
    # matched to rows by order; a concurrent writer takes ids in between.
    ledger, other = make_ledger(), make_ledger()
    stop = threading.Event()

    def write_elsewhere() -> None:
        for version in itertools.count(1):
            if stop.is_set():
                return
            other.insert_events([StoredEvent("session:other", version, "run.started", b"{}")])

    writer = threading.Thread(target=write_elsewhere)
    writer.start()
    try:
        for round_no in range(5):
            batch = [
                StoredEvent(f"session:s{n % 3}", round_no * 100 + n, f"kind.{n % 4}", b"%d" % n)
                for n in range(1, 61)
            ]
            returned = ledger.insert_events(batch)
            assert returned is not None
            assert list(returned) == sorted(returned)
            found = {
                n.id: (n.originator_id, n.originator_version, n.topic, n.state)
                for n in ledger.select_notifications(start=returned[0], limit=10_000)
                if n.id <= returned[-1]
            }
            assert [found[i] for i in returned] == [
                (e.originator_id, e.originator_version, e.topic, e.state) for e in batch
            ]
    finally:
        stop.set()
        writer.join()
    assert other.select_events("session:other")  # the other writer did run


def test_notifications_filtered_by_topics_page_exactly_like_a_filter_in_order(
    ledger: RuntimeEventLedger,
) -> None:
    # Each topic is its own index range scan, merged by position; the oracle is
    # the unfiltered page filtered in Python.
    kinds = ["message.updated", "tool.called", "token.usage.updated", "run.started"]
    events = []
    for number in range(1, 41):
        event = make_event("s1", number)
        event["type"] = kinds[number * 7 % 5 % 4]
        events.append(event)
    ledger.extend(events)
    everything = ledger.select_notifications(None, 1000)
    assert len(everything) == 40
    for topics in (["tool.called"], ["token.usage.updated", "message.updated"], kinds, ["none"]):
        for start, stop, limit, inclusive in [
            (None, None, 1000, True),
            (everything[5].id, None, 7, True),
            (everything[5].id, None, 7, False),
            (everything[3].id, everything[30].id, 4, True),
            (everything[0].id, everything[39].id, 1, False),
        ]:
            expected = [
                n.id
                for n in everything
                if n.topic in topics
                and (start is None or (n.id >= start if inclusive else n.id > start))
                and (stop is None or n.id <= stop)
            ][:limit]
            page = ledger.select_notifications(
                start, limit, stop, topics, inclusive_of_start=inclusive
            )
            assert [n.id for n in page] == expected, (topics, start, stop, limit, inclusive)
            assert all(n.topic in topics for n in page)


def _unpositioned(number: int) -> dict[str, Any]:
    """A foreign envelope with an id but no stream and no sequence (issue #13)."""
    event = make_event(None, 1, {"text": f"foreign {number}"})
    event["id"] = f"evt:foreign:{number}"
    del event["stream_id"], event["sequence"]
    return event


def test_envelopes_without_a_stream_or_sequence_do_not_collide_on_one_key(
    make_ledger: MakeLedger,
) -> None:
    clock = FakeClock()
    ledger = make_ledger(NO_LIMITS.model_copy(update={"max_age_days": 1.0}), clock=clock)
    assert ledger.extend([_unpositioned(1), _unpositioned(2)]) == 2
    assert ledger.append(_unpositioned(3)) is True
    assert ledger.append(_unpositioned(3)) is False  # the same event again: a no-op
    assert ids(ledger.replay_after(None).events) == [f"evt:foreign:{n}" for n in (1, 2, 3)]
    assert ledger.held_sequences("global") == ({1, 2, 3}, 0)
    clock.now += 2 * 86_400
    assert ledger.cleanup().by_age == 3  # all gone; numbering continues past the watermark
    assert ledger.append(_unpositioned(4)) is True
    assert ledger.held_sequences("global") == ({4}, 3)
    # The stored envelope is the one sent, still without a sequence of its own.
    [last] = ledger.replay_after(None).events
    assert "sequence" not in last.envelope()
