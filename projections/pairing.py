"""Tool-call pairing during resume: which calls are committed, which still need an answer.

A call is committed when the round that produced it completes; it is *open*
until an eligible output or a placeholder answers it.  Keeping the open calls
apart from the committed set makes every completed round cost what it holds,
not what the session has committed so far.
"""

from __future__ import annotations

from typing import Any

from pentrace.domain.records import TraceRecord
from pentrace.projections.summary import js_truthy
from pentrace.projections.synthetic import placeholder_for

__all__ = ["Pairing"]


def _id_key(value: Any) -> Any:
    """A set key for a tool-call id that is not a string, with JavaScript ``Set`` identity."""
    if value is True or value is False:
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    # An object or array id is a fresh JavaScript object: it equals nothing else.
    return ("object", object())


class Pairing:
    """Committed tool calls and which of them still await an answer, in commit order."""

    __slots__ = ("committed", "open", "strict")

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.committed: set[Any] = set()
        self.open: dict[Any, TraceRecord] = {}

    def eligible(self, messages: list[TraceRecord]) -> tuple[list[TraceRecord], set[Any]]:
        """Messages that may be sent: plain input, or outputs answering an open call.

        Returns them with the ids they answer.  The reference lets duplicate
        answers through; strict pairing keeps the first and drops id-less outputs.
        """
        kept: list[TraceRecord] = []
        keys: set[Any] = set()
        open_calls = self.open
        strict = self.strict
        for message in messages:
            head = message.head
            if head.type == "tool_call_output":
                call_id = head.tool_call_id
                if call_id is None:
                    if strict:
                        continue
                else:
                    key = call_id if call_id.__class__ is str else _id_key(call_id)
                    if key not in open_calls or (strict and key in keys):
                        continue
                    keys.add(key)
            kept.append(message)
        return kept, keys

    def commit_round(
        self, snapshot: list[TraceRecord], outputs: list[TraceRecord], history: list[TraceRecord]
    ) -> None:
        """Append a completed round to ``history``, with placeholders for calls left open."""
        eligible, answered = self.eligible(snapshot)
        open_calls = self.open
        if open_calls:
            for key, call in open_calls.items():
                if key not in answered:
                    history.append(placeholder_for(call))
            # Every open call is now answered, by an eligible output or a placeholder.
            open_calls.clear()
        history.extend(eligible)
        if self.strict:
            self._append_outputs_strictly(outputs, history)
            return
        history.extend(outputs)
        committed = self.committed
        for message in outputs:
            head = message.head
            if head.type == "tool_call" and head.stop_reason == "completed":
                call_id = head.tool_call_id
                if call_id.__class__ is str:
                    if call_id and call_id not in committed:
                        committed.add(call_id)
                        open_calls[call_id] = message
                elif js_truthy(call_id):
                    key = _id_key(call_id)
                    if key not in committed:
                        committed.add(key)
                        open_calls[key] = message

    def _append_outputs_strictly(
        self, outputs: list[TraceRecord], history: list[TraceRecord]
    ) -> None:
        """Strict pairing: only calls that can be answered, only outputs that answer one."""
        committed = self.committed
        open_calls = self.open
        for message in outputs:
            ptype = message.ptype
            if ptype == "tool_call":
                call_id = message.tool_call_id
                if not js_truthy(call_id):
                    continue
                key = call_id if call_id.__class__ is str else _id_key(call_id)
                if key in committed:
                    continue
                committed.add(key)
                open_calls[key] = message
            elif ptype == "tool_call_output":
                call_id = message.tool_call_id
                if call_id is None:
                    continue
                key = call_id if call_id.__class__ is str else _id_key(call_id)
                if open_calls.pop(key, None) is None:
                    continue
            history.append(message)

    def backfill(self, pending: list[TraceRecord]) -> list[TraceRecord]:
        """Filter the tail input and add a placeholder for every call still unanswered."""
        carry_over, answered = self.eligible(pending)
        if self.open:
            for key, call in self.open.items():
                if key not in answered:
                    carry_over.append(placeholder_for(call))
        return carry_over
