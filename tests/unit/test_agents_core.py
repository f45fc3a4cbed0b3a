"""The foreign-session core: reading source lines, timestamps, project names, the usage rule."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pentrace.infrastructure.agents.core import ImportReport as Report
from pentrace.infrastructure.agents.reading import (
    MALFORMED,
    line_items,
    normal_stamp,
    parse_json,
    project_name,
    walk_files,
)
from pentrace.infrastructure.agents.state import open_state, state_path


def test_only_complete_lines_are_read_and_a_torn_tail_waits(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n\n{"b":2}\r\n{"c":')

    items = list(line_items(path, 0, 0))

    assert [(i.at, i.value, i.end, i.next) for i in items] == [
        (1, {"a": 1}, 7, 8),
        (3, {"b": 2}, 17, 18),
    ]
    assert items[1].raw == b'{"b":2}\r'


def test_an_unterminated_last_line_that_is_a_whole_object_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}')

    assert [i.value for i in line_items(path, 0, 0)] == [{"a": 1}, {"b": 2}]
    # From the cursor after it: the newline written later ends that same line.
    path.write_bytes(b'{"a":1}\n{"b":2}\n{"c":3}\n')
    assert [(i.at, i.value) for i in line_items(path, 15, 2)] == [(3, {"c": 3})]


def test_reading_resumes_at_a_byte_offset_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}\n')

    [item] = line_items(path, 8, 1)

    assert (item.at, item.value, item.end, item.next) == (2, {"b": 2}, 15, 16)


def test_a_line_over_the_limit_is_yielded_by_its_length_without_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    huge = b'{"x":"' + b"y" * 5000 + b'"}'
    path.write_bytes(b'{"a":1}\n' + huge + b'\n{"b":2}\n')

    items = list(line_items(path, 0, 0, limit=1000))

    assert [(i.at, i.size, i.raw) for i in items] == [
        (1, 0, b'{"a":1}'),
        (2, len(huge), b""),
        (3, 0, b'{"b":2}'),
    ]
    assert items[1].value is MALFORMED


def test_malformed_lines_and_invalid_utf8_are_marked_not_dropped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":NaN}\n\xff\xfe{}\n{"ok":"\\ud800"}\n')

    values = [i.value for i in line_items(path, 0, 0)]

    assert values[0] is MALFORMED
    assert values[1] is MALFORMED
    assert values[2] == {"ok": "\ud800"}  # a lone surrogate escape is valid JSON


_LINES = st.lists(
    st.one_of(
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2).map(
            lambda d: json.dumps(d).encode()
        ),
        st.binary(max_size=12).filter(lambda b: b"\n" not in b),
    ),
    max_size=8,
)


@given(_LINES, st.booleans(), st.data())
def test_reading_from_a_cursor_continues_exactly_where_one_whole_read_goes_on(
    lines: list[bytes], final_newline: bool, data: st.DataObject
) -> None:
    """A pass over a prefix of the file, then a pass from its cursor over the whole file,
    read the same items as one pass (a writer appends whole lines)."""
    content = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    cut = data.draw(st.integers(min_value=0, max_value=len(content)))
    head = content[:cut]
    partial = head.rpartition(b"\n")[2]
    full = content[len(head) - len(partial) :].split(b"\n")[0]
    assume(partial == full or not isinstance(parse_json(partial), dict))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.jsonl"
        path.write_bytes(content)
        whole = [(i.at, i.raw) for i in line_items(path, 0, 0)]
        path.write_bytes(head)
        first = list(line_items(path, 0, 0))
        position, line = (first[-1].next, int(first[-1].at)) if first else (0, 0)
        path.write_bytes(content)
        rest = [(i.at, i.raw) for i in line_items(path, position, line)]
    assert [(i.at, i.raw) for i in first] + rest == whole


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-09-03T00:47:19.293Z", "2025-09-03T00:47:19.293Z"),
        ("2025-09-03T02:47:19+02:00", "2025-09-03T00:47:19.000Z"),
        ("2025-09-03T00:47:19", "2025-09-03T00:47:19.000Z"),
        (1756860439293, "2025-09-03T00:47:19.293Z"),
        (1756860439, "2025-09-03T00:47:19.000Z"),
        ("yesterday", None),
        (True, None),
        (None, None),
        (1e300, None),
    ],
)
def test_timestamps_are_normalised_to_utc_milliseconds(value: object, expected: str | None) -> None:
    assert normal_stamp(value) == expected


@pytest.mark.parametrize(
    ("workspace", "project"),
    [
        ("/home/u/work/app", "home-u-work-app"),
        ("/Users/me/my.project v2", "Users-me-my-project-v2"),
        ("C:\\src\\app", "C--src-app"),
        ("", "no-workspace"),
        ("/", "no-workspace"),
    ],
)
def test_a_workspace_names_its_project_as_claude_code_names_its_folder(
    workspace: str, project: str
) -> None:
    assert project_name(workspace) == project


def test_a_usage_key_adds_only_what_rises_above_its_largest_row(tmp_path: Path) -> None:
    with open_state(tmp_path) as state:
        assert state.observe("k", (3, 5, 100, 20)) == (3, 5, 100, 20)
        assert state.observe("k", (3, 40, 100, 20)) == (0, 35, 0, 0)
        assert state.observe("k", (3, 5, 100, 20)) is None  # a smaller repeat adds nothing
        assert state.observe("other", (0, 0, 0, 0)) == (0, 0, 0, 0)
        state.commit()
    with open_state(tmp_path) as state:  # committed, so kept
        assert state.observe("k", (3, 40, 100, 20)) is None


def test_a_damaged_state_file_is_made_again(tmp_path: Path) -> None:
    path = state_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)

    with open_state(tmp_path) as state:
        assert state.sources("claude-code") == []
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    assert path.stat().st_mode & 0o777 == 0o600


def test_one_importer_holds_the_state_at_a_time(tmp_path: Path) -> None:
    from pentrace.errors import TraceLockedError

    with open_state(tmp_path), pytest.raises(TraceLockedError, match="agents import state"):
        open_state(tmp_path, wait=0.05)


def test_a_symlink_loop_is_walked_once_and_reported(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "s.jsonl").write_text("{}\n")
    (tmp_path / "a" / "b" / "loop").symlink_to(tmp_path / "a")
    report = Report("claude-code")

    files = list(walk_files(tmp_path, (".jsonl",), report))

    assert files == [tmp_path / "a" / "b" / "s.jsonl"]
    assert any("symlink loop" in warning for warning in report.warnings)
