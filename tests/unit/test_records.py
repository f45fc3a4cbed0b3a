"""Line parsing follows PenguinHarness's reader exactly (docs/trace-format.md)."""

from __future__ import annotations

import pytest

from pentrace.domain.records import MalformedLine, TraceRecord, decode_line


def test_a_completed_request_end_exposes_its_header_fields() -> None:
    record = decode_line(
        b'{"type":"event_msg","payload":{"type":"request_end","status":"completed"}}', 3
    )
    assert record is not None
    assert (record.line, record.kind, record.ptype, record.status) == (
        3,
        "event_msg",
        "request_end",
        "completed",
    )
    assert record.is_event


def test_any_json_value_is_a_record_but_not_an_envelope() -> None:
    record = decode_line(b"42")
    assert record is not None
    assert record.kind is None
    assert record.value() == 42


def test_a_payload_that_is_not_an_object_is_tolerated() -> None:
    record = decode_line(b'{"type":"model_msg","payload":5}')
    assert record is not None
    assert (record.kind, record.has_payload, record.ptype) == ("model_msg", False, None)


def test_bom_and_unicode_whitespace_are_trimmed_like_javascript() -> None:
    record = decode_line("\ufeff\u3000{}\u00a0 ".encode())
    assert record is not None
    assert record.raw == b"{}"


def test_next_line_and_unit_separators_are_not_whitespace() -> None:
    with pytest.raises(MalformedLine):
        decode_line("\u0085{}".encode())
    with pytest.raises(MalformedLine):
        decode_line(b"\x1f{}")


def test_blank_lines_are_not_records() -> None:
    assert decode_line(b" \t\r") is None


@pytest.mark.parametrize("text", [b"NaN", b"[Infinity]", b'{"a":-Infinity}', b"{", b"nul"])
def test_non_strict_json_is_malformed(text: bytes) -> None:
    with pytest.raises(MalformedLine):
        decode_line(text)


def test_lone_surrogate_escapes_are_accepted_and_kept() -> None:
    record = decode_line(b'{"type":"model_msg","payload":{"type":"text","text":"\\ud800"}}')
    assert record is not None
    assert record.payload()["text"] == "\ud800"
    assert record.ptype == "text"


def test_invalid_utf8_becomes_replacement_characters() -> None:
    record = decode_line(b'{"a":"\xff"}')
    assert record is not None
    assert record.value() == {"a": "\ufffd"}
    assert record.raw == '{"a":"\ufffd"}'.encode()


def test_big_integers_keep_their_precision() -> None:
    record = decode_line(b'{"n":123456789012345678901234567890,"f":10.0}')
    assert record is not None
    assert record.value() == {"n": 123456789012345678901234567890, "f": 10.0}
    assert isinstance(record.value()["f"], float)


def test_from_value_round_trips() -> None:
    record = TraceRecord.from_value({"type": "event_msg", "payload": {"type": "abort"}})
    assert record.ptype == "abort"
    assert record.value() == {"type": "event_msg", "payload": {"type": "abort"}}
