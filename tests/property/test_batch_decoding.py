"""Batch decoding (the resume hot path) reads every line exactly as decode_line does."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.records import MalformedLine, TraceRecord, decode_line, decode_lines
from pentrace.infrastructure.trace.reader import ParseReport, read_records_from_bytes

_text = st.text(max_size=8)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_header_values = st.none() | st.sampled_from(["text", "tool_call", "user", "c1", ""]) | _values
_payloads = (
    st.none()
    | _values
    | st.fixed_dictionaries(
        {},
        optional={
            key: _header_values for key in ("type", "role", "tool_call_id", "status", "stop_reason")
        },
    )
)
# Keys the record's own fields are mapped to, so a line that uses them must not confuse it.
_keys = st.sampled_from(
    ["type", "payload", "origin", "pentrace:raw", "pentrace:line", "pentrace:value"]
)
_envelopes = st.dictionaries(_keys | _text, _values, max_size=3).flatmap(
    lambda extra: st.fixed_dictionaries(
        {"type": st.sampled_from(["event_msg", "model_msg", "session_meta"]) | _values},
        optional={"payload": _payloads, "origin": _values},
    ).map(lambda envelope: {**extra, **envelope})
)


def _encoded(value: Any) -> bytes:
    return msgspec.json.encode(value)


_lines = st.one_of(
    _envelopes.map(_encoded),
    _values.map(_encoded),
    _envelopes.map(lambda v: b" \t" + _encoded(v) + b"\r"),
    _envelopes.map(lambda v: _encoded(v).replace(b'"', b'"\xff', 1)),
    st.sampled_from([b"", b"  ", "\u3000".encode(), b'{"type":"x","a":"\\ud800"}', b'{"a":1e400}']),
)


def _header(record: TraceRecord | None) -> Any:
    if record is None:
        return None
    fields = (record.kind, record.ptype, record.role, record.tool_call_id, record.status)
    return (record.raw, record.line, *fields, record.stop_reason, record.origin, record.value())


@settings(max_examples=120, deadline=None)
@given(st.lists(_lines, max_size=12), st.integers(1, 50))
def test_a_batch_gives_exactly_what_decode_line_gives_line_by_line(
    lines: list[bytes], first: int
) -> None:
    one_by_one = [decode_line(raw, first + offset) for offset, raw in enumerate(lines)]
    batch = decode_lines(lines, first)
    assert batch is not None
    records, blanks = batch
    assert [_header(r) for r in records] == [_header(r) for r in one_by_one if r is not None]
    assert [(r.has_payload, r.has_origin) for r in records] == [
        (r.has_payload, r.has_origin) for r in one_by_one if r is not None
    ]
    assert blanks == one_by_one.count(None)


@settings(max_examples=60, deadline=None)
@given(st.lists(_lines, max_size=8), st.integers(0, 8))
def test_a_malformed_line_anywhere_sends_the_batch_back_line_by_line(
    lines: list[bytes], where: int
) -> None:
    lines.insert(min(where, len(lines)), b'{"type":"event_msg",')
    assert decode_lines(lines, 1) is None


@settings(max_examples=120, deadline=None)
@given(st.lists(_lines, min_size=1, max_size=12), st.data())
def test_a_reader_stopped_after_any_record_reports_exact_counts(
    lines: list[bytes], data: st.DataObject
) -> None:
    numbered = [(n, decode_line(raw, n)) for n, raw in enumerate(lines, 1)]
    wanted = [n for n, record in numbered if record is not None]
    if not wanted:
        return
    stop = data.draw(st.integers(1, len(wanted)), label="records taken")
    report = ParseReport()
    reader = read_records_from_bytes(b"\n".join(lines) + b"\n", report=report)
    assert isinstance(reader, Generator)
    taken = [next(reader) for _ in range(stop)]
    reader.close()
    last = taken[-1].line
    assert last == wanted[stop - 1]
    assert (report.lines, report.records) == (last, stop)
    assert report.blank_lines == sum(1 for n, r in numbered if n <= last and r is None)


def test_a_line_that_is_malformed_on_its_own_stays_malformed_in_a_batch() -> None:
    # Joined with their neighbours these would make one valid array element each.
    lines = [b'{"a":["}', b'{"]},{}']
    with pytest.raises(MalformedLine):
        decode_line(lines[0])
    assert decode_lines(lines, 1) is None


def test_bytes_in_memory_are_read_in_batches_with_exact_lines_across_batch_edges() -> None:
    lines = [b'{"type":"event_msg","payload":{"type":"abort"}}'] * 3000
    lines[1023] = lines[2047] = b'{"type":'  # cut-off records, at the end of the first two batches
    lines[1024] = b" "
    report = ParseReport()
    records = list(read_records_from_bytes(b"\n".join(lines) + b"\n", report=report))
    # The first is followed by a blank line, so no writer healed it; the second is healed.
    assert [bad.line for bad in report.skipped] == [1024]
    assert [bad.line for bad in report.healed] == [2048]
    assert [r.line for r in records] == [n for n in range(1, 3001) if n not in (1024, 1025, 2048)]
    assert (report.lines, report.records, report.blank_lines) == (3000, 2997, 1)
