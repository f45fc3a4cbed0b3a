"""Read trace shards exactly as PenguinHarness does, streaming in constant memory.

The rules (``docs/trace-format.md``, reference ``resume-semantics.md``):

* the bytes are split on ``b"\\n"`` only - never ``splitlines`` - so ``\\r``,
  U+2028 and U+0085 stay inside a line;
* each line goes through :func:`pentrace.domain.records.decode_line` (JS trim,
  strict JSON) - in bulk, a chunk's lines at a time, through
  :func:`~pentrace.domain.records.decode_lines`, which applies the same rules;
  lines empty after the trim are ignored but keep their number;
* a malformed line that is followed by another non-empty line is skipped and
  reported (strict mode raises :class:`~pentrace.errors.TraceFormatError`) -
  unless it is a *healed torn fragment*: the unterminated prefix of a JSON
  object, directly followed by the next line (the ``\n`` a resuming writer
  puts before its first record).  That is legal history, skipped in every
  mode and counted in ``healed``;
* the *last* non-empty line, when it does not parse, is a torn tail left by a
  crash: it is dropped silently, even in strict mode, and noted as
  ``torn_tail`` so an audit can show it.

A failing line is therefore held back until the next non-empty line arrives:
one line of look-ahead.  Files are read in large chunks with the partial last
line carried over, so memory is bounded by the chunk size plus the longest line.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from pentrace.domain.json_prefix import is_object_prefix
from pentrace.domain.records import MalformedLine, TraceRecord, decode_line, decode_lines
from pentrace.errors import (
    NotFoundError,
    NotRegularFileError,
    TraceError,
    TraceFormatError,
    UsageError,
)
from pentrace.infrastructure.storage.inputs import open_regular
from pentrace.infrastructure.storage.layout import ShardRef
from pentrace.infrastructure.trace.report import BadLine, ParseReport

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "MAX_LINE_BYTES",
    "BadLine",
    "ParseReport",
    "read_records_from_bytes",
    "read_session",
    "read_shard",
]

# Measured (benchmarks/trace_read.py): 256 KiB chunks stay in cache and beat 1-4 MiB by ~5-10%.
DEFAULT_CHUNK_SIZE: Final = 256 * 1024
_MAX_REASON: Final = 160
# The longest line read: a JavaScript string (PenguinHarness) stops near 2**29 characters.
MAX_LINE_BYTES: Final = 512 * 1024 * 1024
# About one 256 KiB chunk of typical lines: the batch stays in cache between decode and fold.
_BATCH_LINES: Final = 1024


def _too_long(path: Path | None, offset: int) -> TraceError:
    where = f"trace file {path}" if path is not None else "the trace"
    return TraceError(
        f"{where}: the line starting at byte {offset} is longer than {MAX_LINE_BYTES} bytes "
        "without a newline; no record is that long",
        hint="check that this is a trace file (.jsonl); a record longer than this "
        "cannot be read by PenguinHarness either",
    )


def _reason(exc: Exception) -> str:
    # Decoder messages name positions and kinds of token, never the line's content.
    text = f"not valid JSON ({exc})"
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 4] + "...)"


def _complete_lines(
    chunks: Iterable[bytes], report: ParseReport, path: Path | None
) -> Iterator[list[bytes]]:
    """Lists of whole lines (split on ``\\n`` only); a partial line waits for the next chunk.

    A line longer than :data:`MAX_LINE_BYTES` stops the read with a
    :class:`~pentrace.errors.TraceError`: it would have to be held whole.
    """
    carry: list[bytes] = []
    carried = seen = 0
    for chunk in chunks:
        report.bytes_read += len(chunk)
        seen += len(chunk)
        pieces = chunk.split(b"\n")
        if carry:
            carry.append(pieces[0])
            carried += len(pieces[0])
            if len(pieces) == 1:
                if carried > MAX_LINE_BYTES:
                    raise _too_long(path, seen - carried)
                continue  # a line longer than a chunk: keep collecting its parts
            pieces[0] = b"".join(carry)
            carry = []
        last = pieces.pop()
        if last:
            carry, carried = [last], len(last)
        if len(pieces) <= _BATCH_LINES:
            yield pieces
            continue
        # Bytes already in memory arrive as one chunk: batch them so records stay cache-sized.
        for start in range(0, len(pieces), _BATCH_LINES):
            yield pieces[start : start + _BATCH_LINES]
    if carry:
        yield [b"".join(carry)]


def _parse(
    chunks: Iterable[bytes], path: Path | None, strict: bool, report: ParseReport
) -> Iterator[TraceRecord]:
    """The one reading loop: decode every line, holding one failing line back.

    Each chunk's lines are decoded in one batch; a batch with a malformed
    line, or one arriving while a failing line is held back, goes line by
    line so errors land exactly where they would have.
    """
    line = records = blanks = 0
    held: BadLine | None = None
    # Whether the held line is a cut-off record prefix directly followed by the next line.
    healable = False
    report.files += 1
    try:
        for pieces in _complete_lines(chunks, report, path):
            batch = decode_lines(pieces, line + 1) if held is None else None
            if batch is not None:
                found, blank = batch
                # Counts stay exact even when the consumer stops mid-batch.
                unread = iter(found)
                done = False
                try:
                    yield from unread
                    done = True
                finally:
                    given = len(found) - operator.length_hint(unread)
                    if done:
                        line, blanks = line + len(pieces), blanks + blank
                    else:
                        last = found[given - 1].line
                        blanks += last - line - given
                        line = last
                    records += given
                continue
            for piece in pieces:
                line += 1
                try:
                    record = decode_line(piece, line)
                except MalformedLine as exc:
                    if held is not None:
                        _middle(held, healable, strict, report)
                    held = BadLine(path, line, _reason(exc))
                    healable = is_object_prefix(piece)
                    continue
                if record is None:
                    blanks += 1
                    healable = False  # the healing writer adds one "\n", never a blank line
                    continue
                if held is not None:
                    _middle(held, healable, strict, report)
                    held = None
                records += 1
                yield record
        if held is not None:
            report.torn_tails.append(held)
    finally:
        report.lines += line
        report.blank_lines += blanks
        report.records += records


def _middle(bad: BadLine, healable: bool, strict: bool, report: ParseReport) -> None:
    """A failing line followed by more content: a healed fragment, or reported (and
    raised in strict mode) as malformed."""
    if healable:
        report._heal(bad)
        return
    report._skip(bad)
    if strict:
        raise TraceFormatError(bad.path, bad.line, bad.reason)


def _file_chunks(path: Path, chunk_size: int) -> Iterator[bytes]:
    """The file's bytes in chunks; every OS error becomes a pentrace error naming the file."""
    try:
        # A FIFO, /dev/zero or a folder is refused at once (input_files), never read.
        with open_regular(path, "trace file") as handle:
            while chunk := handle.read(chunk_size):
                yield chunk
    except FileNotFoundError:
        raise NotFoundError(
            f"trace file {path} does not exist", hint="list sessions with `pentrace list`"
        ) from None
    except NotRegularFileError as exc:
        raise TraceError(
            f"cannot read trace file {path}: it is {exc.kind}, expected a regular file",
            hint="check that the path is a readable file",
        ) from None
    except OSError as exc:
        raise TraceError(
            f"cannot read trace file {path}: {exc.strerror or type(exc).__name__}",
            hint="check that the path is a readable file",
        ) from exc


