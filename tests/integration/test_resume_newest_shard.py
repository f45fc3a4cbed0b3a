"""Resume after a completed compaction reads only the newest shard when its checkpoint is valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eventsourcing.application import Repository

from pentrace.domain.session.aggregate import Session
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.trace.checkpoints import checkpoint_path
from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.reader import read_session
from tests.integration.test_session_application import Clock, start


def new_app(data: Path) -> SessionApplication:
    return SessionApplication(data, "proj", "agent", durability=Durability.NONE, clock=Clock())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def one_request(handle: Any, call_id: str, *, answer: bool = True) -> None:
    handle.record_user_input(f"task {call_id}")
    handle.begin_request()
    handle.record_tool_call("exec_command", '{"cmd":"true"}', call_id)
    if answer:
        handle.record_tool_output(call_id, "[no output]")
    handle.record_text("done")
    handle.end_request("completed")


@pytest.fixture
def rotated(tmp_path: Path, workspace: Path) -> tuple[Path, str]:
    """A session with two shards: 20 requests (one call left unanswered), a compaction, more."""
    app = new_app(tmp_path / "data")
    handle = start(app, workspace)
    for n in range(20):
        one_request(handle, f"call_{n}", answer=n != 7)
    handle.begin_compaction("manual", "discard")
    handle.begin_request()
    handle.end_request("completed")
    handle.end_compaction("completed")
    one_request(handle, "after_0")
    handle.save()
    assert handle.trace_path.name.endswith("_002.jsonl")
    session_id = handle.session_id
    app.close()
    return tmp_path / "data", session_id


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the shards the trace recorder reads (the real reader still does the work)."""
    names: list[str] = []

    def observed(shards: Any, **options: Any) -> Any:
        shards = list(shards)
        names.extend(ref.path.name for ref in shards)
        return read_session(shards, **options)

    monkeypatch.setattr("pentrace.infrastructure.eventstore.recorder.read_session", observed)
    return names


def state_of(session: Session) -> dict[str, Any]:
    state = {k: v for k, v in vars(session).items() if k != "_pending_events"}
    return {**state, "version": session.version}


def resume(data: Path, session_id: str) -> tuple[dict[str, Any], list[bytes], Path]:
    app = new_app(data)
    try:
        resumed = app.resume_session(session_id)
        lines = [record.raw for record in resumed.result.carry_over]
        return state_of(resumed.handle.session), lines, resumed.trace_path
    finally:
        app.close()


def full_state(data: Path, session_id: str) -> dict[str, Any]:
    """The state from the library's own rebuild over every shard (no checkpoint involved)."""
    app = new_app(data)
    try:
        session: Session = Repository.get(app.repository, session_id)
        return state_of(session)
    finally:
        app.close()


def shard(data: Path, session_id: str, index: int) -> Path:
    return next(data.rglob(f"{session_id}_{index:03d}.jsonl"))


def cp_path(data: Path, session_id: str) -> Path:
    return checkpoint_path(new_app(data).root, "proj", "agent", session_id, 2)


def test_completing_a_compaction_checkpoints_the_next_shard_and_resume_matches_a_full_rebuild(
    rotated: tuple[Path, str],
) -> None:
    data, session_id = rotated
    assert cp_path(data, session_id).exists()
    expected = full_state(data, session_id)
    with_checkpoint = resume(data, session_id)
    assert with_checkpoint[0] == expected
    assert expected["unanswered"] == {"call_7": None}
    cp_path(data, session_id).unlink()
    without = resume(data, session_id)
    assert without == with_checkpoint
    # The full read put the checkpoint back, and it matches again.
    assert cp_path(data, session_id).exists()
    assert resume(data, session_id) == with_checkpoint


def test_with_a_valid_checkpoint_only_the_newest_shard_is_read(
    rotated: tuple[Path, str], opened: list[str]
) -> None:
    data, session_id = rotated
    baseline = resume(data, session_id)
    opened.clear()
    # Same size, different bytes: the size check passes, so a read of it would show.
    older = shard(data, session_id, 1)
    older.write_bytes(b"x" * (older.stat().st_size - 1) + b"\n")
    again = resume(data, session_id)
    assert again == baseline
    assert opened
    assert set(opened) == {f"{session_id}_002.jsonl"}


def test_a_stale_checkpoint_falls_back_to_reading_every_shard(rotated: tuple[Path, str]) -> None:
    data, session_id = rotated
    older = shard(data, session_id, 1)
    # The older shard grew (a late line): its recorded size no longer matches.
    lines = older.read_bytes()
    older.write_bytes(lines + lines.splitlines(keepends=True)[-1])
    expected = full_state(data, session_id)
    got, _, _ = resume(data, session_id)
    assert got == expected
    assert got["version"] == expected["version"]


@pytest.mark.parametrize(
    "garbage",
    [b"", b"{", b'{"session_id": 1}', b"[]", b"\xff\xfe"],
    ids=["empty", "torn", "wrong-type", "not-an-object", "not-utf8"],
)
def test_a_corrupt_checkpoint_falls_back_and_is_rewritten(
    rotated: tuple[Path, str], garbage: bytes
) -> None:
    data, session_id = rotated
    baseline = resume(data, session_id)
    path = cp_path(data, session_id)
    path.write_bytes(garbage)
    assert resume(data, session_id) == baseline
    assert path.read_bytes() != garbage


def test_a_checkpoint_for_another_state_is_refused(rotated: tuple[Path, str]) -> None:
    data, session_id = rotated
    baseline = resume(data, session_id)
    path = cp_path(data, session_id)
    text = path.read_bytes()
    # "before" no longer matches the recorded version: refused, full read instead.
    path.write_bytes(text.replace(b'"before":', b'"before":1', 1))
    assert resume(data, session_id) == baseline


def test_writing_after_a_resume_from_a_checkpoint_continues_at_the_right_position(
    rotated: tuple[Path, str],
) -> None:
    data, session_id = rotated
    app = new_app(data)
    try:
        resumed = app.resume_session(session_id)
        before = resumed.handle.session.version
        one_request(resumed.handle, "after_1")
        resumed.handle.save()
    finally:
        app.close()
    newest = shard(data, session_id, 2)
    total = shard(data, session_id, 1).read_bytes().count(b"\n") + newest.read_bytes().count(b"\n")
    state = full_state(data, session_id)
    assert state["version"] == total > before
    got, _, _ = resume(data, session_id)
    assert got == state


def test_the_first_save_after_a_resume_counts_from_the_checkpoint_not_the_older_shards(
    rotated: tuple[Path, str], opened: list[str]
) -> None:
    data, session_id = rotated
    opened.clear()
    older = shard(data, session_id, 1)
    older.write_bytes(b"x" * (older.stat().st_size - 1) + b"\n")
    newest = shard(data, session_id, 2)
    app = new_app(data)
    try:
        handle = app.resume_session(session_id).handle
        before = handle.session.version
        lines_before = newest.read_bytes().count(b"\n")
        one_request(handle, "after_1")
        handle.save()  # a miscounted cursor would refuse this save
        assert handle.session.version - before == newest.read_bytes().count(b"\n") - lines_before
    finally:
        app.close()
    assert set(opened) == {newest.name}
