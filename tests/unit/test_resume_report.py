"""The resume-check JSON contract and the file-reading wrapper, on real bytes and files."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from pentrace.errors import NotFoundError, TraceError, TraceFormatError
from pentrace.infrastructure.trace.reader import (
    ParseReport,
    read_records_from_bytes,
    resume_trace_file,
)
from pentrace.projections.resume import encode_resume_report, resume_report, resume_trace

META = (
    b'{"timestamp":"2026-11-29T10:00:00.000Z","type":"session_meta","payload":{"session_id":"s"}}'
)
USER = (
    b'{"timestamp":"2026-11-29T10:00:01.000Z","type":"model_msg",'
    b'"payload":{"type":"text","role":"user","text":"go"}}'
)
BEGIN = b'{"type":"event_msg","payload":{"type":"request_begin"}}'
# Key order, a float written as 10.0 and an integer beyond 2**64 must survive verbatim.
CALL = (
    b'{"payload":{"tool_call_id":"c1","type":"tool_call","role":"assistant","name":"x",'
    b'"arguments":"{}","stop_reason":"completed","fidelity":{"n":10.0,"big":123456789012345678901}},'
    b'"type":"model_msg","timestamp":"2026-11-29T10:00:02.000Z"}'
)
END = b'{"type":"event_msg","payload":{"type":"request_end","status":"completed"}}'
USAGE = (
    b'{"type":"event_msg","payload":{"type":"token_usage",'
    b'"session":{"cache_read":0,"cache_write":0,"output":2,"total":10.0},"request":{"total":7}}}'
)
TRACE = b"\n".join([META, USER, BEGIN, CALL, b"{broken", END, USAGE, b'{"torn'])


def _report(data: bytes) -> tuple[dict[str, object], bytes]:
    parse = ParseReport()
    result = resume_trace(read_records_from_bytes(data, report=parse))
    return resume_report(result, parse), encode_resume_report(result, parse)


def test_the_report_has_every_contract_field() -> None:
    report, _ = _report(TRACE)
    assert list(report) == [
        "history",
        "carry_over",
        "context_closed",
        "pending_summary",
        "session_tokens",
        "last_request_total",
        "session_turns",
        "render_messages",
        "meta",
        "dangling_compaction",
        "synthesized",
        "parse",
    ]


def test_messages_are_embedded_byte_for_byte_as_they_stand_in_the_trace() -> None:
    _, encoded = _report(TRACE)
    assert b'"history":[' + USER + b"," + CALL + b"]" in encoded
    assert b'"meta":' + META in encoded


def test_synthesized_placeholders_are_flagged_outside_the_envelopes() -> None:
    _, encoded = _report(TRACE)
    decoded = json.loads(encoded)
    assert decoded["carry_over"][0]["payload"]["output"].startswith("[interrupted:")
    assert decoded["carry_over"][0]["timestamp"] == "2026-11-29T10:00:02.000Z"
    assert "synthesized" not in decoded["carry_over"][0]
    assert decoded["synthesized"] == {"history": [], "carry_over": [0]}


def test_the_parse_section_names_skipped_lines_and_the_torn_tail() -> None:
    report, _ = _report(TRACE)
    assert report["parse"] == {"skipped_lines": [5], "skipped_count": 1, "torn_tail": 8}


def test_counters_keep_numbers_as_written() -> None:
    _, encoded = _report(TRACE)
    decoded = json.loads(encoded)
    assert b'"session_tokens":{"cache_read":0,"cache_write":0,"output":2,"total":10.0}' in encoded
    assert (decoded["last_request_total"], decoded["session_turns"]) == (7, 1)


def test_without_a_parse_report_the_parse_section_is_null() -> None:
    result = resume_trace(read_records_from_bytes(TRACE))
    report = json.loads(encode_resume_report(result))
    assert report["parse"] is None
    assert report["dangling_compaction"] is None
    assert report["pending_summary"] is None


def test_an_undefined_last_request_total_is_null() -> None:
    data = b'{"type":"event_msg","payload":{"type":"token_usage","session":{},"request":{}}}'
    report = json.loads(encode_resume_report(resume_trace(read_records_from_bytes(data))))
    assert (report["session_tokens"], report["last_request_total"]) == ({}, None)


def test_a_trace_file_resumes_with_its_torn_tail_ignored(tmp_path: Path) -> None:
    shard = tmp_path / "session-2026-11-29-10-00-00-0badcafe_001.jsonl"
    shard.write_bytes(TRACE)
    parse = ParseReport()
    result = resume_trace_file(shard, report=parse)
    assert [record.raw for record in result.history] == [USER, CALL]
    assert parse.torn_tail is not None
    assert parse.torn_tail.line == 8


def test_a_trace_file_in_strict_mode_refuses_a_broken_middle_line(tmp_path: Path) -> None:
    shard = tmp_path / "broken_001.jsonl"
    shard.write_bytes(TRACE)
    with pytest.raises(TraceFormatError, match=r"broken_001\.jsonl:5"):
        resume_trace_file(shard, strict=True)


def test_a_missing_trace_file_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises((NotFoundError, TraceError), match="absent_001"):
        resume_trace_file(tmp_path / "absent_001.jsonl")


_COMPACTION = [
    b'{"type":"model_msg","payload":{"type":"text","role":"user","text":"task"}}',
    BEGIN,
    b'{"type":"model_msg","payload":{"type":"text","role":"assistant","text":"did it"}}',
    END,
    b'{"type":"event_msg","payload":{"type":"compaction_begin","reason":"context","mode":"summarize"}}',
    b'{"type":"model_msg","payload":{"type":"text","role":"user","text":"summarize"}}',
    BEGIN,
    b'{"type":"model_msg","payload":{"type":"text","role":"assistant","text":"[summary]s[/summary]"}}',
    END,
]
_CLOSING = (
    b'{"timestamp":"2026-11-29T10:09:00.000Z","type":"event_msg","payload":'
    b'{"type":"compaction_end","reason":"context","mode":"summarize","status":"completed"}}'
)


def test_a_torn_compaction_end_leaves_the_compaction_dangling() -> None:
    data = b"\n".join([*_COMPACTION, _CLOSING[:-9]])
    result = resume_trace(read_records_from_bytes(data))
    assert result.context_closed is False
    assert result.dangling_compaction == {"reason": "context", "mode": "summarize"}
    assert [record.raw for record in result.history] == [_COMPACTION[i] for i in (0, 2, 5, 7)]
    assert result.session_turns == 1


def test_a_malformed_middle_line_does_not_stop_the_closure() -> None:
    data = b"\n".join([*_COMPACTION[:3], b"{torn by #215", *_COMPACTION[3:], _CLOSING])
    result = resume_trace(read_records_from_bytes(data))
    assert result.context_closed is True
    assert result.pending_summary is not None
    assert result.pending_summary.value() == {
        "timestamp": "2026-11-29T10:09:00.000Z",
        "type": "model_msg",
        "payload": {
            "type": "text",
            "role": "user",
            "text": "[context_summary]\ns\n[/context_summary]",
            "stop_reason": "completed",
        },
    }


def test_the_example_on_the_resume_page_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "resume.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's temp folder
    for index, block in enumerate(blocks):
        exec(compile(block, f"{page}:block{index}", "exec"), {"__name__": "docs"})  # noqa: S102  # running our own docs is the test
    printed = json.loads(capsys.readouterr().out)
    assert printed["parse"] == {"skipped_lines": [], "skipped_count": 0, "torn_tail": 2}
