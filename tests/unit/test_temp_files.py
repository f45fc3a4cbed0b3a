"""When a hidden temp file is stale: never while this process writes it, always once it is
left over, and only for the session it belongs to."""

from __future__ import annotations

import os
from pathlib import Path

from pentrace.infrastructure.storage.atomic import (
    in_flight,
    parse_temp_name,
    remove_stale,
    session_temps,
    temp_name,
)

SID = "session-2026-11-29-10-00-00-0123abcd"


def test_a_temp_name_parses_back_to_its_target_and_pid(tmp_path: Path) -> None:
    temp = temp_name(tmp_path / f"{SID}_002.jsonl")
    assert parse_temp_name(temp.name) == (f"{SID}_002.jsonl", os.getpid())
    assert parse_temp_name(f"{SID}_002.jsonl") is None
    assert parse_temp_name(f".{SID}_002.jsonl.tmp") is None


def test_a_temp_this_process_is_writing_is_never_stale_even_under_the_lock(
    tmp_path: Path,
) -> None:
    day = tmp_path / "traces" / "2026-11-29"
    day.mkdir(parents=True)
    temp = temp_name(day / f"{SID}_002.jsonl")
    with in_flight(temp):
        temp.write_bytes(b"{")
        assert remove_stale(tmp_path / "traces", SID, locked=True) == []
        assert temp.exists()
    # Once the block ends, a temp with our pid is a leftover of an earlier process.
    assert remove_stale(tmp_path / "traces", SID, locked=False) == [temp]


def test_temps_of_other_sessions_and_other_files_are_not_the_sessions(tmp_path: Path) -> None:
    day = tmp_path / "traces" / "2026-11-29"
    day.mkdir(parents=True)
    for name in (
        f".{SID}x_001.jsonl.1.tmp",  # another session id that starts the same
        f".{SID}_001.jsonl.torn.tmp",  # not a pid
        f".notes_{SID}_001.txt.1.tmp",  # not a shard
    ):
        (day / name).write_bytes(b"")
    mine = day / f".{SID}_001.jsonl.1.tmp"
    mine.write_bytes(b"")
    assert [temp.path for temp in session_temps(tmp_path / "traces", SID)] == [mine]
