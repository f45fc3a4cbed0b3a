"""The trace reader applies PenguinHarness's reading rules, one rule per test."""

from __future__ import annotations

import json
import tracemalloc
from datetime import date
from pathlib import Path

import pytest

from pentrace.domain.records import TraceRecord
from pentrace.errors import NotFoundError, TraceError, TraceFormatError, UsageError
from pentrace.infrastructure.storage.layout import ShardRef
from pentrace.infrastructure.trace.reader import (
    BadLine,
    ParseReport,
    read_records_from_bytes,
    read_session,
    read_shard,
)

BEGIN = b'{"type":"event_msg","payload":{"type":"request_begin"}}'
END = b'{"type":"event_msg","payload":{"type":"request_end","status":"completed"}}'


def read(data: bytes, *, strict: bool = False) -> tuple[list[TraceRecord], ParseReport]:
    report = ParseReport()
    records = list(read_records_from_bytes(data, report=report, strict=strict))
    return records, report


def lines_of(records: list[TraceRecord]) -> list[int]:
    return [record.line for record in records]


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- splitting -------------------------------------------------------------------------------


def test_lines_are_split_on_newline_only() -> None:
    records, report = read(BEGIN + b"\n" + END + b"\n")
    assert [r.ptype for r in records] == ["request_begin", "request_end"]
    assert lines_of(records) == [1, 2]
    assert report.lines == 2
    assert report.clean


def test_a_file_separated_only_by_carriage_returns_is_one_torn_line() -> None:
    records, report = read(BEGIN + b"\r" + END + b"\r")
    assert records == []
    assert report.skipped == []
    assert report.torn_tail is not None
    assert report.torn_tail.line == 1


def test_crlf_line_endings_are_trimmed_away() -> None:
    records, report = read(BEGIN + b"\r\n" + END + b"\r\n")
    assert [r.raw for r in records] == [BEGIN, END]
    assert report.clean


def test_a_line_separator_inside_a_string_stays_inside_the_line() -> None:
    line = '{"type":"model_msg","payload":{"type":"text","text":"a\u2028b\u2029c"}}'.encode()
    records, report = read(line + b"\n" + END + b"\n")
    assert len(records) == 2
    assert records[0].payload()["text"] == "a\u2028b\u2029c"
    assert report.clean


def test_a_line_separator_between_two_objects_does_not_split_them() -> None:
    records, report = read(BEGIN + "\u2028".encode() + END + b"\n" + END)
    assert lines_of(records) == [2]
    assert [bad.line for bad in report.skipped] == [1]


def test_a_next_line_character_is_not_whitespace_so_the_line_is_malformed() -> None:
    records, report = read("\u0085".encode() + BEGIN + b"\n" + END + b"\n")
    assert lines_of(records) == [2]
    assert [bad.line for bad in report.skipped] == [1]


def test_a_byte_order_mark_is_trimmed_from_the_first_line() -> None:
    records, report = read(b"\xef\xbb\xbf" + BEGIN + b"\n" + END + b"\n")
    assert [r.raw for r in records] == [BEGIN, END]
    assert report.clean


def test_blank_lines_are_ignored_but_keep_their_line_numbers() -> None:
    records, report = read(b"\n   \n" + BEGIN + "\n\t\u3000\n".encode() + END + b"\n\n")
    assert lines_of(records) == [3, 5]
    assert (report.lines, report.blank_lines, report.records) == (6, 4, 2)


def test_a_last_line_without_newline_is_still_a_record() -> None:
    records, report = read(BEGIN + b"\n" + END)
    assert lines_of(records) == [1, 2]
    assert report.clean


def test_empty_input_has_no_lines() -> None:
    records, report = read(b"")
    assert records == []
    assert (report.lines, report.files, report.clean) == (0, 1, True)


# --- malformed lines and the torn tail -------------------------------------------------------


def test_a_torn_last_line_is_dropped_and_noted_as_the_torn_tail() -> None:
    records, report = read(BEGIN + b"\n" + b'{"type":"event_msg","payl')
    assert lines_of(records) == [1]
    assert report.skipped == []
    assert report.skipped_count == 0
    assert report.torn_tail is not None
    assert report.torn_tail.line == 2
    assert not report.clean


