"""Every command that takes a path refuses a FIFO, /dev/zero, a folder or a symlink to a FIFO
at once - never hangs, never reads a device until memory runs out - with ``error:`` naming it.

Each run is a real ``pentrace`` process with a short timeout: a hang fails the test.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from pentrace.infrastructure.storage.inputs import MAX_SMALL_INPUT
from pentrace.testing import StartSession, UserInput, write_trace
from tests.support import clean_env, run_pentrace

SID = "session-2026-11-29-10-00-00-0123abcd"
TIMEOUT = 20


def make_fifo(tmp: Path) -> Path:
    path = tmp / "pipe.jsonl"
    os.mkfifo(path)
    return path


def make_dir(tmp: Path) -> Path:
    path = tmp / "folder.jsonl"
    path.mkdir()
    return path


def make_link_to_fifo(tmp: Path) -> Path:
    target = tmp / "hidden-pipe"
    os.mkfifo(target)
    link = tmp / "link.jsonl"
    link.symlink_to(target)
    return link


def dev_zero(_tmp: Path) -> Path:
    return Path("/dev/zero")


INPUTS: dict[str, Callable[[Path], Path]] = {
    "fifo": make_fifo,
    "dev-zero": dev_zero,
    "folder": make_dir,
    "symlink-to-fifo": make_link_to_fifo,
}
# Outputs are never tried on /dev/zero: a broken check would replace a device node.
OUTPUTS = {name: make for name, make in INPUTS.items() if name != "dev-zero"}


def pentrace(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pentrace(root, *args, env=clean_env(), timeout=TIMEOUT)


KIND_NAMED = {
    "fifo": "a FIFO",
    "symlink-to-fifo": "a FIFO",
    "dev-zero": "a character device",
    "folder": "a folder",
    "file": "a regular file",
}


def assert_refused(done: subprocess.CompletedProcess[str], path: Path, kind: str) -> None:
    """Exit 1 or 2, one ``error:`` line naming the path and what it is, no traceback."""
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert done.stderr.startswith("error: "), done.stderr
    assert str(path) in done.stderr
    assert KIND_NAMED[kind] in done.stderr.splitlines()[0]
    assert "Traceback" not in done.stderr


def with_session(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_trace(data, [StartSession(), UserInput("hi")], session_id=SID)
    return data


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_resume_check_refuses_a_path_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = INPUTS[kind](tmp_path)
    assert_refused(pentrace(tmp_path / "data", "resume-check", str(path)), path, kind)


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_import_refuses_a_path_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    path = INPUTS[kind](tmp_path)
    done = pentrace(tmp_path / "data", "import", str(path), "-p", "proj", "-a", "agent")
    assert_refused(done, path, kind)


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_a_price_table_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = INPUTS[kind](tmp_path)
    root = with_session(tmp_path)
    assert_refused(pentrace(root, "stats", "cost", "--prices", str(path)), path, kind)


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_a_token_file_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = INPUTS[kind](tmp_path)
    root = tmp_path / "data"
    root.mkdir(mode=0o700)  # serve refuses a missing root before it reads the token
    done = pentrace(root, "serve", "--port", "0", "--token-file", str(path))
    assert_refused(done, path, kind)


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
@pytest.mark.parametrize("command", ["export", "archive", "report"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_alone(
    tmp_path: Path, kind: str, command: str
) -> None:
    path = OUTPUTS[kind](tmp_path)
    root = with_session(tmp_path)
    args = {
        "export": ["export", SID, "-o", str(path)],
        "archive": ["export", SID, "--archive", "-o", str(path)],
        "report": ["report", SID, "-o", str(path)],
    }[command]
    before = os.lstat(path)
    assert_refused(pentrace(root, *args), path, kind)
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_data_root_that_is_not_a_folder_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "root"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(b"not a folder")
    assert_refused(pentrace(path, "sessions", "list"), path, kind)


def test_an_input_that_must_fit_in_memory_stops_at_the_documented_limit(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b"# a comment line that pads the table to over a mebibyte\n" * 20_000)
    done = pentrace(with_session(tmp_path), "stats", "cost", "--prices", str(prices))
    assert done.returncode in (1, 2)
    assert done.stderr.startswith(f"error: price table {prices} ")
    assert f"larger than {MAX_SMALL_INPUT} bytes" in done.stderr
