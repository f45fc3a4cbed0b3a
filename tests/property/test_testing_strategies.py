"""The published strategies generate what they promise (pentrace.testing)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace import testing as pt
from pentrace.domain.records import decode_line


@settings(max_examples=60, deadline=None)
@given(pt.session_commands())
def test_the_aggregate_writes_exactly_the_rendered_lines(commands: list[pt.Command]) -> None:
    session = pt.drive_session(commands)
    written = [event.line for event in session.collect_events()]
    assert written == list(itertools.chain.from_iterable(pt.render_shards(commands)))


@settings(max_examples=60, deadline=None)
@given(pt.session_commands(open_tail=False))
def test_generated_sessions_follow_the_model_of_legal_sessions(commands: list[pt.Command]) -> None:
    assert isinstance(commands[0], pt.StartSession)
    called: set[str] = set()
    answered: set[str] = set()
    open_request = False
    last_total = None
    for command in commands[1:]:
        if isinstance(command, pt.BeginRequest):
            assert not open_request
            open_request = True
        elif isinstance(command, pt.EndRequest):
            assert open_request
            open_request = False
        elif isinstance(command, pt.ToolCall):
            assert open_request
            assert command.tool_call_id not in called
            called.add(command.tool_call_id)
        elif isinstance(command, pt.ToolOutput):
            assert command.tool_call_id in called - answered
            answered.add(command.tool_call_id)
        elif isinstance(command, pt.TokenUsage):
            if last_total is not None:
                assert command.session == last_total + command.request
            last_total = command.session
    assert not open_request


@settings(max_examples=60, deadline=None)
@given(pt.trace_records())
def test_uncrashed_trace_lines_are_complete_json_records(lines: list[bytes]) -> None:
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in lines)
    records = [decode_line(line[:-1]) for line in lines]
    assert records[0] is not None
    assert records[0].kind == "session_meta"
    assert all(record is not None for record in records)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_crash_cut_is_a_byte_prefix_of_the_whole_file(data: st.DataObject) -> None:
    lines = data.draw(pt.trace_records())
    whole = b"".join(lines)
    offset = data.draw(pt.crash_points(whole))
    assert 0 <= offset <= len(whole)
    kept = pt.cut(lines, offset)
    assert b"".join(kept) == whole[:offset]
    assert all(line.endswith(b"\n") for line in kept[:-1])


@given(st.binary(max_size=200))
def test_split_lines_splits_after_newlines_only(data: bytes) -> None:
    lines = pt.split_lines(data)
    assert b"".join(lines) == data
    assert all(line.endswith(b"\n") for line in lines[:-1])
    assert all(b"\n" not in line[:-1] for line in lines)
    assert pt.split_lines(b"a\rb\xe2\x80\xa8c\n") == [b"a\rb\xe2\x80\xa8c\n"]


@settings(max_examples=40, deadline=None)
@given(pt.trace_records(crashed=True))
def test_a_crashed_trace_only_ever_tears_its_last_line(lines: list[bytes]) -> None:
    for line in lines[:-1]:
        assert decode_line(line[:-1]) is not None
