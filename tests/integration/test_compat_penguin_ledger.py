"""``pentrace.compat.penguin.RuntimeEventLedger``: Penguin's class over a real pentrace ledger.

Modelled on what Penguin's own ledger tests check (append and replay, dedupe,
scoped filters, count retention, one transaction per call), plus the places
where it deliberately does better (W1, W4, W5, W6).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pentrace.compat.penguin import (
    ReplayResult,
    RuntimeEventLedger,
    RuntimeEventLedgerPolicy,
    build_runtime_event,
    get_runtime_event_ledger,
    policy_from_env,
    record_opencode_event,
    reset_runtime_event_sequences,
)
from pentrace.errors import LedgerFormatError
from pentrace.infrastructure.ledger import LedgerDatabase
from pentrace.infrastructure.ledger import RuntimeEventLedger as PentraceLedger


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    reset_runtime_event_sequences()
    yield
    reset_runtime_event_sequences()


def open_ledger(path: Path, **limits: Any) -> RuntimeEventLedger:
    policy = RuntimeEventLedgerPolicy(
        max_events=limits.get("max_events", 100),
        max_age_seconds=limits.get("max_age_seconds"),
        max_bytes=limits.get("max_bytes"),
        cleanup_interval_seconds=limits.get("interval", 0),
    )
    return RuntimeEventLedger(path / "runtime_events.db", policy=policy)


def message(session: str, index: int, **extra: Any) -> dict[str, Any]:
    return build_runtime_event(
        event_type="message.updated",
        payload={"id": f"msg_{index}", "sessionID": session, **extra},
        sequence=index,
        time_ms=1_000 + index,
    )


def test_appended_events_replay_after_a_cursor_with_penguins_result_type(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path)
    first, second = message("s1", 1), message("s1", 2)
    assert ledger.append(first) is True
    assert ledger.append(second) is True
    replay = ledger.replay_after(first["id"])
    assert replay == ReplayResult(True, [second], first["id"], second["id"])
    assert ledger.contains(second["id"])
    assert not ledger.contains("evt:none:1")
    assert ledger.bounds() == {"oldest_event_id": first["id"], "newest_event_id": second["id"]}
    assert ledger.newest(limit=1) == [second]


def test_the_same_event_twice_is_stored_once(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path)
    event = message("s1", 1)
    assert ledger.append(event) is True
    assert ledger.append(event) is False
    assert ledger.extend([event, event, message("s1", 2)]) == 1


def test_replay_filters_keep_the_scope_and_the_unscoped_rows(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path)
    events = [
        build_runtime_event(
            event_type="message.updated",
            payload={"id": f"m{n}"},
            scope={"session_id": "s1", "agent_id": agent},
            sequence=n,
            time_ms=1,
        )
        for n, agent in enumerate(["a", "b", "a"], start=1)
    ]
    unscoped = build_runtime_event(event_type="lsp.updated", payload={}, sequence=1, time_ms=1)
    assert ledger.extend([*events, unscoped]) == 4
    replay = ledger.replay_after(events[0]["id"], session_id="s1", agent_id="a")
    assert [event["id"] for event in replay.events] == [events[2]["id"], unscoped["id"]]
    assert ledger.replay_after(events[0]["id"], limit=1, agent_id="a").events == [events[2]]


def test_count_retention_keeps_the_newest_and_a_lost_cursor_is_a_gap_with_a_reason(
    tmp_path: Path,
) -> None:
    ledger = open_ledger(tmp_path, max_events=2)
    events = [message("s1", n) for n in (1, 2, 3)]
    assert ledger.extend(events) == 3
    assert ledger.newest(limit=10) == events[1:]
    gap = ledger.replay_after(events[0]["id"])
    assert gap == ReplayResult(False, [], events[1]["id"], events[2]["id"], "evicted")
    assert ledger.replay_after("evt:never:1").reason == "unknown_event_id"
    assert ledger.replay_after("").found is False


def test_a_failing_cleanup_hook_rolls_back_the_whole_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = open_ledger(tmp_path)

    def fail(*, conn: object | None = None) -> None:
        raise RuntimeError("cleanup failed")

    monkeypatch.setattr(ledger, "cleanup_if_due", fail)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        ledger.extend([message("s1", 1), message("s1", 2)])
    assert ledger.newest() == []


def test_invalid_or_unredacted_envelopes_are_refused_with_a_logged_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = open_ledger(tmp_path)
    leaked = message("s1", 1)
    leaked["payload"]["api_key"] = "k-live-1"
    bad_privacy = {**message("s1", 2), "privacy": {"classification": "internal"}}
    with caplog.at_level(logging.WARNING, logger="pentrace.compat.penguin.ledger"):
        assert ledger.append(leaked) is False
        assert ledger.append(bad_privacy) is False
        assert ledger.append({"type": "x"}) is False
    assert ledger.newest() == []
    assert "payload.api_key" in caplog.text
    assert "privacy.classification" in caplog.text
    assert "k-live-1" not in caplog.text


def test_an_id_held_with_other_content_is_skipped_loudly_and_the_batch_still_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = open_ledger(tmp_path)
    assert ledger.append(message("s1", 1))
    other = message("s1", 1, role="changed")
    with caplog.at_level(logging.WARNING, logger="pentrace.compat.penguin.ledger"):
        assert ledger.extend([other, message("s1", 2)]) == 1
    assert "evt:session:s1:00000001" in caplog.text
    assert [event["id"] for event in ledger.newest()] == [
        "evt:session:s1:00000001",
        "evt:session:s1:00000002",
    ]


def test_w1_a_restarted_process_continues_after_the_ledgers_sequences(tmp_path: Path) -> None:
    first = open_ledger(tmp_path)
    for _ in range(3):
        event = build_runtime_event(event_type="x.y", payload={"sessionID": "s1"}, time_ms=1)
        assert first.append(event)
    first.close()
    reset_runtime_event_sequences()  # a new process
    again = open_ledger(tmp_path)
    assert again.contains("evt:session:s1:00000003")  # opening raised the counters
    event = build_runtime_event(event_type="x.y", payload={"sessionID": "s1"}, time_ms=1)
    assert event["id"] == "evt:session:s1:00000004"
    assert again.append(event) is True


def test_w4_age_is_measured_on_the_ledgers_clock_not_the_producers(tmp_path: Path) -> None:
    ledger = open_ledger(tmp_path, max_age_seconds=60)
    stale = message("s1", 1)
    stale["time"] = int((time.time() - 120) * 1000)
    assert ledger.append(stale) is True
    assert ledger.contains(stale["id"])


def test_w5_penguins_environment_policy_with_max_events_zero_does_not_wipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS", "0")
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_AGE_DAYS", "off")
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_CLEANUP_INTERVAL_SECONDS", "-1")
    policy = policy_from_env()
    assert (policy.max_events, policy.max_age_seconds) == (0, None)
    assert math.isinf(policy.cleanup_interval_seconds)
    ledger = RuntimeEventLedger(tmp_path / "l.db", policy=policy)
    assert ledger.append(message("s1", 1))
    ledger.cleanup()
    assert len(ledger.newest()) == 1


def test_the_file_is_a_pentrace_ledger_and_record_opencode_event_stamps_the_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_PATH", str(tmp_path / "rt.db"))

    class Core:
        pass

    core = Core()
    data: dict[str, Any] = {"type": "question.asked", "properties": {"id": "q1", "sessionID": "s9"}}
    envelope = record_opencode_event(core, data)
    assert envelope is not None
    assert data["id"] == envelope["id"] == "evt:session:s9:00000001"
    assert data["runtime_event"] is envelope
    assert get_runtime_event_ledger(core).contains(envelope["id"])
    get_runtime_event_ledger(core).close()
    reader = PentraceLedger(LedgerDatabase.for_path(tmp_path / "rt.db", read_only=True))
    try:
        assert reader.db.format == "pentrace"
        assert [entry.envelope() for entry in reader.newest()] == [envelope]
    finally:
        reader.close()


def test_pointed_at_a_file_penguin_wrote_it_replays_it_and_refuses_writes_naming_the_import(
    tmp_path: Path,
) -> None:
    penguin_file = tmp_path / "runtime_events.db"
    shutil.copyfile(
        Path(__file__).parent.parent / "fixtures/penguin/penguin_ledger.db", penguin_file
    )
    before = penguin_file.read_bytes()
    ledger = RuntimeEventLedger(penguin_file)
    replay = ledger.replay_after("evt:session:ses_b:00000004", session_id="ses_b")
    assert [event["id"] for event in replay.events] == [
        "evt:session:ses_b:00000005",
        "evt:global:00000001",
        "evt:global:00000002",
    ]
    assert ledger.bounds()["newest_event_id"] == "evt:global:00000002"
    with pytest.raises(LedgerFormatError, match="Penguin-format ledger") as raised:
        ledger.append(message("s1", 1))
    assert raised.value.hint is not None
    assert "pentrace ledger import-penguin" in raised.value.hint
    ledger.close()
    assert penguin_file.read_bytes() == before


def test_a_second_id_at_a_held_stream_position_is_skipped_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = open_ledger(tmp_path)
    first = message("s1", 3)
    second = build_runtime_event(
        event_type="message.updated",
        payload={"sessionID": "s1"},
        event_id="evt:prebuilt:1",
        sequence=3,
        time_ms=1,
    )
    assert ledger.append(first)
    with caplog.at_level(logging.WARNING, logger="pentrace.compat.penguin.ledger"):
        assert ledger.append(second) is False
    assert "runtime event not stored" in caplog.text
    assert [event["id"] for event in ledger.newest()] == [first["id"]]
