"""Write generated traces into a real data root, and damage them like a crash would."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Final

from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.storage.modes import make_private_dirs, open_private
from pentrace.testing.commands import Command
from pentrace.testing.render import DEFAULT_SESSION_ID, DEFAULT_START, render_shards

__all__ = ["DEFAULT_DAY", "truncate_file", "write_shards", "write_trace"]

DEFAULT_DAY: Final = DEFAULT_START.date()


def write_shards(
    root: DataRoot | Path,
    project: str,
    agent: str,
    session_id: str,
    shards: Iterable[Iterable[bytes]],
    *,
    day: date = DEFAULT_DAY,
) -> list[Path]:
    """Write each shard's lines (``\\n`` added where missing) as ``_001``, ``_002``, ...

    Returns the shard paths in index order.  Existing files are replaced.  Files
    and folders get pentrace's private modes, as the real writer gives them.
    """
    base = root if isinstance(root, DataRoot) else DataRoot(root)
    paths: list[Path] = []
    for index, lines in enumerate(shards, start=1):
        path = base.shard_path(project, agent, session_id, index, day)
        make_private_dirs(path.parent)
        body = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
        fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        paths.append(path)
    return paths


def write_trace(
    root: DataRoot | Path,
    commands: Iterable[Command],
    *,
    project: str = "default_project",
    agent: str = "default_agent",
    session_id: str = DEFAULT_SESSION_ID,
    day: date = DEFAULT_DAY,
) -> list[Path]:
    """Render ``commands`` (see :func:`~pentrace.testing.render.render_shards`) into the root."""
    shards = render_shards(commands, session_id=session_id)
    return write_shards(root, project, agent, session_id, shards, day=day)


def truncate_file(path: Path, offset: int) -> bytes:
    """Cut ``path`` at byte ``offset`` as a crash mid-write would; return the bytes cut off."""
    data = path.read_bytes()
    if not 0 <= offset <= len(data):
        raise ValueError(f"expected an offset in 0..{len(data)} for {path}, found {offset}")
    with path.open("r+b") as handle:
        handle.truncate(offset)
        os.fsync(handle.fileno())
    return data[offset:]
