"""The shard side of the search index: which bytes of a session's shards are new.

Traces are append-only, so the index remembers, per shard, the byte offset it
read up to, the line count there, the shard's size and mtime, and the last
bytes before the offset.  :func:`appendable` says whether a session only grew
since (then reading resumes at the offsets); anything else means the session
is indexed again from scratch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.domain.records import MalformedLine, decode_line
from pentrace.infrastructure.storage.layout import SessionRef
from pentrace.projections.search_docs import SearchDoc, SearchDocFold

__all__ = ["ShardState", "appendable", "read_docs", "stat_shards", "unchanged"]

_CHUNK: Final = 4 * 1024 * 1024
_TAIL: Final = 32


@dataclass
class ShardState:
    """What the index knows about one shard (see the module docstring)."""

    path: str
    idx: int
    size: int
    mtime_ns: int
    offset: int = 0
    lines: int = 0
    tail: bytes = b""


def stat_shards(ref: SessionRef) -> list[ShardState] | None:
    """The session's shards as they are on disk now; ``None`` if one vanished meanwhile."""
    shards = []
    for shard in sorted(ref.shards, key=lambda s: (s.index, str(s.path))):
        try:
            stat = os.stat(shard.path)
        except FileNotFoundError:
            return None  # deleted while we looked: the next refresh sees the new state
        shards.append(ShardState(str(shard.path), shard.index, stat.st_size, stat.st_mtime_ns))
    return shards


def unchanged(stored: list[ShardState], disk: list[ShardState]) -> bool:
    """True when every shard has the path, size and mtime the index stored."""
    return [(s.path, s.size, s.mtime_ns) for s in stored] == [
        (s.path, s.size, s.mtime_ns) for s in disk
    ]


def appendable(stored: list[ShardState], disk: list[ShardState]) -> bool:
    """Only the last stored shard grew and new shards follow it; its indexed bytes are intact."""
    if not stored or len(disk) < len(stored):
        return False
    for old, new in zip(stored[:-1], disk, strict=False):
        if (old.path, old.size, old.mtime_ns) != (new.path, new.size, new.mtime_ns):
            return False
    last, now = stored[-1], disk[len(stored) - 1]
    if last.path != now.path or now.size < last.offset:
        return False
    return _tail_of(Path(now.path), last.offset) == last.tail


def _tail_of(path: Path, offset: int) -> bytes:
    start = max(0, offset - _TAIL)
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            return handle.read(offset - start)
    except OSError:
        return b"\0"  # unreadable now: never equal to a stored tail


def read_docs(shard: ShardState, fold: SearchDocFold) -> Iterator[SearchDoc]:
    """Documents from ``shard.offset`` up to its last newline; updates offset, lines and tail."""
    path = Path(shard.path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        handle.seek(shard.offset)
        remaining = shard.size - shard.offset
        carry = b""
        while remaining > 0:
            chunk = handle.read(min(_CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            pieces = (carry + chunk).split(b"\n")
            carry = pieces.pop()
            for piece in pieces:
                shard.lines += 1
                shard.offset += len(piece) + 1
                try:
                    record = decode_line(piece, shard.lines)
                except MalformedLine:
                    continue  # not a record: positions skip it, as the reader does
                if record is None:
                    continue
                doc = fold.record(record)
                if doc is not None:
                    yield doc
    shard.tail = _tail_of(path, shard.offset)
