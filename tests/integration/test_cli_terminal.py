"""Session commands at a real terminal (a pseudo-terminal): confirmation prompts and the pager."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.cli_sessions_corpus import SID_C, build_corpus

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")


def _read_until(fd: int, wanted: bytes, seen: bytearray, limit: float = 60.0) -> None:
    """Read the terminal until ``wanted`` shows up (or the process closes it)."""
    deadline = time.monotonic() + limit
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return  # the process exited and closed the terminal
            if not chunk:
                return
            seen.extend(chunk)


def _at_terminal(
    root: Path, *args: str, answer: bytes | None, env: dict[str, str]
) -> tuple[int, bytes]:
    master, slave = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    seen = bytearray()
    try:
        if answer is not None:
            _read_until(master, b"[y/N]", seen)
            os.write(master, answer)
        code = process.wait(timeout=120)
        _read_until(master, b"\0never\0", seen, limit=1.0)
    finally:
        os.close(master)
    return code, bytes(seen)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PENGUIN_HOME", "PENTRACE_DEBUG")}
    env["TERM"] = "dumb"
    return env


def test_delete_asks_at_a_terminal_and_no_keeps_the_session(tmp_path: Path) -> None:
    shards = build_corpus(tmp_path)[SID_C]

    code, screen = _at_terminal(tmp_path, "delete", "7777", answer=b"n\n", env=_env())

    assert code == 1
    assert f"Delete {SID_C} (p2/a2, 1 shard(s))? [y/N]".encode() in screen
    assert b"nothing deleted" in screen
    assert all(path.exists() for path in shards)


def test_delete_asks_at_a_terminal_and_yes_deletes(tmp_path: Path) -> None:
    shards = build_corpus(tmp_path)[SID_C]

    code, screen = _at_terminal(tmp_path, "delete", "7777", answer=b"y\n", env=_env())

    assert code == 0, screen
    assert f"deleted {SID_C}".encode() in screen
    assert not any(path.exists() for path in shards)


def test_replay_pages_at_a_terminal_and_no_pager_turns_it_off(tmp_path: Path) -> None:
    build_corpus(tmp_path)
    marker = tmp_path / "paged"
    pager = tmp_path / "pager.sh"  # click runs PAGER as a program, never through a shell
    pager.write_text(f"#!/bin/sh\ncat > {marker}\n")
    pager.chmod(0o755)
    env = {**_env(), "PAGER": str(pager)}

    code, _ = _at_terminal(tmp_path, "replay", "3f8a", answer=None, env=env)
    assert code == 0
    assert "user: list the files" in marker.read_text()

    marker.unlink()
    code, screen = _at_terminal(tmp_path, "replay", "3f8a", "--no-pager", answer=None, env=env)
    assert code == 0
    assert not marker.exists()
    assert b"user: list the files" in screen


def _piped(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run ``pentrace`` with stdout and stderr captured (pipes, not a terminal); must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), *args],
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_import_draws_a_progress_bar_at_a_terminal_and_none_when_piped(tmp_path: Path) -> None:
    build_corpus(tmp_path)
    exported = tmp_path / "c.jsonl"
    env = {**_env(), "TERM": "xterm"}  # rich draws no live display on a dumb terminal
    _piped(tmp_path, "export", "7777", "-o", str(exported), env=env)
    _piped(tmp_path, "delete", "7777", "--yes", env=env)

    code, screen = _at_terminal(
        tmp_path, "import", str(exported), "-p", "p2", "-a", "a2", answer=None, env=env
    )
    assert code == 0, screen
    assert b"importing" in screen
    assert f"imported {SID_C}".encode() in screen

    _piped(tmp_path, "delete", "7777", "--yes", env=env)
    piped = _piped(tmp_path, "import", str(exported), "-p", "p2", "-a", "a2", env=env)
    assert f"imported {SID_C}".encode() in piped.stdout
    assert b"importing" not in piped.stderr
    assert piped.stderr == b""