def test_blank_lines_after_a_torn_line_do_not_save_it() -> None:
    records, report = read(BEGIN + b'\n{"type\n\n  \t\n')
    assert lines_of(records) == [1]
    assert report.torn_tail is not None
    assert report.torn_tail.line == 2
    assert report.skipped == []


def test_a_torn_tail_does_not_raise_in_strict_mode() -> None:
    records, report = read(BEGIN + b'\n{"type', strict=True)
    assert lines_of(records) == [1]
    assert report.torn_tail is not None


def test_a_malformed_middle_line_is_skipped_and_reported() -> None:
    records, report = read(BEGIN + b"\nnot json\n" + END + b"\n")
    assert lines_of(records) == [1, 3]
    assert report.torn_tail is None
    assert len(report.skipped) == 1
    assert report.skipped[0].line == 2
    assert report.skipped[0].path is None
    assert report.skipped[0].reason


def test_a_malformed_middle_line_raises_in_strict_mode_after_the_records_before_it(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "s_001.jsonl", BEGIN + b"\n\n{oops\n" + END + b"\n")
    seen: list[int] = []
    with pytest.raises(TraceFormatError, match=r"s_001\.jsonl:3: ") as info:
        seen.extend(record.line for record in read_shard(path, strict=True))
    assert seen == [1]
    assert (info.value.path, info.value.line) == (path, 3)
    assert info.value.hint is not None


def test_consecutive_malformed_lines_before_the_end_are_all_reported() -> None:
    records, report = read(b"{x\n[\n" + END + b"\n")
    assert lines_of(records) == [3]
    assert [bad.line for bad in report.skipped] == [1, 2]
    assert report.torn_tail is None


def test_of_two_malformed_last_lines_only_the_final_one_is_torn() -> None:
    records, report = read(BEGIN + b"\n{x\n[\n")
    assert lines_of(records) == [1]
    assert [bad.line for bad in report.skipped] == [2]
    assert report.torn_tail is not None
    assert report.torn_tail.line == 3


# --- healed torn fragments ------------------------------------------------------------------


def test_a_healed_torn_fragment_is_legal_history_not_a_malformed_line() -> None:
    data = BEGIN + b"\n" + END[:30] + b"\n" + END + b"\n"
    records, report = read(data)
    assert lines_of(records) == [1, 3]
    assert (report.skipped_count, report.torn_tail) == (0, None)
    assert [bad.line for bad in report.healed] == [2]
    assert report.healed_count == 1
    assert report.clean


def test_the_reader_note_names_healed_fragments_apart_from_malformed_lines() -> None:
    _, report = read(BEGIN + b"\n" + END[:30] + b"\n" + END + b"\n")
    assert report.note() == "no malformed lines; 1 healed torn fragment(s): 2"


def test_a_healed_torn_fragment_does_not_raise_in_strict_mode() -> None:
    records, report = read(BEGIN + b"\n" + BEGIN[:9] + b"\n" + END, strict=True)
    assert lines_of(records) == [1, 3]
    assert [bad.line for bad in report.healed] == [2]


def test_two_crashes_in_a_row_leave_two_healed_fragments() -> None:
    records, report = read(BEGIN + b"\n" + END[:5] + b"\n" + END[:50] + b"\n" + END)
    assert lines_of(records) == [1, 4]
    assert [bad.line for bad in report.healed] == [2, 3]
    assert report.skipped_count == 0


@pytest.mark.parametrize(
    "fragment",
    [
        b"not json",  # never JSON
        b'{"type":"event_msg"}}',  # a whole object and more: two records spliced
        b'{"type" "event_msg"',  # a syntax error before the cut
        b"\x00\x00\x00\x00",  # zeroed blocks after a power cut
        b'  {"type":"ev',  # a writer's record starts at the line's first byte
    ],
)
def test_real_corruption_in_the_middle_still_raises_in_strict_mode(fragment: bytes) -> None:
    with pytest.raises(TraceFormatError, match=r"line 2: "):
        read(BEGIN + b"\n" + fragment + b"\n" + END, strict=True)


