"""Long tool output: PenguinHarness's truncation markers and the 0600 head-and-tail archive."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from pentrace.infrastructure.trace.tool_output import (
    ARCHIVE_GAP_MARKER,
    ARCHIVE_LIMIT_BYTES,
    ArchiveResult,
    archive_file_name,
    bound_archive_bytes,
    bound_tool_output,
    render_tool_output,
    utf16_length,
    utf16_prefix,
    write_archive,
)


def test_output_within_the_cap_is_unchanged_and_not_archived(tmp_path: Path) -> None:
    output = "a" * 16_000
    archive_dir = tmp_path / "truncated-tool-output"
    got = bound_tool_output(
        output, tool_name="exec_command", tool_call_id="c1", archive_dir=archive_dir
    )
    assert got == output
    assert not archive_dir.exists()


def test_long_output_keeps_the_head_and_points_at_the_archive(tmp_path: Path) -> None:
    output = "".join(f"line {i}\n" for i in range(5000))
    archive_dir = tmp_path / "scratchpad" / "s1" / "truncated-tool-output"
    got = bound_tool_output(
        output,
        tool_name="exec_command",
        tool_call_id="call_9",
        archive_dir=archive_dir,
        max_chars=100,
    )
    digest = hashlib.sha256(b"call_9").hexdigest()[:16]
    archived = archive_dir / f"exec_command-{digest}.log"
    assert got == (
        output[:100]
        + "\n[output truncated: exceeded 100 chars]"
        + f"\n[output archived: {archived}]"
    )
    assert archived.is_absolute()
    assert archived.read_text() == output
    assert stat.S_IMODE(archived.stat().st_mode) == 0o600
    assert stat.S_IMODE(archive_dir.stat().st_mode) == 0o700


def test_the_default_cap_is_sixteen_thousand_chars() -> None:
    got = render_tool_output("b" * 16_001, archive=None)
    assert got == "b" * 16_000 + "\n[output truncated: exceeded 16000 chars]"


def test_a_cap_of_zero_or_less_disables_truncation() -> None:
    assert render_tool_output("c" * 20_000, max_chars=0, archive=None) == "c" * 20_000
    assert render_tool_output("c" * 20_000, max_chars=-1, archive=None) == "c" * 20_000


def test_an_archive_over_eight_mebibytes_keeps_head_and_tail_around_a_marker(
    tmp_path: Path,
) -> None:
    output = "H" * (5 * 1024 * 1024) + "M" * (2 * 1024 * 1024) + "T" * (5 * 1024 * 1024)
    result = write_archive(tmp_path, "exec_command", "call_big", output)
    assert result.path is not None
    assert result.archive_truncated
    data = result.path.read_bytes()
    assert len(data) == ARCHIVE_LIMIT_BYTES
    assert data.count(ARCHIVE_GAP_MARKER.encode()) == 1
    head, tail = data.split(ARCHIVE_GAP_MARKER.encode())
    assert set(head) == {ord("H")}
    assert set(tail) == {ord("T")}
    note = render_tool_output(output, max_chars=10, archive=result)
    assert note == (
        "HHHHHHHHHH\n[output truncated: exceeded 10 chars]"
        f"\n[output archived (8 MiB limit; head and tail kept): {result.path}]"
    )


def test_the_archive_cut_never_splits_a_utf8_character() -> None:
    output = "é" * 100  # two bytes each
    data, cut = bound_archive_bytes(output, limit=len(ARCHIVE_GAP_MARKER) + 21)
    assert cut
    head, tail = data.decode("utf-8").split(ARCHIVE_GAP_MARKER)
    assert head == "é" * 5
    assert tail == "é" * 5


def test_an_existing_archive_is_never_overwritten_and_the_failure_is_noted(tmp_path: Path) -> None:
    first = write_archive(tmp_path, "exec_command", "same", "first output")
    second = write_archive(tmp_path, "exec_command", "same", "second output")
    assert first.path is not None
    assert first.path.read_text() == "first output"
    assert second == ArchiveResult(None, failure="EEXIST")
    got = render_tool_output("z" * 50, max_chars=5, archive=second)
    assert got == "zzzzz\n[output truncated: exceeded 5 chars]\n[output archive failed: EEXIST]"


def test_without_an_archive_folder_only_the_truncation_note_is_added() -> None:
    got = bound_tool_output(
        "q" * 30, tool_name="t", tool_call_id="c", archive_dir=None, max_chars=8
    )
    assert got == "qqqqqqqq\n[output truncated: exceeded 8 chars]"


@pytest.mark.parametrize(
    ("tool", "expected_prefix"),
    [
        ("exec_command", "exec_command"),
        ("my tool/../x", "my_tool____x"),
        ("", "tool"),
        ("a" * 60, "a" * 48),
        ("t\U0001f600", "t__"),
    ],
)
def test_archive_names_are_path_safe_tool_names_and_a_hash_of_the_call_id(
    tool: str, expected_prefix: str
) -> None:
    digest = hashlib.sha256(b"call_1").hexdigest()[:16]
    assert archive_file_name(tool, "call_1") == f"{expected_prefix}-{digest}.log"


def test_characters_are_counted_in_utf16_units_and_pairs_are_never_split() -> None:
    face = "\U0001f600"
    assert utf16_length("ab" + face) == 4
    assert utf16_prefix("a" + face + "b", 2) == "a"
    assert utf16_prefix("a" + face + "b", 3) == "a" + face
    assert utf16_prefix("é" * 10, 4) == "é" * 4
    got = render_tool_output(face * 10, max_chars=5, archive=None)
    assert got == face * 2 + "\n[output truncated: exceeded 5 chars]"
