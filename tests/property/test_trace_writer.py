"""Property tests: whatever the writers do, the reader sees exactly the records they appended."""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.reader import ParseReport, read_shard
from pentrace.infrastructure.trace.tool_output import (
    ARCHIVE_GAP_MARKER,
    bound_archive_bytes,
    render_tool_output,
    utf16_length,
)
from pentrace.infrastructure.trace.writer import ShardWriter

_texts = st.text(
    st.characters(codec="utf-8") | st.sampled_from('\n\r\u2028\\"'),
    max_size=40,
)
_records = _texts.map(
    lambda body: msgspec.json.encode(
        {"type": "model_msg", "payload": {"type": "text", "text": body}}
    )
)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), _records),
        st.tuples(st.just("batch"), st.lists(_records, max_size=4)),
        st.tuples(st.just("reopen"), st.just(b"")),
        st.tuples(
            st.just("tear"),
            st.binary(min_size=1, max_size=12).filter(lambda b: b"\n" not in b and b'"' not in b),
        ),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(steps=_steps)
def test_the_reader_sees_every_appended_record_in_order_despite_torn_tails(
    steps: list[tuple[str, object]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        shard = Path(tmp) / "s_001.jsonl"
        expected: list[bytes] = []
        tears = 0
        torn = False  # tears with no record between them make one fragment
        writer = ShardWriter(shard, durability=Durability.NONE)
        for op, arg in steps:
            if op == "append":
                assert isinstance(arg, bytes)
                writer.append(arg)
                expected.append(arg)
                torn = False
            elif op == "batch":
                assert isinstance(arg, list)
                writer.append_many(arg)
                expected.extend(arg)
                torn = torn and not arg
            elif op == "reopen":
                writer.close()
                writer = ShardWriter(shard, durability=Durability.NONE)
            elif shard.exists():
                # A crashed writer's fragment: the string it opens never closes, so it never parses.
                assert isinstance(arg, bytes)
                writer.close()
                with shard.open("ab") as out:
                    out.write(b'{"torn' + arg)
                tears += not torn
                torn = True
                writer = ShardWriter(shard, durability=Durability.NONE)
        writer.close()
        if not shard.exists():
            assert expected == []
            return
        report = ParseReport()
        assert [r.raw for r in read_shard(shard, report=report)] == expected
        # Each fragment is one line: healed (a valid record prefix) or malformed, or the tail.
        assert report.skipped_count + report.healed_count + len(report.torn_tails) == tears


@settings(max_examples=200, deadline=None)
@given(output=st.text(max_size=300), cap=st.integers(min_value=1, max_value=120))
def test_a_truncated_output_is_a_prefix_within_the_cap_plus_the_notes(
    output: str, cap: int
) -> None:
    got = render_tool_output(output, max_chars=cap, archive=None)
    if utf16_length(output) <= cap:
        assert got == output
        return
    head, _, note = got.rpartition("\n")
    assert note == f"[output truncated: exceeded {cap} chars]"
    assert output.startswith(head)
    assert utf16_length(head) <= cap
    assert utf16_length(head) >= cap - 1  # only a surrogate pair may move out whole


@settings(max_examples=200, deadline=None)
@given(output=st.text(max_size=200), limit=st.integers(min_value=30, max_value=200))
def test_an_archive_fits_its_limit_and_keeps_whole_characters(output: str, limit: int) -> None:
    data, cut = bound_archive_bytes(output, limit)
    encoded = output.encode("utf-8", "surrogatepass")
    if not cut:
        assert data.decode("utf-8", "surrogatepass") == output
        return
    assert len(data) <= limit
    text = data.decode("utf-8", "surrogatepass")
    head, _, tail = text.partition(ARCHIVE_GAP_MARKER)
    assert encoded.startswith(head.encode("utf-8", "surrogatepass"))
    assert encoded.endswith(tail.encode("utf-8", "surrogatepass"))
