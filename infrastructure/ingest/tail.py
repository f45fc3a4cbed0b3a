"""New complete lines of a shard, from a byte offset on.

A line is complete when its ``\\n`` has arrived; the bytes after the last
``\\n`` wait for the next read.  A *sealed* shard (one with a later shard of
the same session beside it, so its writer has moved on) gives its unterminated
tail as a last line too, as the trace reader does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.errors import NotRegularFileError, TraceError
from pentrace.infrastructure.storage.inputs import open_regular

__all__ = ["READ_LIMIT", "TailLine", "file_identity", "read_tail"]

READ_LIMIT: Final = 4 * 2**20


@dataclass(frozen=True, slots=True)
class TailLine:
    """One line: its 1-based number in the shard, its bytes and the offset just after it."""

    line: int
    raw: bytes
    end: int


def read_tail(
    path: Path, offset: int, line: int, *, sealed: bool, limit: int = READ_LIMIT
) -> list[TailLine]:
    """Complete lines from ``offset`` on (the first is line ``line + 1``), about ``limit`` bytes.

    A line longer than ``limit`` is read whole.  A missing file gives no lines.
    """
    try:
        with open_regular(path, "trace file") as handle:
            handle.seek(offset)
            data = handle.read(limit)
            while data and b"\n" not in data:
                more = handle.read(limit)
                if not more:
                    break
                data += more
            at_end = offset + len(data) >= os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        return []
    except NotRegularFileError as exc:
        raise TraceError(
            f"cannot read trace file {path}: it is {exc.kind}, expected a regular file",
            hint="move it out of the traces folder",
        ) from None
    except OSError as exc:
        raise TraceError(
            f"cannot read trace file {path}: {exc.strerror or type(exc).__name__}",
            hint="check the file's permissions",
        ) from exc
    pieces = data.split(b"\n")
    tail = pieces.pop()
    lines: list[TailLine] = []
    end = offset
    for piece in pieces:
        end += len(piece) + 1
        line += 1
        lines.append(TailLine(line, piece, end))
    if tail and sealed and at_end:
        lines.append(TailLine(line + 1, tail, end + len(tail)))
    return lines


def file_identity(path: Path) -> tuple[int, int, int] | None:
    """``(device, inode, size)`` of a file, or None when it is gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_size
