"""Read trace shards exactly as PenguinHarness does, streaming in constant memory.

The rules (``docs/trace-format.md``, reference ``resume-semantics.md``):

* the bytes are split on ``b"
"`` only - never ``splitlines`` - so ``
``,
  U+2028 and U+0085 stay inside a line;
* each line goes through :func:`pentrace.domain.records.decode_line` (JS trim,
  strict JSON) - in bulk, a chunk's lines at a time, through
  :func:`~pentrace.domain.records.decode_lines`, which applies the same rules;
  lines empty after the trim are ignored but keep their number;
* a malformed line that is followed by another non-empty line is skipped and
  reported (strict mode raises :class:`~pentrace.errors.TraceFormatError`) -
  unless it is a *healed torn fragment*: the unterminated prefix of a JSON
  object, directly followed by the next line (the ``
`` a resuming writer
  puts before its first record).  That is legal history, skipped in every
  mode and counted in ``healed``;
* the *last* non-empty line, when it does not parse, is a torn tail left by a
  crash: it is dropped silently, even in strict mode, and noted as
  ``torn_tail`` so an audit can show it.

A failing line is therefore held back until the next non-empty line arrives:
one line of look-ahead.  Files are read in large chunks with the partial last
line carried over, so memory is bounded by the chunk size plus the longest line.

What a trace read saw besides its records: bad lines, torn tails, healed fragments, counts.

The reader (:mod:`pentrace.infrastructure.trace.reader`) fills one
:class:`ParseReport` per read, or one shared by the shards of a session; the
CLI, the audit and imports print or inspect it.  Both names are importable
from the reader as well.

Resume a trace file from disk: the trace reader feeding the pure resume fold.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pentrace.domain.json_codec import is_object_prefix
from pentrace.domain.records import MalformedLine, TraceRecord, decode_line, decode_lines
from pentrace.errors import (
    NotATraceError,
    NotFoundError,
    NotRegularFileError,
    TraceError,
    TraceFormatError,
    UsageError,
)
from pentrace.infrastructure.storage.inputs import open_regular
from pentrace.infrastructure.storage.layout import ShardRef
from pentrace.projections.resume import (
    ResumeResult,
    closes_context,
    resume_closed,
    resume_trace,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "MAX_LINE_BYTES",
    "BadLine",
    "ParseReport",
    "last_record",
    "read_records_from_bytes",
    "read_session",
    "read_shard",
    "resume_trace_file",
]


# Measured (benchmarks/trace_read.py): 256 KiB chunks stay in cache and beat 1-4 MiB by ~5-10%.
DEFAULT_CHUNK_SIZE: Final = 256 * 1024
_MAX_REASON: Final = 160
# The longest line read: a JavaScript string (PenguinHarness) stops near 2**29 characters.
MAX_LINE_BYTES: Final = 512 * 1024 * 1024
# About one 256 KiB chunk of typical lines: the batch stays in cache between decode and fold.
_BATCH_LINES: Final = 1024
# The block size of a backwards read (last_record).
_BACKWARD_BLOCK: Final = 64 * 1024


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


def last_record(path: Path, *, limit: int = 16 * 1024 * 1024) -> TraceRecord | None:
    """The last record a full read of ``path`` would give, read from the end of the file.

    Lines are taken from the end backwards (split on ``\n`` only), 64 KiB at a
    time; lines that are blank or do not parse are passed over, as a read
    passes over a torn tail or a malformed line.  Returns ``None`` when no
    record ends within the last ``limit`` bytes, or the file cannot be read:
    this is a hint for a cheaper fold, and a full read has the last word.
    """
    try:
        with open_regular(Path(path), "trace file") as handle:
            size = end = handle.seek(0, 2)
            tail = b""  # the start of the file's remaining part: maybe a partial line
            while end > 0 and size - end < limit:
                start = max(0, end - _BACKWARD_BLOCK)
                handle.seek(start)
                tail = handle.read(end - start) + tail
                end = start
                lines = tail.split(b"\n")
                # The first piece is whole only at the start of the file.
                tail = lines.pop(0) if end > 0 else b""
                for raw in reversed(lines):
                    try:
                        record = decode_line(raw)
                    except MalformedLine:
                        continue
                    if record is not None:
                        return record
    except (OSError, NotRegularFileError):
        return None
    return None


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


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that did not parse: where it is (``path`` is None for in-memory data) and why."""

    path: Path | None
    line: int
    reason: str


