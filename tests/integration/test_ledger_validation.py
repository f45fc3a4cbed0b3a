"""The ledger refuses privacy blocks Penguin refuses, and still replays rows stored before."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from tests.integration.test_ledger_contract import make_event


def ledger_at(path: Path) -> RuntimeEventLedger:
    return RuntimeEventLedger(LedgerDatabase.for_path(path), LedgerSettings().with_limits_off())


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        (
            {"classification": "public", "redacted": True, "redacted_fields": []},
            r"privacy\.redacted: expected false for classification 'public', found true",
        ),
        (
            {"classification": "public", "redacted_fields": []},
            r"privacy\.redacted: expected false for classification 'public', found nothing",
        ),
        (
            {"classification": "sensitive", "redacted": False, "redacted_fields": []},
            r"privacy\.redacted: expected true for classification 'sensitive', found false",
        ),
        (
            {"classification": "internal", "redacted": False, "redacted_fields": []},
            r"privacy\.classification: expected 'public' or 'sensitive', found 'internal'",
        ),
    ],
)
def test_an_envelope_with_a_privacy_block_penguin_refuses_is_refused_naming_the_field(
    tmp_path: Path, privacy: dict[str, Any], message: str
) -> None:
    ledger = ledger_at(tmp_path / "l.db")
    try:
        event = {**make_event("s1", 1), "privacy": privacy}
        with pytest.raises(LedgerError, match=rf"event evt:session:s1:00000001: .*{message}"):
            ledger.append(event)
        assert ledger.count() == 0
    finally:
        ledger.close()


def test_a_row_stored_before_validation_tightened_still_replays(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    ledger = ledger_at(path)
    try:
        good = make_event("s1", 1)
        ledger.append(good)
        old = {**make_event("s1", 2), "privacy": {"classification": "public", "redacted": True}}
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT INTO runtime_events (event_id, stream_id, sequence, event_type, "
                "category, event_time, inserted_at, session_id, privacy_classification, "
                "redacted, event_json) VALUES (?, 'session:s1', 2, 'message.updated', "
                "'message_lifecycle', 1, 1, 's1', 'public', 1, ?)",
                (old["id"], msgspec.json.encode(old)),
            )
        replay = ledger.replay_after(good["id"])
        assert [entry.envelope() for entry in replay.events] == [old]
    finally:
        ledger.close()
