"""The in-process live fan-out: every subscriber gets every entry, slow ones drop and count."""

from __future__ import annotations

import queue
import threading

import pytest

from pentrace.infrastructure.ledger.live.hook import LiveFanout
from pentrace.infrastructure.ledger.replay import LedgerEntry


def entry(number: int) -> LedgerEntry:
    return LedgerEntry(f"evt:session:s1:{number:08d}", b"{}")


def test_every_subscriber_receives_every_entry_in_order() -> None:
    fanout = LiveFanout()
    first, second = fanout.subscribe_live(), fanout.subscribe_live()
    fanout.publish([entry(1), entry(2)])
    for subscription in (first, second):
        assert [subscription.get_nowait().event_id for _ in range(2)] == [
            "evt:session:s1:00000001",
            "evt:session:s1:00000002",
        ]


def test_a_full_queue_drops_new_entries_and_counts_them() -> None:
    fanout = LiveFanout()
    slow = fanout.subscribe_live(maxsize=2)
    fanout.publish([entry(n) for n in range(1, 6)])
    assert slow.dropped == 3
    assert slow.get_nowait().event_id.endswith("00000001")


def test_a_closed_subscription_receives_nothing_more() -> None:
    fanout = LiveFanout()
    with fanout.subscribe_live() as subscription:
        fanout.publish([entry(1)])
    fanout.publish([entry(2)])
    assert subscription.get_nowait().event_id.endswith("00000001")
    with pytest.raises(queue.Empty):
        subscription.get_nowait()


def test_publishing_from_many_threads_loses_nothing() -> None:
    fanout = LiveFanout()
    subscription = fanout.subscribe_live(maxsize=10_000)
    threads = [
        threading.Thread(target=fanout.publish, args=([entry(t * 100 + n) for n in range(100)],))
        for t in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    received = {subscription.get_nowait().event_id for _ in range(800)}
    assert len(received) == 800
    assert subscription.dropped == 0