def test_a_fragment_followed_by_a_blank_line_was_not_healed_by_a_writer() -> None:
    records, report = read(BEGIN + b"\n" + END[:30] + b"\n\n" + END + b"\n")
    assert lines_of(records) == [1, 4]
    assert [bad.line for bad in report.skipped] == [2]
    assert report.healed == []


@pytest.mark.parametrize("text", [b"NaN", b'{"a":Infinity}', b"{'a':1}", b'{"a":1,}', b"\x00{}"])
def test_non_strict_json_is_malformed(text: bytes) -> None:
    records, report = read(text + b"\n" + END)
    assert lines_of(records) == [2]
    assert [bad.line for bad in report.skipped] == [1]


@pytest.mark.parametrize(
    ("text", "value"),
    [(b"42", 42), (b'"s"', "s"), (b"[]", []), (b"true", True), (b"{}", {}), (b"null", None)],
)
def test_any_json_value_is_a_record(text: bytes, value: object) -> None:
    records, report = read(text + b"\n")
    assert [r.value() for r in records] == [value]
    assert report.clean


def test_invalid_utf8_becomes_replacement_characters() -> None:
    records, _ = read(b'{"type":"model_msg","payload":{"type":"text","text":"a\xffb"}}\n')
    assert records[0].payload()["text"] == "a\ufffdb"
    assert "\ufffd".encode() in records[0].raw


def test_out_of_range_numbers_are_read_like_javascript_doubles() -> None:
    records, report = read(b'{"a":1e400}\n{"b":' + b"9" * 5000 + b"}\n")
    assert [r.value() for r in records] == [{"a": float("inf")}, {"b": float("inf")}]
    assert report.clean


def test_deeply_nested_json_is_reported_not_raised() -> None:
    deep = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    records, report = read(deep + b"\n" + END + b"\n")
    assert lines_of(records) == [2]
    assert [bad.line for bad in report.skipped] == [1]
    assert "nest" in report.skipped[0].reason or "recursion" in report.skipped[0].reason


def test_binary_garbage_is_skipped_without_crashing() -> None:
    garbage = bytes(range(256)) * 4
    records, report = read(garbage.replace(b"\n", b"") + b"\n" + END + b"\n" + garbage)
    assert lines_of(records) == [2]
    assert report.skipped_count + len(report.torn_tails) >= 2


def test_reasons_never_quote_the_line() -> None:
    secret = b"sk-live-abcdef123456"
    _, report = read(b'{"token":"' + secret + b'" oops}\n' + END + b"\n")
    assert report.skipped
    assert secret.decode() not in report.skipped[0].reason


# --- streaming -------------------------------------------------------------------------------

MIXED = (
    b"\xef\xbb\xbf"
    + BEGIN
    + b"\r\n\n  \n"
    + '{"type":"model_msg","payload":{"type":"text","role":"user","text":"\u00e9\u2028"}}'.encode()
    + b"\nnot json\n"
    + END
    + b"\n"
    + b'{"type":"event_msg","payload":{"type":"token_usage","session":{"total":7}}}'
    + b"\n{torn"
)


def snapshot(records: list[TraceRecord], report: ParseReport) -> object:
    return (
        [(r.line, r.raw) for r in records],
        [(b.line, b.reason) for b in report.skipped],
        [(b.line, b.reason) for b in report.torn_tails],
        (report.lines, report.blank_lines, report.records, report.bytes_read),
    )


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 5, 7, 16, 64, 1 << 20])
def test_tiny_chunks_read_exactly_like_one_big_chunk(tmp_path: Path, chunk_size: int) -> None:
    path = write(tmp_path / "s_001.jsonl", MIXED)
    expected = snapshot(*read(MIXED))
    report = ParseReport()
    records = list(read_shard(path, report=report, chunk_size=chunk_size))
    assert snapshot(records, report) == expected
    assert lines_of(records) == [1, 4, 6, 7]


def test_a_line_much_larger_than_the_chunk_is_read_whole(tmp_path: Path) -> None:
    text = "x" * (3 * 1024 * 1024 + 17)
    big = json.dumps({"type": "model_msg", "payload": {"type": "text", "text": text}}).encode()
    path = write(tmp_path / "s_001.jsonl", BEGIN + b"\n" + big + b"\n" + END + b"\n")
    report = ParseReport()
    records = list(read_shard(path, report=report, chunk_size=64 * 1024))
    assert lines_of(records) == [1, 2, 3]
    assert records[1].raw == big
    assert records[1].payload()["text"] == text
    assert report.bytes_read == path.stat().st_size


