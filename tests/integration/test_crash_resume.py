"""SIGKILL a real process that records a session, then resume: what was saved survives, legally.

The child (this module run with ``python -m``) drives the Session aggregate
through SessionApplication (the trace store), saving after every
command and printing ``ACK <records>`` once each save returns.  The parent kills
it with SIGKILL after a drawn number of acknowledgements, while it keeps
writing, then checks that:

* the lock died with the child: a new application takes the session at once;
* the disk holds a prefix of the lines the commands render, at least every
  acknowledged one, and no other record (no placeholder ever);
* resuming the latest shard gives what the round model says, with every tool
  call answered exactly once;
* the session continues after the crash, and resuming again still matches.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace import testing as pt
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.reader import read_shard
from pentrace.projections.resume import resume_trace
from pentrace.testing import commands as c
from pentrace.testing.render import DEFAULT_SESSION_ID, DEFAULT_START
from tests.property.resume_model import (
    check_pairing,
    expected_resume,
    shown_messages,
    surviving_records,
)

PROJECT, AGENT, SID = "proj", "agent", DEFAULT_SESSION_ID
REPO = Path(__file__).resolve().parents[2]


def _application(root: Path) -> SessionApplication:
    return SessionApplication(root, PROJECT, AGENT, durability=Durability.PER_REQUEST)


def _encode(commands: list[c.Command]) -> str:
    return json.dumps([[type(cmd).__name__, dataclasses.asdict(cmd)] for cmd in commands])


def _decode(text: str) -> list[c.Command]:
    commands: list[c.Command] = []
    for name, fields in json.loads(text):
        cls = getattr(c, name)
        if cls is c.TokenUsage:
            fields = {k: c.TokenCounts(**v) for k, v in fields.items()}
        if cls is c.StartSession:
            fields["tools"] = tuple(fields["tools"])
        commands.append(cls(**fields))
    return commands


def child_main(root: str, commands_file: str) -> None:
    """Record every command, saving and acknowledging each; then wait to be killed."""
    app = _application(Path(root))
    commands = _decode(Path(commands_file).read_text())
    first = commands[0]
    assert isinstance(first, c.StartSession)
    session = pt.start_session(first, session_id=SID, now=pt.command_time(DEFAULT_START, 0))
    app.save(session)
    print(f"ACK {session.version}", flush=True)
    for number, command in enumerate(commands[1:], start=1):
        pt.apply_command(session, command, now=pt.command_time(DEFAULT_START, number))
        app.save(session)
        print(f"ACK {session.version}", flush=True)
    print("DONE", flush=True)
    sys.stdin.readline()


def _run_and_kill(root: Path, commands: list[c.Command], kill_after: int) -> int:
    """Start the child, SIGKILL it after ``kill_after`` ACKs; return the last ACK seen."""
    spec = root.parent / "commands.json"
    spec.write_text(_encode(commands))
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.test_crash_resume", str(root), str(spec)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked = 0
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("ACK "):
                acked = int(line.split()[1])
                kill_after -= 1
            if kill_after <= 0 or line.startswith("DONE"):
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        _, errors = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, errors
    return acked


def _disk(root: DataRoot) -> list[bytes]:
    return [shard.path.read_bytes() for shard in root.find_shards(PROJECT, AGENT, SID)]


def _check_resume(root: DataRoot) -> None:
    latest = root.latest_shard(PROJECT, AGENT, SID)
    assert latest is not None
    result = resume_trace(read_shard(latest.path))
    expected = expected_resume(latest.path.read_bytes())
    assert shown_messages(result.history) == expected.history
    assert shown_messages(result.carry_over) == expected.carry_over
    assert result.session_tokens == expected.tokens
    assert result.session_turns == expected.turns
    check_pairing(result.history + result.carry_over)


@settings(max_examples=5, deadline=None)
@given(
    generated=pt.session_commands(max_episodes=8, subagents=False),
    kill_after=st.integers(1, 40),
)
def test_a_session_killed_mid_write_resumes_legally_and_continues(
    generated: list[c.Command], kill_after: int
) -> None:
    with tempfile.TemporaryDirectory(prefix="pentrace-crash-") as tmp:
        root = DataRoot(Path(tmp) / "data")
        # Resume checks that the workspace exists, so the session gets a real one.
        (Path(tmp) / "work").mkdir()
        commands = [c.StartSession(workspace=str(Path(tmp) / "work")), *generated[1:]]
        acked = _run_and_kill(root.path, commands, kill_after)

        rendered = list(itertools.chain.from_iterable(pt.render_shards(commands, session_id=SID)))
        on_disk = [line for data in _disk(root) for line, _ in surviving_records(data)]
        assert len(on_disk) >= acked
        assert on_disk == rendered[: len(on_disk)]
        assert all(data.endswith(b"\n") or data == b"" for data in _disk(root)[:-1])

        _check_resume(root)

        # The kernel dropped the dead child's lock: the session resumes and continues at once.
        app = _application(root.path)
        try:
            resumed = app.resume_session(SID)
            assert resumed.handle.session.compaction is None
            _check_resume(root)
            session = resumed.handle.session
            now = pt.command_time(DEFAULT_START, len(commands) + 1)
            for command in (c.UserInput("after the crash"), c.BeginRequest(),
                            c.AssistantText("resumed"), c.EndRequest("completed")):  # fmt: skip
                pt.apply_command(session, command, now=now)
            app.save(session)
            again = app.resume_session(SID).result
        finally:
            app.close()
        _check_resume(root)
        assert again.history[-1].payload().get("text") == "resumed"


if __name__ == "__main__":
    child_main(*sys.argv[1:3])
