"""Two processes, one session, through SessionApplication: the second writer is refused.

``test_two_writers.py`` checks the shard writer's lock; this checks the path a
harness uses (the application's session lock under ``traces/.locks/``) across
real processes: refused while the holder lives, free once it is SIGKILLed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pentrace.errors import TraceLockedError
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.trace.durability import Durability
from tests.support import record_answered_turn, start_sample_session

REPO = Path(__file__).resolve().parents[2]
SID = "session-2026-11-29-10-00-00-0123abcd"


def _application(root: Path) -> SessionApplication:
    return SessionApplication(root, "proj", "agent", durability=Durability.NONE)


def child_main(root: str) -> None:
    """Start the session, write one request, say READY, and hold the session until killed."""
    app = _application(Path(root))
    handle = start_sample_session(app, session_id=SID)
    record_answered_turn(handle, "from the child", "child text")
    print("READY", flush=True)
    sys.stdin.readline()


def test_a_second_process_is_refused_naming_the_holder_until_it_dies(tmp_path: Path) -> None:
    root = tmp_path / "data"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.test_two_applications", str(root)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    app = _application(root)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "READY\n"
        before = app.trace_path(SID).read_bytes()

        handle = app.open_session(SID)
        handle.record_user_input("from the parent")
        with pytest.raises(TraceLockedError, match=rf"session {SID} .*held by pid {child.pid} "):
            handle.save()
        assert app.trace_path(SID).read_bytes() == before

        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=60)
        handle = app.open_session(SID)
        handle.record_user_input("from the parent")
        handle.save()
        lines = app.trace_path(SID).read_bytes().splitlines()
        assert app.trace_path(SID).read_bytes().startswith(before)
        assert b"from the parent" in lines[-1]
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.communicate(timeout=60)
        app.close()


if __name__ == "__main__":
    child_main(sys.argv[1])
