"""Long tool output: a bounded head in the trace, the full text in the session scratchpad.

Follows PenguinHarness: output longer than ``max_chars`` (default 16,000;
``<= 0`` disables the cap) keeps its first ``max_chars`` characters, then
``"\\n[output truncated: exceeded N chars]"`` and ``"\\n[output archived: <abs
path>]"``.  The full output goes to
``scratchpad/<session>/truncated-tool-output/<tool>-<sha256(tool_call_id)[:16]>.log``
(mode 0600, created exclusively).  An archive larger than 8 MiB - 1 byte keeps
its first and last halves around the line ``[archive middle truncated]``, and
the note then reads ``[output archived (8 MiB limit; head and tail kept): <path>]``.
A failed archive write is reported in the output as
``[output archive failed: <errno name>]``, never silently dropped.

"Characters" are UTF-16 code units, as in JavaScript, so a trace written here
truncates where PenguinHarness would; unlike a plain JS slice, a cut never
splits a surrogate pair (the pair moves out of the head whole).

:func:`render_tool_output` and :func:`bound_archive_bytes` are pure; only
:func:`write_archive` (and :func:`bound_tool_output`, which calls it) touch disk.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pentrace.infrastructure.storage.modes import make_private_dirs, write_new_private

__all__ = [
    "ARCHIVE_GAP_MARKER",
    "ARCHIVE_LIMIT_BYTES",
    "DEFAULT_MAX_OUTPUT_CHARS",
    "ArchiveResult",
    "archive_file_name",
    "bound_archive_bytes",
    "bound_tool_output",
    "render_tool_output",
    "utf16_length",
    "utf16_prefix",
    "write_archive",
]

DEFAULT_MAX_OUTPUT_CHARS: Final = 16_000
# One byte under 8 MiB, as PenguinHarness (its file reader scans 8 MiB and needs to see EOF).
ARCHIVE_LIMIT_BYTES: Final = 8 * 1024 * 1024 - 1
ARCHIVE_GAP_MARKER: Final = "\n[archive middle truncated]\n"
_UNSAFE_TOOL_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    """Where the full output went: ``path`` when saved, else the errno name in ``failure``."""

    path: Path | None
    archive_truncated: bool = False
    failure: str | None = None


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units (JavaScript's ``String.length``)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of at most ``units`` UTF-16 code units that splits no character."""
    if units <= 0:
        return ""
    if text.isascii() or len(text) <= units // 2:
        return text[:units] if text.isascii() else text
    count = 0
    for position, char in enumerate(text):
        count += 2 if ord(char) > 0xFFFF else 1
        if count > units:
            return text[:position]
    return text


def _utf8(text: str) -> bytes:
    """UTF-8 as Node writes it: a lone surrogate becomes U+FFFD instead of failing."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return repaired.encode("utf-8")


def archive_file_name(tool_name: str, tool_call_id: str) -> str:
    """``<tool>-<sha256(tool_call_id)[:16]>.log``, the tool name made path-safe (48 chars max)."""
    # Each unsafe UTF-16 unit becomes one "_", as PenguinHarness's regex replace does.
    safe = _UNSAFE_TOOL_CHAR.sub(lambda m: "__" if ord(m.group()) > 0xFFFF else "_", tool_name)
    digest = hashlib.sha256(_utf8(tool_call_id)).hexdigest()[:16]
    return f"{safe[:48] or 'tool'}-{digest}.log"


def bound_archive_bytes(output: str, limit: int = ARCHIVE_LIMIT_BYTES) -> tuple[bytes, bool]:
    """The archive file's bytes and whether its middle was cut (head + gap marker + tail).

    Head and tail each get half of what the marker leaves of ``limit``, cut
    back to whole UTF-8 characters, so the file never exceeds ``limit`` bytes.
    """
    data = _utf8(output)
    if len(data) <= limit:
        return data, False
    marker = ARCHIVE_GAP_MARKER.encode()
    budget = max(0, limit - len(marker))
    head_end = budget // 2
    while head_end > 0 and (data[head_end] & 0xC0) == 0x80:
        head_end -= 1
    tail_start = len(data) - (budget - budget // 2)
    while tail_start < len(data) and (data[tail_start] & 0xC0) == 0x80:
        tail_start += 1
    return data[:head_end] + marker + data[tail_start:], True


def render_tool_output(
    output: str, *, max_chars: int = DEFAULT_MAX_OUTPUT_CHARS, archive: ArchiveResult | None
) -> str:
    """The text the model sees and the trace records: unchanged, or head plus notes."""
    if max_chars <= 0 or utf16_length(output) <= max_chars:
        return output
    notes = [f"[output truncated: exceeded {max_chars} chars]"]
    if archive is not None and archive.path is not None:
        if archive.archive_truncated:
            mib = math.ceil(ARCHIVE_LIMIT_BYTES / (1024 * 1024))
            notes.append(f"[output archived ({mib} MiB limit; head and tail kept): {archive.path}]")
        else:
            notes.append(f"[output archived: {archive.path}]")
    elif archive is not None:
        notes.append(f"[output archive failed: {archive.failure or 'UNKNOWN'}]")
    head = utf16_prefix(output, max_chars)
    return "\n".join([head, *notes]) if head else "\n".join(notes)


def write_archive(
    directory: Path,
    tool_name: str,
    tool_call_id: str,
    output: str,
    *,
    limit: int = ARCHIVE_LIMIT_BYTES,
) -> ArchiveResult:
    """Write the full (bounded) output to ``directory`` with mode 0600; never overwrite.

    A failure comes back as ``ArchiveResult(path=None, failure="ENOSPC")`` etc.
    and is logged (tool name and errno only, never output text): the output
    note tells the model, and the tool call itself must not fail for it.
    """
    data, cut = bound_archive_bytes(output, limit)
    path = directory.absolute() / archive_file_name(tool_name, tool_call_id)
    try:
        make_private_dirs(directory)
        write_new_private(path, data)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, "UNKNOWN")
        _log.warning("truncated output archive for tool %r failed (%s)", tool_name, code)
        return ArchiveResult(None, failure=code)
    return ArchiveResult(path, archive_truncated=cut)


def bound_tool_output(
    output: str,
    *,
    tool_name: str,
    tool_call_id: str,
    archive_dir: Path | None,
    max_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
) -> str:
    """Cap ``output`` for the trace, archiving the full text first when it is too long.

    ``archive_dir`` is the session's ``truncated-tool-output`` folder
    (``DataRoot.truncated_output_dir``); ``None`` truncates without archiving.
    """
    if max_chars <= 0 or utf16_length(output) <= max_chars:
        return output
    archive = None
    if archive_dir is not None:
        archive = write_archive(archive_dir, tool_name, tool_call_id, output)
    return render_tool_output(output, max_chars=max_chars, archive=archive)