@dataclass(slots=True)
class ParseReport:
    """What a read saw besides records: bad lines, torn tails and counts.

    Only the first ``max_kept`` skipped (or healed) lines are kept in
    ``skipped`` (``healed``); ``skipped_count`` (``healed_count``) always counts
    them all.  Healed torn fragments are legal and leave a read ``clean``.
    One report may be shared by several reads (``read_session`` does this); the counts then add up.
    """

    max_kept: int = 1000
    skipped: list[BadLine] = field(default_factory=list)
    skipped_count: int = 0
    torn_tails: list[BadLine] = field(default_factory=list)
    healed: list[BadLine] = field(default_factory=list)
    healed_count: int = 0
    files: int = 0
    lines: int = 0
    blank_lines: int = 0
    records: int = 0
    bytes_read: int = 0

    @property
    def torn_tail(self) -> BadLine | None:
        """The torn last line of the most recently read file, or of any file read before."""
        return self.torn_tails[-1] if self.torn_tails else None

    @property
    def clean(self) -> bool:
        """True when no line was skipped and no tail was torn."""
        return self.skipped_count == 0 and not self.torn_tails

    def note(self, limit: int = 20) -> str:
        """A one-line summary naming up to ``limit`` skipped line numbers, like the reference
        (healed torn fragments, which the reference counts as malformed, are named apart)."""
        healed = ""
        if self.healed_count:
            lines = ", ".join(str(bad.line) for bad in self.healed[:limit])
            healed = f"; {self.healed_count} healed torn fragment(s): {lines}"
        if self.skipped_count == 0:
            return "no malformed lines" + healed
        shown = ", ".join(str(bad.line) for bad in self.skipped[:limit])
        more = self.skipped_count - min(limit, len(self.skipped))
        extra = f" (and {more} more)" if more > 0 else ""
        return f"skipped {self.skipped_count} malformed line(s): {shown}{extra}{healed}"

    def absorb(self, other: ParseReport) -> None:
        """Add what another read saw to this report, as if this report had been given to it."""
        for bad in other.skipped[: max(0, self.max_kept - len(self.skipped))]:
            self.skipped.append(bad)
        for bad in other.healed[: max(0, self.max_kept - len(self.healed))]:
            self.healed.append(bad)
        self.torn_tails.extend(other.torn_tails)
        self.skipped_count += other.skipped_count
        self.healed_count += other.healed_count
        self.files += other.files
        self.lines += other.lines
        self.blank_lines += other.blank_lines
        self.records += other.records
        self.bytes_read += other.bytes_read

    def _heal(self, bad: BadLine) -> None:
        self.healed_count += 1
        if len(self.healed) < self.max_kept:
            self.healed.append(bad)

    def _skip(self, bad: BadLine) -> None:
        self.skipped_count += 1
        if len(self.skipped) < self.max_kept:
            self.skipped.append(bad)


_ENVELOPES: Final = frozenset({"session_meta", "model_msg", "event_msg"})


def resume_trace_file(
    path: Path | str,
    *,
    strict: bool = False,
    strict_pairing: bool = False,
    report: ParseReport | None = None,
) -> ResumeResult:
    """Fold one shard (a session resumes from its highest-index shard) into a ResumeResult.

    The file is read with PenguinHarness's rules: a torn last line is dropped,
    malformed middle lines are skipped and noted in ``report`` (``strict``
    raises :class:`~pentrace.errors.TraceFormatError` instead).  Missing or
    unreadable files raise the reader's errors, naming the path; a file with
    lines but not one trace record among them raises
    :class:`~pentrace.errors.NotATraceError`.

    Memory stays a small multiple of what the result holds: a file whose last
    record closes the context (a long session compacted at its end) is folded
    by :func:`~pentrace.projections.resume.resume_closed`, which keeps no
    history; only when its closure turns out void is the file read again.
    """
    path = Path(path)
    report = report if report is not None else ParseReport()
    if closes_context(last_record(path)):
        scratch = ParseReport(max_kept=report.max_kept)
        closed = resume_closed(read_shard(path, strict=strict, report=scratch))
        if closed is not None:
            report.absorb(scratch)
            return closed
    before = report.records, report.lines - report.blank_lines
    result = resume_trace(
        read_shard(path, strict=strict, report=report), strict_pairing=strict_pairing
    )
    records, content = report.records - before[0], report.lines - report.blank_lines - before[1]
    torn_first = _torn_first_write(path, content)
    if content and not torn_first and _holds_no_envelope(result, records, path):
        raise NotATraceError(
            f"{path} is not a trace: none of its {content} non-blank line(s) is a "
            "session_meta, model_msg or event_msg record",
            hint="give the path of a session's .jsonl shard, or a session id (`pentrace list`)",
        )
    return result


def _torn_first_write(path: Path, content: int) -> bool:
    """True when the file's one line is the start of a record cut off by a crash: a trace
    whose first write was torn holds no record yet, and resuming it is legal (history 0)."""
    if content != 1:
        return False
    with path.open("rb") as file:
        data = file.read(_TORN_FIRST_LIMIT + 1)
    return len(data) <= _TORN_FIRST_LIMIT and is_object_prefix(data.strip(b" \t\r\n"))


# A first record cut off by a crash is a session_meta: its system prompt may be long, but a
# single line past this size is read as something else than a torn trace.
_TORN_FIRST_LIMIT: Final = 64 * 1024 * 1024


def _holds_no_envelope(result: ResumeResult, records: int, path: Path) -> bool:
    """True when the read found no record of a trace's three kinds (re-read only then)."""
    if result.meta is not None or result.render_messages or result.carry_over:
        return False
    if records == 0:
        return True
    # Rare: records, but none that resume kept; look at their kinds once more.
    return not any(record.kind in _ENVELOPES for record in read_shard(path))
