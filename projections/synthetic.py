"""Records resume makes up: interrupted-tool placeholders and the pending summary.

They exist only in a :class:`~pentrace.projections.resume.ResumeResult` and are
never written to a trace.  The fold has no clock, so each one borrows a
timestamp from the trace (``docs/resume.md``): a placeholder the timestamp of
the tool call it answers, the pending summary that of the closing
``compaction_end``.  A record without a timestamp gives one without.
"""

from __future__ import annotations

from typing import Any, Final

from pentrace.domain.json_codec import json_bytes
from pentrace.domain.records import TraceRecord
from pentrace.projections.summary import context_summary_text

__all__ = ["INTERRUPTED_OUTPUT", "SyntheticRecord", "placeholder_for", "summary_message"]

INTERRUPTED_OUTPUT: Final = "[interrupted: process exited before the tool finished]"


class SyntheticRecord(TraceRecord, gc=False, eq=False):
    """A record made by resume (placeholder output, pending summary), never read from disk."""


def _synthesize(envelope: dict[str, Any]) -> SyntheticRecord:
    return SyntheticRecord(json_bytes(envelope))


def _timestamp_of(record: TraceRecord) -> dict[str, Any]:
    value = record.value()
    if isinstance(value, dict) and "timestamp" in value:
        return {"timestamp": value["timestamp"]}
    return {}


def placeholder_for(call: TraceRecord) -> SyntheticRecord:
    """The interrupted-tool output answering ``call``; it borrows the call's timestamp."""
    payload = {
        "type": "tool_call_output",
        "role": "user",
        "output": INTERRUPTED_OUTPUT,
        "tool_call_id": call.tool_call_id,
        "stop_reason": "aborted",
    }
    return _synthesize({**_timestamp_of(call), "type": "model_msg", "payload": payload})


def summary_message(summary: str, closing: TraceRecord) -> SyntheticRecord:
    """The ``[context_summary]`` user text; it borrows the closing record's timestamp."""
    payload = {
        "type": "text",
        "role": "user",
        "text": context_summary_text(summary),
        "stop_reason": "completed",
    }
    return _synthesize({**_timestamp_of(closing), "type": "model_msg", "payload": payload})
