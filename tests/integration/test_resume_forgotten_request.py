"""A request left open by a dead process, forgotten by resume, and then a completed compaction.

Resume forgets the open request in memory only (nothing is written), so until
the next ``request_begin`` the trace still reads it as open.  A completed
compaction closes the context (the next record opens a new shard, and resume
reads that shard alone): the forgotten request must not be open after it,
neither in the live session, nor in a checkpoint, nor in a rebuild from the
trace.  Found by tests/property/test_resume_legality.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pentrace.errors import RequestNotOpenError
from pentrace.infrastructure.trace.reader import read_shard
from pentrace.projections.resume import resume_trace
from tests.integration.test_resume_newest_shard import (
    cp_path,
    full_state,
    new_app,
    one_request,
    resume,
    shard,
    state_of,
)
from tests.integration.test_session_application import start


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def forgotten_then_compacted(data: Path, workspace: Path) -> tuple[str, dict[str, Any]]:
    """The process dies inside a request; the resumed session runs a discard compaction."""
    app = new_app(data)
    handle = start(app, workspace)
    one_request(handle, "call_0")
    handle.record_user_input("task open")
    handle.begin_request()
    handle.record_tool_call("exec_command", '{"cmd":"sleep 9"}', "call_open")
    handle.save()
    session_id = handle.session_id
    app.close()  # the process dies here: the request stays open in the trace
    app = new_app(data)
    try:
        handle = app.resume_session(session_id).handle
        assert not handle.session.open_request  # resume forgot it, in memory only
        handle.begin_compaction("context", "discard")
        handle.end_compaction("completed")
        handle.save()  # a rotation is pending: the next shard's checkpoint is written now
        return session_id, state_of(handle.session)
    finally:
        app.close()


def test_after_a_completed_compaction_a_rebuild_equals_the_live_session(
    tmp_path: Path, workspace: Path
) -> None:
    data = tmp_path / "data"
    session_id, live = forgotten_then_compacted(data, workspace)
    assert (live["open_request"], live["open_calls"]) == (False, {})
    assert full_state(data, session_id) == live  # one fold of the trace agrees
    # The checkpoint written ahead of the rotation holds the fold's state too.
    assert cp_path(data, session_id).exists()
    app = new_app(data)
    try:
        handle = app.resume_session(session_id).handle
        one_request(handle, "after_0")  # the first record opens shard 2
        handle.save()
        continued = state_of(handle.session)
    finally:
        app.close()
    assert shard(data, session_id, 2).exists()
    from_checkpoint, _, _ = resume(data, session_id)
    cp_path(data, session_id).unlink()
    assert full_state(data, session_id) == from_checkpoint == continued


def test_a_rebuild_after_losing_the_new_shard_cannot_end_the_forgotten_request(
    tmp_path: Path, workspace: Path
) -> None:
    data = tmp_path / "data"
    session_id, _ = forgotten_then_compacted(data, workspace)
    app = new_app(data)
    try:
        handle = app.open_session(session_id)
        handle.record_subagent("session-2026-07-18-11-11-00-0000abcd")  # opens shard 2
        handle.save()
    finally:
        app.close()
    newest = shard(data, session_id, 2)
    newest.write_bytes(b"")  # a crash lost all of shard 2, even its session_meta copy
    for checkpoint in (True, False):
        if not checkpoint:
            cp_path(data, session_id).unlink()
        app = new_app(data)
        try:
            handle = app.open_session(session_id)  # resume refuses; the session is rebuilt
            assert not handle.session.open_request
            with pytest.raises(RequestNotOpenError, match="expected an open request"):
                handle.end_request("completed")
        finally:
            app.close()
        # Nothing reached shard 2: no request_end without its request_begin, no phantom turn.
        assert newest.read_bytes() == b""
        assert resume_trace(read_shard(newest)).session_turns == 0
