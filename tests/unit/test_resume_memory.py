"""Resume's memory stays a small multiple of what it returns (tracemalloc, no timing).

Each trace is written to a real file and resumed from it as ``resume-check``
does; the peak of traced allocations must stay under a fixed allowance (the
read buffers) plus a bound per record the result holds.  Before the bound,
token events were all kept for a backwards scan and a closed context held the
whole session until its last record.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from pentrace.infrastructure.trace.reader import resume_trace_file
from pentrace.projections.resume import ResumeResult

N: Final = 30_000
# Read buffers and one decoded batch: a 256 KiB chunk, its lines, 1024 records.
FIXED: Final = 3 * 1024 * 1024
# A returned record: its line's bytes, the record and its header fields, list slots.
PER_RETURNED: Final = 1024

META: Final = b'{"type":"session_meta","payload":{"session_id":"s","provider":"p"}}'
USER: Final = b'{"type":"model_msg","payload":{"type":"text","role":"user","text":"hi"}}'
SAY: Final = b'{"type":"model_msg","payload":{"type":"text","role":"assistant","text":"ok"}}'
BEGIN: Final = b'{"type":"event_msg","payload":{"type":"request_begin"}}'
DONE: Final = b'{"type":"event_msg","payload":{"type":"request_end","status":"completed"}}'
FAILED: Final = b'{"type":"event_msg","payload":{"type":"request_end","status":"failed"}}'
TOKENS: Final = (
    b'{"type":"event_msg","payload":{"type":"token_usage",'
    b'"session":{"total":1},"request":{"total":1}}}'
)
PARTIAL: Final = b'{"type":"model_msg","payload":{"type":"partial_text","role":"assistant"}}'
CLOSE: Final = b'{"type":"event_msg","payload":{"type":"compaction_end","status":"completed"}}'
SUMMARY: Final = (
    b'{"type":"model_msg","payload":{"type":"text","role":"assistant",'
    b'"text":"[summary]all done[/summary]"}}'
)
CLOSE_SUMMARY: Final = (
    b'{"type":"event_msg","payload":{"type":"compaction_end","status":"completed",'
    b'"mode":"summarize"}}'
)

TRACES: Final[dict[str, Callable[[], list[bytes]]]] = {
    "token events only": lambda: [META, *[TOKENS] * N],
    "a long session closed by a compaction": lambda: [
        META,
        *[USER, BEGIN, SAY, DONE, TOKENS] * (N // 5),
        CLOSE,
    ],
    "a long session closed with a summary": lambda: [
        META,
        *[USER, BEGIN, SAY, DONE] * (N // 4),
        BEGIN,
        SUMMARY,
        DONE,
        CLOSE_SUMMARY,
    ],
    "streaming fragments": lambda: [META, BEGIN, *[PARTIAL] * N],
    "malformed middle lines": lambda: [META, *[b"not json"] * N, TOKENS],
    "blank lines": lambda: [META, *[b"   "] * N, TOKENS],
    "failed rounds of tool-less requests": lambda: [META, *[BEGIN, FAILED] * (N // 2)],
    "committed history": lambda: [META, *[USER, BEGIN, SAY, DONE] * (N // 4)],
    "input never sent": lambda: [META, *[USER] * N],
}


def _returned(result: ResumeResult) -> int:
    held = {
        id(record)
        for records in (result.history, result.carry_over, result.render_messages)
        for record in records
    }
    return len(held) + (result.meta is not None) + (result.pending_summary is not None)


def _peak(path: Path) -> tuple[int, ResumeResult]:
    tracemalloc.start()
    try:
        result = resume_trace_file(path)
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", sorted(TRACES))
def test_resume_peaks_within_a_bound_proportional_to_what_it_returns(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"\n".join(TRACES[name]()) + b"\n")

    peak, result = _peak(path)

    returned = _returned(result)
    assert peak <= FIXED + PER_RETURNED * returned, (name, peak, returned)


def test_the_bound_is_tight_enough_to_catch_a_fold_that_keeps_everything(
    tmp_path: Path,
) -> None:
    # The same number of records, all returned, needs far more than the fixed allowance:
    # a fold that kept the records of the traces above would fail their bound.
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"\n".join(TRACES["input never sent"]()) + b"\n")

    peak, result = _peak(path)

    assert _returned(result) == N + 1
    assert peak > 3 * FIXED


def test_a_summary_closure_returns_the_summary_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"\n".join(TRACES["a long session closed with a summary"]()) + b"\n")

    result = resume_trace_file(path)

    assert result.context_closed
    assert (result.history, result.carry_over, result.render_messages) == ([], [], [])
    assert result.pending_summary is not None
    assert "all done" in result.pending_summary.payload()["text"]
