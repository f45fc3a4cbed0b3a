"""What full-text search indexes from a trace record (pure, resumable at any record).

One record gives at most one document: the text of a ``text`` message (user
or assistant), of a ``thinking`` block, a tool call as ``name arguments``, or
a tool output.  Every document is passed through
:func:`pentrace.domain.redaction.redact_text` first: the search index is a
store outside the trace and must never hold a secret.

``turn`` is the 1-based number of the turn a record belongs to: one more
than the completed requests before it, counted with resume's rule
(``request_end.status == "completed"`` outside a compaction span).
:class:`SearchDocFold` carries ``position``, ``turns`` and ``in_compaction``
between calls so indexing can stop at any record and continue later from the
stored state (traces are append-only).
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction import redact_text
from pentrace.projections.audit import record_time_ms

__all__ = ["KINDS", "SearchDoc", "SearchDocFold"]

KINDS: Final = ("text", "thinking", "tool_call", "tool_output")
_FIELDS: Final = {
    "text": ("text", "text"),
    "thinking": ("thinking", "thinking"),
    "tool_call": ("tool_call", "arguments"),
    "tool_call_output": ("tool_output", "output"),
}


class SearchDoc(NamedTuple):
    """One indexed document: where it is, what it is, and its redacted text."""

    position: int
    turn: int
    kind: str
    role: str | None
    time_ms: int
    line: int
    body: str


class SearchDocFold:
    """Turn a session's records, in order, into search documents (see the module docstring)."""

    __slots__ = ("in_compaction", "position", "turns")

    def __init__(self, position: int = 0, turns: int = 0, in_compaction: bool = False) -> None:
        self.position = position
        self.turns = turns
        self.in_compaction = in_compaction

    def record(self, record: TraceRecord) -> SearchDoc | None:
        """Count the record; return its document, or ``None`` when it has no searchable text."""
        self.position += 1
        kind = record.kind
        if kind == "event_msg":
            ptype = record.ptype
            if ptype == "request_end":
                if record.status == "completed" and not self.in_compaction:
                    self.turns += 1
            elif ptype == "compaction_begin":
                self.in_compaction = True
            elif ptype == "compaction_end":
                self.in_compaction = False
            return None
        if kind != "model_msg" or not isinstance(record.ptype, str):
            return None
        fields = _FIELDS.get(record.ptype)
        if fields is None:
            return None
        doc_kind, key = fields
        payload = record.payload()
        body = _text(payload.get(key))
        if doc_kind == "tool_call":
            name = payload.get("name")
            body = f"{name} {body}" if isinstance(name, str) else body
        if not body:
            return None
        role = record.role if isinstance(record.role, str) else None
        return SearchDoc(
            position=self.position,
            turn=self.turns + 1,
            kind=doc_kind,
            role=role,
            time_ms=record_time_ms(record),
            line=record.line,
            body=redact_text(body),
        )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return ""
