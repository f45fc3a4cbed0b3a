"""One test per confirmed Penguin weakness on the envelope side, showing pentrace does not have it.

W1 restarted counters, W2 slug collisions, W7 unredacted envelope fields, W11
inconsistent directory scope, W12 redaction misses; and the domain side of W3
(an event's time is the record's own timestamp, never 0 for a readable one).
W4-W6, W8-W10 and W13 are ledger and SSE behaviour, tested there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.compat.penguin import build_runtime_event, reset_runtime_event_sequences
from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction import is_redacted
from pentrace.domain.runtime import runtime_event_from_record

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    reset_runtime_event_sequences()
    yield
    reset_runtime_event_sequences()


def _trace(count: int) -> list[TraceRecord]:
    return [
        TraceRecord.from_value(
            {
                "timestamp": f"2026-07-18T03:10:{index:02d}.000Z",
                "type": "model_msg",
                "payload": {"type": "text", "role": "assistant", "text": f"message {index}"},
            }
        )
        for index in range(1, count + 1)
    ]


def _ids(records: list[TraceRecord], first_position: int = 1) -> list[str]:
    return [
        runtime_event_from_record(
            record, session_id="ses_1", position=position, project="p", agent="a", directory=None
        ).id
        for position, record in enumerate(records, start=first_position)
    ]


def test_w1_ids_survive_a_restart_because_they_come_from_trace_positions() -> None:
    records = _trace(5)
    before_restart = _ids(records[:3])
    # A restarted process knows nothing; it reads the trace and continues from it.
    after_restart = _ids(records)
    assert after_restart[:3] == before_restart
    assert after_restart[3:] == ["evt:session:p/a/ses_1:00000004", "evt:session:p/a/ses_1:00000005"]
    assert len(set(after_restart)) == 5


def test_w1_compat_counters_continue_after_the_ledgers_high_water_mark() -> None:
    first = [
        build_runtime_event(event_type="message.updated", payload={"sessionID": "ses_1"})
        for _ in range(3)
    ]
    assert [event["sequence"] for event in first] == [1, 2, 3]
    reset_runtime_event_sequences(high_water={"session:ses_1": 3})
    later = [
        build_runtime_event(event_type="message.updated", payload={"sessionID": "ses_1"})
        for _ in range(2)
    ]
    assert [event["id"] for event in later] == [
        "evt:session:ses_1:00000004",
        "evt:session:ses_1:00000005",
    ]


@pytest.mark.parametrize(
    "colliding",
    [
        ["a b", "a/b", "a  b", "a-b"],
        ["séance", "sèance", "s-ance"],
        ["会话一", "会话二", "", "!!!"],
        ["-x-", "x", "--x"],
    ],
)
def test_w2_different_session_ids_never_share_an_event_id(colliding: list[str]) -> None:
    ids = {
        build_runtime_event(
            event_type="message.updated", payload={"sessionID": sid} if sid else {}, sequence=1
        )["id"]
        for sid in colliding
    }
    assert len(ids) == len(colliding)
    assert "evt:session::00000001" not in ids


def test_w2_a_punctuation_only_stream_is_not_the_global_stream() -> None:
    punctuation = build_runtime_event(event_type="x", payload={}, stream_id="!!!", sequence=1)
    global_one = build_runtime_event(event_type="x", payload={}, sequence=1)
    assert global_one["id"] == "evt:global:00000001"
    assert punctuation["id"] != global_one["id"]


def test_w2_long_ids_that_differ_only_after_48_characters_stay_apart() -> None:
    prefix = "p" * 60
    ids = {
        build_runtime_event(event_type="x", payload={}, stream_id=prefix + tail, sequence=1)["id"]
        for tail in "ab"
    }
    assert len(ids) == 2


def test_w2_an_explicit_sequence_is_never_repeated_by_a_later_automatic_one() -> None:
    explicit = build_runtime_event(event_type="x", payload={"sessionID": "s"}, sequence=2)
    automatic = [build_runtime_event(event_type="x", payload={"sessionID": "s"}) for _ in range(2)]
    assert [event["sequence"] for event in automatic] == [3, 4]
    assert explicit["id"] not in {event["id"] for event in automatic}


def test_w7_actor_correlation_scope_projections_and_subject_are_redacted() -> None:
    event = build_runtime_event(
        event_type="message.updated",
        payload={"sessionID": "s1"},
        actor={"type": "user", "token": "actor-secret-1"},
        correlation={"request_id": "r1", "api_key": "corr-secret-2"},
        scope={"tenant": "acme", "password": "scope-secret-3"},
        projections={"opencode": {"id": "x", "auth_token": "proj-secret-4"}},
        subject="Authorization: Bearer subj-secret-5abc",
        source="worker password=src-secret-6",
        time_ms=1,
    )
    encoded = msgspec.json.encode(event).decode()
    for secret in (
        "actor-secret-1",
        "corr-secret-2",
        "scope-secret-3",
        "proj-secret-4",
        "subj-secret-5abc",
    ):
        assert secret not in encoded
    assert event["privacy"] == {
        "classification": "sensitive",
        "redacted": True,
        "redacted_fields": [
            "@source",
            "@subject",
            "@scope.password",
            "@correlation.api_key",
            "@actor.token",
            "@projections.opencode.auth_token",
        ],
    }
    # The ledger's whole-envelope check accepts it instead of silently dropping it.
    assert is_redacted(event)


def test_w11_explicit_and_payload_directories_normalise_the_same_way() -> None:
    explicit = build_runtime_event(
        event_type="x", payload={}, scope={"directory": "/srv/pentrace/one/"}, sequence=1, time_ms=1
    )
    derived = build_runtime_event(
        event_type="x", payload={"directory": "/srv/pentrace/one/"}, sequence=1, time_ms=1
    )
    assert explicit["scope"]["directory"] == derived["scope"]["directory"] == "/srv/pentrace/one"
    assert explicit["stream_id"] == derived["stream_id"]


def test_w11_an_explicit_directory_leaves_no_stale_workspace() -> None:
    event = build_runtime_event(
        event_type="x",
        payload={"directory": "/srv/old"},
        scope={"directory": "/srv/new/"},
        time_ms=1,
    )
    assert event["scope"]["directory"] == event["scope"]["workspace"] == "/srv/new"


@pytest.mark.parametrize(
    "case", CORPUS["positives"], ids=[case["id"] for case in CORPUS["positives"]]
)
def test_w12_no_corpus_secret_reaches_an_envelope(case: dict[str, Any]) -> None:
    payload = case["input"] if isinstance(case["input"], dict) else {"text": case["input"]}
    event = build_runtime_event(
        event_type="message.updated", payload={"sessionID": "s1", **payload}, time_ms=1
    )
    encoded = msgspec.json.encode(event).decode()
    for secret in case["secrets"]:
        assert secret not in encoded
    assert event["privacy"]["classification"] == "sensitive"
    assert is_redacted(event)


def test_w3_an_events_time_is_its_records_timestamp_never_zero() -> None:
    record = _trace(1)[0]
    event = runtime_event_from_record(
        record, session_id="s", position=1, project="p", agent="a", directory=None
    )
    assert event.time == 1784344201000