def read_shard(
    path: Path,
    *,
    strict: bool = False,
    report: ParseReport | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[TraceRecord]:
    """Stream the records of one shard; ``record.line`` is the 1-based line number."""
    if chunk_size < 1:
        raise UsageError(f"expected chunk_size >= 1, found {chunk_size}", hint="omit chunk_size")
    path = Path(path)
    report = report if report is not None else ParseReport()
    return _parse(_file_chunks(path, chunk_size), path, strict, report)


def read_records_from_bytes(
    data: bytes,
    *,
    strict: bool = False,
    report: ParseReport | None = None,
    path: Path | None = None,
) -> Iterator[TraceRecord]:
    """The same reading rules over bytes already in memory (``path`` only labels errors)."""
    report = report if report is not None else ParseReport()
    return _parse((data,) if data else (), path, strict, report)


def read_session(
    shards: Iterable[ShardRef],
    *,
    strict: bool = False,
    report: ParseReport | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[TraceRecord]:
    """Stream a whole session: every shard in index order, each with its own line numbers.

    Two shards with the same index (in different date folders) make the
    order ambiguous, so that raises :class:`~pentrace.errors.TraceError`.
    """
    ordered = sorted(shards, key=lambda shard: shard.index)
    for before, after in itertools.pairwise(ordered):
        if before.index == after.index:
            raise TraceError(
                f"expected one shard with index {before.index:03d}, found two: "
                f"{before.path} and {after.path}",
                hint="move the stray copy out of the traces folder",
            )
    shared = report if report is not None else ParseReport()
    return itertools.chain.from_iterable(
        read_shard(shard.path, strict=strict, report=shared, chunk_size=chunk_size)
        for shard in ordered
    )
