"""The one path's screened envelopes are the fully redacted ones, byte for byte.

:meth:`SessionEvents.encoded` keeps the unredacted candidate when the screen
clears its bytes.  The reference is the full redaction path
(``runtime_event_from_record``), encoded as the ledger encoded envelopes
before (``JsonEncoder`` over builtins), and the ledger row of
:func:`envelope_row` with every check: the bytes, the columns and the verdict
(stored or refused) must agree, whatever the record, session or directory
holds (secrets included).
"""

from __future__ import annotations

from typing import Any

import pytest

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents, runtime_event_from_record
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, encoded_values, envelope_row
from tests.property.test_event_mapping_header import SECRETS, homeless_batches

_encode = JsonEncoder().encode
_NOW = 1_790_000_000_000


def _row_or_error(build: Any) -> tuple[Any, ...] | str:
    try:
        return tuple(build())
    except LedgerError as error:  # RedactionError included
        return f"{type(error).__name__}: {error.message}"


def _agree(record: TraceRecord, position: int, context: dict[str, Any]) -> bool:
    key = SessionKey(context["project"], context["agent"], context["session_id"])
    encoded = SessionEvents(key, context["directory"]).encoded(position, record)
    full = runtime_event_from_record(
        record,
        session_id=key.session_id,
        position=position,
        project=key.project,
        agent=key.agent,
        directory=context["directory"],
    )
    assert encoded.json == _encode(full.to_builtins())
    assert encoded.event == full
    reference = envelope_row(full.to_builtins(), _NOW)
    ours = _row_or_error(lambda: encoded_values(encoded, _NOW))
    assert ours == tuple(reference[column] for column in ROW_COLUMNS)
    return encoded.screened


@homeless_batches(8)
def test_a_screened_candidate_is_the_fully_redacted_envelope_and_row(
    batch: list[tuple[TraceRecord, dict[str, Any]]],
) -> None:
    for position, (record, context) in enumerate(batch, start=1):
        _agree(record, position, context)


def _record(payload: dict[str, Any], kind: str = "model_msg") -> TraceRecord:
    return TraceRecord.from_value(
        {"timestamp": "2026-07-18T03:10:22.531Z", "type": kind, "payload": payload}
    )


CONTEXT: dict[str, Any] = {"project": "acme", "agent": "coder", "session_id": "s1"}


def test_a_clean_record_takes_the_screened_path() -> None:
    record = _record({"type": "text", "role": "assistant", "text": "deploy the app"})
    assert _agree(record, 2, {**CONTEXT, "directory": "/srv/app"})


@pytest.mark.parametrize("secret", SECRETS[:5])
def test_a_record_holding_a_secret_takes_the_full_path_and_is_redacted(secret: str) -> None:
    record = _record({"type": "tool_call_output", "tool_call_id": "c1", "output": secret})
    assert not _agree(record, 3, {**CONTEXT, "directory": None})
    key = SessionKey(CONTEXT["project"], CONTEXT["agent"], CONTEXT["session_id"])
    encoded = SessionEvents(key, None).encoded(3, record)
    assert secret.encode() not in encoded.json
    assert encoded.event.privacy.redacted


def test_a_secret_in_the_session_identity_takes_the_full_path() -> None:
    record = _record({"type": "text", "role": "assistant", "text": "hello"})
    assert not _agree(record, 2, {**CONTEXT, "directory": SECRETS[1]})


def test_lone_surrogates_are_encoded_as_escapes_on_both_paths() -> None:
    record = _record({"type": "text", "role": "assistant", "text": "bad \ud800 text"})
    _agree(record, 2, {**CONTEXT, "directory": "/srv/\udcff"})


def test_the_directory_comes_from_the_first_record_unless_given() -> None:
    key = SessionKey("acme", "coder", "s1")
    meta = _record({"workspace": "/srv/app", "provider": "openai"}, kind="session_meta")
    text = _record({"type": "text", "role": "assistant", "text": "hi"})
    learned = SessionEvents(key)
    learned.encoded(1, meta)
    assert learned.encoded(2, text).event.scope["directory"] == "/srv/app"
    given_none = SessionEvents(key, None)
    given_none.encoded(1, meta)
    assert "directory" not in given_none.encoded(2, text).event.scope
