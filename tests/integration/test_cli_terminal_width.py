"""``list`` (once ``sessions list``) at a real terminal of 80 and 60 columns: ids are never cut."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.integration.cli_sessions_corpus import build_corpus

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")


def _screen(root: Path, columns: int, *args: str) -> str:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("PENGUIN_HOME", "COLUMNS", "LINES")}
    env["TERM"] = "xterm"  # rich assumes 80 columns on a "dumb" terminal
    env["NO_COLOR"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), *args],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen.extend(chunk)
            elif process.poll() is not None:
                break
        assert process.wait(timeout=60) == 0, seen.decode(errors="replace")
    finally:
        os.close(master)
    # Styles (bold headers) are escape sequences, not columns.
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode("utf-8", errors="replace"))


@pytest.mark.parametrize("columns", [80, 60])
def test_session_ids_are_never_cut_at_a_narrow_terminal(tmp_path: Path, columns: int) -> None:
    ids = build_corpus(tmp_path)
    screen = _screen(tmp_path, columns, "sessions", "list")

    for session_id in ids:
        assert session_id in screen, screen
    assert "…" not in screen
    assert all(len(line) <= columns for line in screen.splitlines()), screen
    # Columns went instead of the ids; the owner, which tells a shared id apart, goes
    # last (issue #31: it once went first): at 60 only the owner stays beside them.
    header = next(line for line in screen.splitlines() if "session" in line and "┃" in line)
    assert "project/agent" in header
    if columns == 80:
        assert "tokens" in header
        assert "cost" in header
    else:
        assert "tokens" not in header


def test_the_owner_column_goes_first_when_every_session_has_the_same_owner(
    tmp_path: Path,
) -> None:
    build_corpus(tmp_path)
    screen = _screen(tmp_path, 80, "list", "--project", "p1")

    header = next(line for line in screen.splitlines() if "session" in line and "┃" in line)
    assert "project/agent" not in header
    assert "tokens" in header
    assert "2 session(s) of p1/a1" in screen  # the title names the one owner


def test_search_keeps_the_short_id_and_the_snippet_at_60_columns(tmp_path: Path) -> None:
    build_corpus(tmp_path)
    screen = _screen(tmp_path, 60, "search", "files")

    rows = [line for line in screen.splitlines() if line.startswith("│ ")]
    assert rows, screen
    # The owner form project/agent/<short id> (#13), never cut.
    owner_form = re.compile(r"│ [^/\s]+/[^/\s]+/[0-9a-f]{8} ")
    assert all(owner_form.match(row) for row in rows if row[2] != " "), screen
    header = next(line for line in screen.splitlines() if "snippet" in line)
    assert "session" in header
    assert "time" not in header  # left out first, so the snippet keeps its room
    assert all(len(line) <= 60 for line in screen.splitlines() if line.startswith(("│", "┃")))
