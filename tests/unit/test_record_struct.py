"""TraceRecord as a msgspec Struct: untracked by the cycle collector, identity semantics."""

from __future__ import annotations

import gc
import pickle

from pentrace.domain.records import NO_PAYLOAD, TraceRecord, decode_line, decode_lines
from pentrace.projections.synthetic import SyntheticRecord, placeholder_for

CALL = b'{"type":"model_msg","payload":{"type":"tool_call","tool_call_id":"c1","role":"assistant"}}'


def test_records_and_their_headers_are_not_tracked_by_the_cycle_collector() -> None:
    batch = decode_lines([CALL, b'{"type":"event_msg","payload":{"type":"abort"}}'], 1)
    assert batch is not None
    records = [*batch[0], TraceRecord(CALL), TraceRecord.from_value([1, {"a": 2}])]
    assert not any(gc.is_tracked(r) or gc.is_tracked(r.head) for r in records)


def test_a_placeholder_is_a_synthetic_record_that_is_not_tracked_either() -> None:
    call = TraceRecord(CALL, 4)
    placeholder = placeholder_for(call)
    assert isinstance(placeholder, SyntheticRecord)
    assert (placeholder.ptype, placeholder.tool_call_id) == ("tool_call_output", "c1")
    assert not gc.is_tracked(placeholder)


def test_records_compare_and_hash_by_identity_like_plain_objects() -> None:
    first, second = TraceRecord(CALL, 1), TraceRecord(CALL, 1)
    assert first != second
    assert first == first  # identity equality is the point
    assert len({first, second, first}) == 2


def test_a_record_without_a_payload_object_shares_the_empty_head() -> None:
    for raw in (b'{"type":"event_msg"}', b'{"type":"event_msg","payload":null}', b"[1]"):
        record = decode_line(raw)
        assert record is not None
        assert record.head is NO_PAYLOAD
        assert (record.has_payload, record.ptype) == (False, None)
    empty = decode_line(b'{"type":"event_msg","payload":{}}')
    assert empty is not None
    assert empty.has_payload


def test_a_line_using_the_records_private_keys_is_read_as_written() -> None:
    raw = b'{"pentrace:value":7,"pentrace:raw":"x","pentrace:line":"y","type":"event_msg"}'
    record = decode_line(raw, 9)
    assert record is not None
    assert (record.raw, record.line, record.kind) == (raw, 9, "event_msg")
    assert record.value() == {
        "pentrace:value": 7,
        "pentrace:raw": "x",
        "pentrace:line": "y",
        "type": "event_msg",
    }


def test_a_record_survives_pickling_with_its_line_number() -> None:
    record = TraceRecord(CALL, 12)
    copy = pickle.loads(pickle.dumps(record))  # noqa: S301  # our own bytes, in memory
    assert (type(copy), copy.raw, copy.line, copy.tool_call_id) == (TraceRecord, CALL, 12, "c1")
