"""Reading the agents' stores: source items, values and names (issue #28).

A source is read item by item (:class:`Item`): a line of a JSONL file
(:func:`line_items`: complete lines only, in bounded memory), a message of
a JSON file, a database row. Values are parsed strictly (:func:`parse_json`);
what is not JSON is :data:`MALFORMED`, never dropped. The small helpers
normalise what the agents write (timestamps, counts, texts) and name a
workspace's project (ADR 0094).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from pentrace.domain.json_codec import JsonEncoder, loads_strict
from pentrace.domain.omnimessage import format_timestamp
from pentrace.domain.records import JS_WHITESPACE

if TYPE_CHECKING:
    from pentrace.infrastructure.agents.core import ImportReport

__all__ = [
    "MALFORMED",
    "MAX_LINE",
    "Item",
    "as_dict",
    "as_str",
    "count",
    "file_identity",
    "line_items",
    "normal_stamp",
    "parse_json",
    "project_name",
    "store_home",
    "text_of",
    "walk_files",
]

#: A source line longer than this is reported and kept as its length only.
MAX_LINE: Final = 64 * 1024 * 1024
_READ_CHUNK: Final = 1024 * 1024
_CANONICAL: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_encoder: Final = JsonEncoder()
_decoder: Final = msgspec.json.Decoder()


class _Malformed:
    """The value of a source item that is not JSON."""

    def __repr__(self) -> str:
        return "MALFORMED"


MALFORMED: Final = _Malformed()


class Item(NamedTuple):
    """One source item: a line (``at`` its 1-based number, ``end`` the offset just past its
    bytes, before its newline; ``next`` where reading goes on) or a record (``at`` its id,
    ``end`` 0).  ``value`` is the parsed JSON or :data:`MALFORMED`; ``size`` is the item's
    length when it was too long to keep."""

    raw: bytes
    at: int | str
    end: int
    value: Any
    size: int = 0
    next: int = 0


def parse_json(raw: bytes) -> Any:
    """The JSON value of ``raw`` (strict: no NaN), or :data:`MALFORMED`."""
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        return loads_strict(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return MALFORMED


def line_items(path: Path, start: int, line: int, *, limit: int = MAX_LINE) -> Iterator[Item]:
    """The complete lines of ``path`` from byte ``start`` (line ``line`` is the last one read).

    Memory stays bounded: a line longer than ``limit`` is skipped to its newline
    and yielded with ``size`` set and no bytes.  An unterminated last line is
    yielded only when it parses as a JSON object (a writer that never ends its
    file with a newline); a torn tail waits for the next pass.  Blank lines
    take a number and are not yielded.
    """
    with open(path, "rb", buffering=0) as handle:
        offset = start
        pending = bytearray()
        skipping = 0  # bytes of an oversized line skipped so far
        if start > 0:
            handle.seek(start - 1)
            if handle.read(1) != b"\n":
                # The cursor sits after an unterminated last line read as a whole object:
                # the newline that follows ends that line, which is not read again.
                skipping = limit + 1
                line -= 1
        handle.seek(start)
        first_line = line + 1
        while chunk := handle.read(_READ_CHUNK):
            begin = 0
            while True:
                newline = chunk.find(b"\n", begin)
                if newline < 0:
                    rest = len(chunk) - begin
                    if skipping or len(pending) + rest > limit:
                        skipping += len(pending) + rest
                        pending.clear()
                    else:
                        pending += chunk[begin:]
                    break
                line += 1
                piece = chunk[begin:newline]
                end = offset + newline
                if skipping > limit and line == first_line:
                    skipping = 0  # the end of the line the cursor sits in
                    pending.clear()
                elif skipping or len(pending) + len(piece) > limit:
                    size = skipping + len(pending) + len(piece)
                    skipping = 0
                    pending.clear()
                    yield Item(b"", line, end, MALFORMED, size, end + 1)
                else:
                    raw = bytes(pending + piece) if pending else piece
                    pending.clear()
                    if raw.strip(b" \t\r"):
                        yield Item(raw, line, end, parse_json(raw), 0, end + 1)
                begin = newline + 1
            offset += len(chunk)
        if pending and not skipping:
            raw = bytes(pending)
            value = parse_json(raw)
            if isinstance(value, dict):
                yield Item(raw, line + 1, offset, value, 0, offset)


def walk_files(
    base: Path, suffixes: tuple[str, ...], report: ImportReport | None = None
) -> Iterator[Path]:
    """Every file under ``base`` whose name ends with one of ``suffixes``, in path order.

    A symlink to a folder is followed once: a folder reached again (a loop) is
    reported and not entered.  A folder that cannot be listed is reported and
    skipped.
    """
    found: list[str] = []
    seen: set[tuple[int, int]] = set()
    stack = [str(base)]
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            if report is not None:
                report.warn(f"loop:{folder}", f"{folder}: a folder reached again (symlink loop); "
                            "not entered twice")  # fmt: skip
            continue
        seen.add((info.st_dev, info.st_ino))
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as exc:
            if report is not None:
                report.warn(f"list:{folder}", f"cannot list {folder}: {exc.strerror or exc}; "
                            "skipped")  # fmt: skip
            continue
        for entry in listed:
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                continue
            if is_dir:
                stack.append(entry.path)
            elif entry.name.endswith(suffixes):
                found.append(entry.path)
    for path in sorted(found):
        yield Path(path)


def normal_stamp(value: Any) -> str | None:
    """A source timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC), or None when unreadable.

    Accepts ISO 8601 text (naive means UTC) and epoch numbers (seconds, or
    milliseconds above 1e11).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _CANONICAL.fullmatch(value):
        return value  # already what the trace writes (the common case): no parsing
    try:
        if isinstance(value, int | float):
            seconds = value / 1000 if abs(value) > 1e11 else value
            moment = datetime.fromtimestamp(seconds, UTC)
        elif isinstance(value, str) and 10 <= len(value) <= 64:
            moment = datetime.fromisoformat(value.strip(JS_WHITESPACE))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        else:
            return None
        stamp: str = format_timestamp(moment)
        return stamp
    except (ValueError, OverflowError, OSError):
        return None


def project_name(workspace: str) -> str:
    """The project a workspace path files under (ADR 0094): every character outside
    ``[A-Za-z0-9]`` becomes ``-`` (Claude Code's own folder rule), leading dashes dropped."""
    spelled = "".join(ch if ch.isascii() and ch.isalnum() else "-" for ch in workspace)
    spelled = spelled.lstrip("-")[:180]
    return spelled or "no-workspace"


def text_of(value: Any) -> str:
    """The text of a content value: a string, or the ``text`` of a list of blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    if value is None:
        return ""
    text: str = _encoder.encode(value).decode("utf-8", "surrogatepass")
    return text


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any, default: str = "") -> str:
    """``value`` when it is a non-empty string, else ``default``."""
    return value if isinstance(value, str) and value else default


def count(value: Any) -> int:
    """A token count: a non-negative integer, 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        return 0
    return min(int(value), 2**62)


def store_home(path: Path | str, folders: tuple[str, ...]) -> str:
    """The agent's own folder a source file sits in: the parent of the nearest folder named
    one of ``folders`` (``~/.claude`` for ``projects``), else the file's folder.  It names a
    foreign session's ``agent_state`` and stays the same when the agent moves the file."""
    parts = Path(path).parts
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] in folders:
            return str(Path(*parts[:index]))
    return str(Path(path).parent)


def file_identity(path: Path) -> tuple[int, int, int]:
    """``(device, inode, size)`` of a source file (it follows a symlink)."""
    status = os.stat(path)
    return status.st_dev, status.st_ino, status.st_size
