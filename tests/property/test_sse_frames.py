"""An SSE frame cut from the stored envelope bytes equals the frame of the decoded envelope.

The reference is what ``event_frame`` did before it reused the bytes: decode
the envelope, take :func:`opencode_payload`, encode that.  Inputs are the
envelopes the trace mapping stores (secrets, odd names, payloads that hold
``sessionID``/``agentID``/``directory`` with falsy or truthy values), foreign
envelopes with other payload shapes, and bytes that are no envelope at all.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.json_codec import JsonDecoder, JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents, opencode_payload
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.ledger import LedgerEntry
from pentrace.service.events.frames import event_frame
from tests.property.test_event_mapping_header import homeless_batches

_encode = JsonEncoder().encode
_decode = JsonDecoder[Any]().decode


def reference(entry: LedgerEntry) -> bytes:
    envelope = _decode(entry.event_json)
    data = _encode(opencode_payload(envelope if isinstance(envelope, dict) else {}))
    return b"id: " + entry.event_id.encode() + b"\ndata: " + data + b"\n\n"


@homeless_batches(6)
def test_frames_of_mapped_envelopes_equal_the_decoded_frames(
    batch: list[tuple[TraceRecord, dict[str, Any]]],
) -> None:
    for position, (record, context) in enumerate(batch, start=1):
        key = SessionKey(context["project"], context["agent"], context["session_id"])
        encoded = SessionEvents(key, context["directory"]).encoded(position, record)
        entry = LedgerEntry(encoded.event.id, encoded.json)
        assert event_frame(entry) == reference(entry)


fills = st.sampled_from(["sessionID", "agentID", "directory", "text"])
payloads: st.SearchStrategy[Any] = st.dictionaries(
    fills, st.sampled_from(["", None, "given", 0, "ö"]), max_size=3
) | (st.sampled_from([[], "text", None, 3, {"nested": {"sessionID": ""}}]))


@settings(max_examples=200, deadline=None)
@given(
    payloads,
    st.dictionaries(
        st.sampled_from(["session_id", "agent_id", "directory"]),
        st.sampled_from(["s1", "", "/srv/\u00e9", None, 7]),
    )
    | st.sampled_from([None, [], "scope"]),
)
def test_frames_of_foreign_envelopes_equal_the_decoded_frames(payload: Any, scope: Any) -> None:
    envelope = {"id": "evt:x:1", "sequence": 1, "time": 5, "type": "t", "scope": scope}
    envelope["payload"] = payload
    entry = LedgerEntry("evt:x:1", _encode(envelope))
    assert event_frame(entry) == reference(entry)


@pytest.mark.parametrize(
    "event_json",
    [b"[]", b"42", b'{"payload": {"a": "\\ud800"}, "scope": {"session_id": "s"}}',
     b'{"payload": {"a": "\\u0041"}, "scope": {"session_id": "s"}}'],
)  # fmt: skip
def test_odd_stored_bytes_give_the_decoded_frame(event_json: bytes) -> None:
    entry = LedgerEntry("e", event_json)
    assert event_frame(entry) == reference(entry)


def test_a_stored_payload_that_is_not_compact_keeps_its_bytes_and_its_meaning() -> None:
    entry = LedgerEntry("e", b'{"id": "e", "payload": { "a": [1, 2] }, "scope": {"agent_id": "x"}}')
    frame = event_frame(entry)
    assert b'"properties":{ "a": [1, 2] ,"agentID":"x"}' in frame
    data = frame.split(b"data: ", 1)[1]
    assert _decode(data) == _decode(reference(entry).split(b"data: ", 1)[1])
