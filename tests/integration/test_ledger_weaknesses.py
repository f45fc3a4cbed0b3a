"""Penguin's confirmed ledger weaknesses (W3-W6, W13), each shown beaten on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from tests.integration.test_ledger_contract import (
    NO_LIMITS,
    FakeClock,
    assert_gap,
    ids,
    make_event,
)

NOW_S = 1_800_000_000.0


class Ticker:
    """A monotonic clock that jumps an hour per reading, so every write is due for cleanup."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 3600.0
        return self.now


def open_ledger(path: Path, settings: LedgerSettings) -> RuntimeEventLedger:
    return RuntimeEventLedger(
        LedgerDatabase.for_path(path), settings, clock=FakeClock(NOW_S), monotonic=Ticker()
    )


def minute_retention() -> LedgerSettings:
    return NO_LIMITS.model_copy(
        update={"max_age_days": 60 / 86_400, "cleanup_interval_seconds": 60.0}
    )


@pytest.mark.parametrize("time_value", [0, None, "1700000000000", 1.7e12])
def test_w3_an_event_with_time_zero_or_invalid_survives_the_write_that_stores_it(
    tmp_path: Path, time_value: object
) -> None:
    ledger = open_ledger(tmp_path / "events.db", minute_retention())
    event = make_event("s1", 1, time_ms=time_value)
    assert ledger.append(event) is True
    assert ledger.contains("evt:session:s1:00000001")
    assert ledger.replay_after(None).events[0].envelope() == event


def test_w4_a_producer_clock_two_minutes_behind_does_not_get_an_event_deleted(
    tmp_path: Path,
) -> None:
    ledger = open_ledger(tmp_path / "events.db", minute_retention())
    ledger.append(make_event("s1", 1, time_ms=int(NOW_S * 1000) - 120_000))
    ledger.append(make_event("s1", 2, time_ms=int(NOW_S * 1000) - 120_000))
    result = ledger.replay_after("evt:session:s1:00000001")
    assert result.found is True
    assert ids(result.events) == ["evt:session:s1:00000002"]


def test_w5_max_events_zero_from_the_environment_keeps_every_event(tmp_path: Path) -> None:
    settings = LedgerSettings.from_env(
        {
            "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": "0",
            "PENGUIN_RUNTIME_EVENT_LEDGER_CLEANUP_INTERVAL_SECONDS": "1",
        }
    )
    ledger = open_ledger(tmp_path / "events.db", settings)
    for sequence in range(1, 6):
        assert ledger.append(make_event("s1", sequence)) is True
    assert ledger.count() == 5


def test_w6_gap_bounds_are_scoped_and_evicted_differs_from_never_existed(
    tmp_path: Path,
) -> None:
    ledger = open_ledger(tmp_path / "events.db", NO_LIMITS.model_copy(update={"max_events": 4}))
    ledger.extend([make_event("s1", n) for n in (1, 2, 3)])
    ledger.extend([make_event("s2", n) for n in (1, 2, 3)])
    ledger.cleanup()  # keeps s1:3 and s2:1..3

    evicted = ledger.replay_after("evt:session:s1:00000001", session_id="s1")
    assert_gap(evicted, "evicted", "evt:session:s1:00000003", "evt:session:s1:00000003")
    assert ids(evicted.events) == ["evt:session:s1:00000003"]

    never = ledger.replay_after("evt:session:s1:00000042", session_id="s1")
    assert never.gap is not None
    assert never.gap.reason == "unknown_event_id"
    assert ids(never.events) == ["evt:session:s1:00000003"]


def test_w13_a_deleted_database_file_is_detected_and_recreated(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    ledger = open_ledger(path, NO_LIMITS)
    ledger.extend([make_event("s1", 1), make_event("s1", 2)])
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)

    assert ledger.append(make_event("s1", 3)) is True
    assert path.exists()
    assert ledger.count() == 1
    assert ids(ledger.newest(10)) == ["evt:session:s1:00000003"]
    reopened = open_ledger(path, NO_LIMITS)
    assert reopened.contains("evt:session:s1:00000003")
