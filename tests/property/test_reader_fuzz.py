"""Fuzzing the trace reader: garbage never crashes it, valid records always come back whole."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.errors import TraceFormatError
from pentrace.infrastructure.trace.reader import ParseReport, read_records_from_bytes, read_shard

# JSON text without lone surrogates, so that it can be written as UTF-8 either escaped or raw.
_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
envelopes = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["event_msg", "model_msg", "session_meta", "other"]),
        "payload": st.dictionaries(_text, json_values, max_size=4),
    }
)
# A NUL byte is neither whitespace nor JSON, so a line that starts with one never parses.
garbage_lines = st.binary(max_size=40).map(lambda b: b"\x00" + b.replace(b"\n", b""))
blank_lines = st.sampled_from([b"", b" ", b"\t\r", "\u3000\ufeff".encode()])


def _read(data: bytes, *, strict: bool) -> tuple[list[tuple[int, bytes]], ParseReport]:
    report = ParseReport()
    records = [(r.line, r.raw) for r in read_records_from_bytes(data, strict=strict, report=report)]
    return records, report


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_crash_the_tolerant_reader(data: bytes) -> None:
    records, report = _read(data, strict=False)
    assert report.records == len(records)
    assert len(report.torn_tails) <= 1
    assert report.lines >= report.records + report.blank_lines + report.skipped_count


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_strict_mode_raises_a_format_error_at_the_first_skipped_line(data: bytes) -> None:
    tolerant, report = _read(data, strict=False)
    if report.skipped:
        with pytest.raises(TraceFormatError) as info:
            _read(data, strict=True)
        assert info.value.line == report.skipped[0].line
    else:
        assert _read(data, strict=True)[0] == tolerant


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"\\", b"\n", b"\r", b"1", b":", b","]),
        max_size=3000,
    )
)
def test_bracket_soup_never_crashes_the_reader(tokens: list[bytes]) -> None:
    records, report = _read(b"".join(tokens), strict=False)
    assert report.records == len(records)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 17))
def test_any_chunk_size_reads_a_file_exactly_like_memory(data: bytes, chunk_size: int) -> None:
    expected, expected_report = _read(data, strict=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s_001.jsonl"
        path.write_bytes(data)
        report = ParseReport()
        got = [(r.line, r.raw) for r in read_shard(path, report=report, chunk_size=chunk_size)]
    assert got == expected
    assert [(b.line, b.reason) for b in report.skipped] == [
        (b.line, b.reason) for b in expected_report.skipped
    ]
    assert [b.line for b in report.torn_tails] == [b.line for b in expected_report.torn_tails]


Line = tuple[str, Any]  # ("record", value) | ("garbage", bytes) | ("blank", bytes)

lines = st.lists(
    st.one_of(
        st.tuples(st.just("record"), envelopes | json_values),
        st.tuples(st.just("garbage"), garbage_lines),
        st.tuples(st.just("blank"), blank_lines),
    ),
    max_size=25,
)


def _encode(value: Any, raw_unicode: bool) -> bytes:
    return json.dumps(value, ensure_ascii=not raw_unicode).encode()


@settings(max_examples=120, deadline=None)
@given(lines, st.booleans(), st.booleans(), st.sampled_from([b"\n", b"\r\n"]))
def test_valid_records_come_back_exactly_amid_garbage_and_blank_lines(
    content: list[Line], raw_unicode: bool, final_newline: bool, newline: bytes
) -> None:
    encoded = [_encode(item, raw_unicode) if kind == "record" else item for kind, item in content]
    data = newline.join(encoded) + (newline if final_newline and encoded else b"")
    records = list(read_records_from_bytes(data, report=(report := ParseReport())))

    numbered = [(n, kind, item) for n, (kind, item) in enumerate(content, start=1)]
    expected = [(n, item) for n, kind, item in numbered if kind == "record"]
    assert [(r.line, r.value()) for r in records] == expected

    bad = [n for n, kind, _ in numbered if kind == "garbage"]
    last_content = max((n for n, kind, _ in numbered if kind != "blank"), default=0)
    torn = [n for n in bad if n == last_content]
    assert [b.line for b in report.skipped] == [n for n in bad if n not in torn]
    assert [b.line for b in report.torn_tails] == torn


@settings(max_examples=40, deadline=None)
@given(st.lists(envelopes, max_size=8), st.booleans())
def test_strict_mode_reads_valid_records_like_tolerant_mode(
    values: list[dict[str, Any]], raw_unicode: bool
) -> None:
    data = b"".join(_encode(value, raw_unicode) + b"\n" for value in values)
    strict, strict_report = _read(data, strict=True)
    tolerant, _ = _read(data, strict=False)
    assert strict == tolerant
    assert len(strict) == len(values)
    assert strict_report.clean