def test_a_chunk_size_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="chunk_size"):
        read_shard(tmp_path / "s_001.jsonl", chunk_size=0)


# --- files and sessions ----------------------------------------------------------------------


def test_a_missing_file_is_a_not_found_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone_001.jsonl"
    with pytest.raises(NotFoundError, match=r"gone_001\.jsonl does not exist"):
        list(read_shard(missing))


def test_a_file_that_cannot_be_read_is_a_trace_error_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "folder_001.jsonl"
    folder.mkdir()
    with pytest.raises(TraceError, match=r"cannot read trace file .*folder_001\.jsonl"):
        list(read_shard(folder))


def test_bad_lines_of_a_file_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "s_001.jsonl", b"oops\n" + END + b"\n")
    report = ParseReport()
    list(read_shard(path, report=report))
    assert report.skipped == [BadLine(path, 1, report.skipped[0].reason)]


def shard(tmp_path: Path, index: int, day: int, data: bytes) -> ShardRef:
    folder = tmp_path / f"2026-07-{day:02d}"
    folder.mkdir(exist_ok=True)
    return ShardRef(write(folder / f"s_{index:03d}.jsonl", data), index, date(2026, 7, day))


def test_a_session_reads_its_shards_in_index_order_with_their_own_line_numbers(
    tmp_path: Path,
) -> None:
    second = shard(tmp_path, 2, 17, b"\n" + BEGIN + b"\n{torn")
    first = shard(tmp_path, 1, 18, BEGIN + b"\nbad\n" + END + b"\n")
    report = ParseReport()
    records = list(read_session([second, first], report=report))
    assert [(r.line, r.ptype) for r in records] == [
        (1, "request_begin"),
        (3, "request_end"),
        (2, "request_begin"),
    ]
    assert [(b.path, b.line) for b in report.skipped] == [(first.path, 2)]
    assert [(b.path, b.line) for b in report.torn_tails] == [(second.path, 3)]
    assert (report.files, report.records, report.lines) == (2, 3, 6)


def test_two_shards_with_one_index_make_a_session_unreadable(tmp_path: Path) -> None:
    one = shard(tmp_path, 1, 17, BEGIN + b"\n")
    again = shard(tmp_path, 1, 18, END + b"\n")
    with pytest.raises(TraceError, match="expected one shard with index 001, found two"):
        read_session([one, again])


def test_the_report_note_names_the_first_skipped_lines() -> None:
    _, report = read(b"x\n" * 30 + END)
    assert report.skipped_count == 30
    assert report.note(limit=3) == "skipped 30 malformed line(s): 1, 2, 3 (and 27 more)"
    assert ParseReport().note() == "no malformed lines"


def test_the_report_keeps_a_bounded_number_of_skipped_lines() -> None:
    report = ParseReport(max_kept=5)
    records = list(read_records_from_bytes(b"x\n" * 50 + END, report=report))
    assert len(records) == 1
    assert report.skipped_count == 50
    assert [bad.line for bad in report.skipped] == [1, 2, 3, 4, 5]


def test_reading_a_large_file_keeps_memory_bounded_by_chunk_and_line(tmp_path: Path) -> None:
    line = json.dumps({"type": "model_msg", "payload": {"type": "text", "text": "y" * 2000}})
    path = write(tmp_path / "s_001.jsonl", (line.encode() + b"\n") * 3000)
    tracemalloc.start()
    try:
        count = sum(1 for _ in read_shard(path, chunk_size=64 * 1024))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 3000
    assert path.stat().st_size > 6_000_000
    assert peak < 600_000


def test_a_line_longer_than_the_limit_stops_the_read_instead_of_filling_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pentrace.infrastructure.trace.reader.MAX_LINE_BYTES", 1000)
    path = write(tmp_path / "s_001.jsonl", BEGIN + b"\n" + b"x" * 5000)
    with pytest.raises(TraceError, match=r"s_001\.jsonl: the line starting at byte 56 is longer"):
        list(read_shard(path, chunk_size=100))
