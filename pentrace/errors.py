"""The error hierarchy: one root, a few typed subclasses per layer.

Every message says what was expected, what was found and where (file, line,
session, sequence).  ``hint`` names the command or option that fixes it; the CLI
prints ``error: <message>`` and ``hint: <hint>`` and exits non-zero.
Messages never contain credentials: callers pass names and paths, never values
that came out of a payload.
"""

from __future__ import annotations

from pathlib import Path


class PentraceError(Exception):
    """Root of every error pentrace raises on purpose."""

    hint: str | None = None
    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(PentraceError):
    """A command or function was called with arguments that cannot work."""

    exit_code = 2


class InvalidNameError(UsageError):
    """A name that becomes part of a path (project, agent, session id, workspace) is unsafe."""


class NotRegularFileError(UsageError):
    """A path names a FIFO, device, socket or folder where a regular file is expected."""

    kind: str = "not a regular file"  # "a FIFO (named pipe)", "a folder", ...


class NotFoundError(PentraceError):
    """A session, trace file or other named thing does not exist."""


class NoMatchError(NotFoundError):
    """What a command names (a session, a trace file, a shard) matches nothing: exit code 2.

    Like a bad value, and like an ambiguous reference (:class:`AmbiguousIdError`), it is
    the caller's to fix; ``audit`` and ``scan`` keep exit code 1 for their findings (ADR 0092).
    """

    exit_code = 2


class SessionExistsError(UsageError):
    """An import names a session id that already exists under the agent."""


class AmbiguousIdError(UsageError):
    """A session reference (an id, a prefix, a token) matches more than one session.

    ``candidates`` are full ``project/agent/session-id`` references; the hint
    names the first as the form that picks one.
    """

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:10])
        more = f" (and {len(candidates) - 10} more)" if len(candidates) > 10 else ""
        owners = {candidate.rpartition("/")[0] for candidate in candidates}
        if candidates and "/" in candidates[0] and len(owners) > 1:
            hint = f"name the owner: project/agent/session-id, for example {candidates[0]}"
        else:
            hint = "type more characters of the id"
        super().__init__(
            f"session reference {prefix!r} matches {len(candidates)} sessions: {shown}{more}",
            hint=hint,
        )
        self.prefix = prefix
        self.candidates = candidates


class AgentSourceError(PentraceError):
    """Another agent's session store (Claude Code, Codex, OpenCode, Gemini) cannot be read."""


class TraceError(PentraceError):
    """Problems with a trace file on disk."""


class TraceFormatError(TraceError):
    """A trace line is not valid JSON, or not a valid record, in strict mode."""

    def __init__(
        self, path: Path | str | None, line: int, reason: str, *, hint: str | None = None
    ) -> None:
        where = f"{path}:{line}" if path is not None else f"line {line}"
        named = f"`pentrace audit {path}`" if path is not None else "`pentrace audit`"
        super().__init__(
            f"{where}: {reason}",
            hint=hint or f"{named} lists every broken line and what it holds",
        )
        self.path = Path(path) if path is not None else None
        self.line = line
        self.reason = reason


class NotATraceError(TraceError):
    """A file given as a trace holds lines, but not one trace record among them."""


class TraceConflictError(TraceError):
    """A save's first position is not the session's next one: another writer got there first."""


class TraceLockedError(TraceError):
    """Another writer holds the exclusive lock on a session's shard."""


class EnvelopeFormatError(TraceError):
    """A value is not a valid OmniMessage envelope; the message names the field path."""


class TraceWriteError(TraceError):
    """Appending to a trace shard failed; the shard was rolled back to its last whole record."""


class RecordRefusedError(TraceError):
    """A record the trace must never hold (partial_*, empty or multi-line) was offered."""


class IllegalCommandError(PentraceError):
    """The Session aggregate refused a command that would write an illegal trace."""


class SessionNotStartedError(IllegalCommandError):
    """A write was attempted on a session whose trace has no session_meta."""


class SessionDeletedError(IllegalCommandError):
    """A write was attempted on a session that has been deleted."""


class RequestNotOpenError(IllegalCommandError):
    """A write that needs an open request came when none was open."""


class RequestAlreadyOpenError(IllegalCommandError):
    """request_begin was attempted while a request was already open."""


class UnknownToolCallError(IllegalCommandError):
    """A tool_call_output names a call id that no call awaiting output has."""


class DuplicateToolOutputError(IllegalCommandError):
    """A second tool_call_output was attempted for a call already answered."""


class PartialMessageError(IllegalCommandError):
    """A streaming partial_* fragment was offered; traces hold complete messages only."""


class CompactionStateError(IllegalCommandError):
    """compaction_begin while one is open, or compaction_end with none open."""


class UnknownStatusError(IllegalCommandError):
    """request_end with a status that is not one of the StopReason values."""


class UnencodableValueError(IllegalCommandError):
    """A command was given a value with no JSON form; nothing was recorded."""


class ResumeError(PentraceError):
    """A session cannot be resumed (no session_meta, no provider, workspace gone)."""


class LedgerError(PentraceError):
    """The RuntimeEvent ledger failed or refused a write."""


class LedgerLockedError(LedgerError):
    """The ledger database is locked by another process."""


class RedactionError(LedgerError):
    """An envelope that is not fully redacted was offered to the ledger."""


class LedgerConflictError(LedgerError):
    """An event id or stream position the ledger holds was offered with different content."""


class LedgerFormatError(LedgerError):
    """The ledger file is in another format (Penguin's, or not a ledger) than the command needs."""


class SearchIndexError(PentraceError):
    """The full-text search index could not be read, written or rebuilt."""


class SearchQueryError(UsageError):
    """A full-text search query is not valid FTS5 syntax."""


class ConfigError(UsageError):
    """A setting, environment variable or configuration file is invalid."""


class AnalyticsError(PentraceError):
    """An analytics projection or its read model failed."""


class ProjectionGapError(AnalyticsError):
    """Retention pruned ledger events a projection never saw; rebuild it from the traces."""


class ImageError(PentraceError):
    """An image named by a trace record cannot be served as one."""


class ImageTooLargeError(ImageError):
    """An image is larger than the configured cap."""


class ImageTypeError(ImageError):
    """An image's bytes are not one of the allowed types (PNG, JPEG, GIF, WebP)."""


class ImageDataError(ImageError):
    """An image's data is malformed: bad base64, or bytes that end before the image does."""


class ExportError(PentraceError):
    """Spans could not be delivered to an OpenTelemetry receiver (``pentrace otel``)."""
