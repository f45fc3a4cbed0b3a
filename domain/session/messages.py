"""The Session commands that write model messages (``model_msg`` lines).

:class:`~pentrace.domain.session.aggregate.Session` inherits them; the lifecycle and
``event_msg`` commands live in :mod:`pentrace.domain.session.aggregate`.  These are the
commands a recorded request is mostly made of, so they build their payloads
inline (no helper per optional field): unset optional fields are left out of
the line, as PenguinHarness leaves them out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from msgspec import UNSET

from pentrace.domain import omnimessage as om
from pentrace.domain.records import PayloadHead
from pentrace.domain.session import events as ev
from pentrace.domain.session.lines import Fidelity, fidelity_raw
from pentrace.domain.session.state import SessionState
from pentrace.errors import PartialMessageError

__all__ = ["SessionMessages"]

_COMPLETED: Final = "completed"
_MODEL: Final = "model_msg"


class SessionMessages(SessionState):
    """Model-message commands of the Session aggregate (see the module docstring)."""

    def record_user_input(
        self,
        text: str,
        *,
        now: datetime,
        images: Sequence[str] = (),
        sender: str | None = None,
    ) -> None:
        """User input (written before ``request_begin``): a text message, then image_url ones."""
        payload = om.Text(role="user", text=text, sender=UNSET if sender is None else sender)
        self._write(ev.TextRecorded, _MODEL, payload, now)
        for url in images:
            self.record_image_url(url, now=now)

    def record_text(
        self,
        text: str,
        *,
        now: datetime,
        role: om.Role = "assistant",
        sender: str | None = None,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """A complete ``text`` message (``fidelity`` is kept verbatim)."""
        payload = om.Text(
            role=role,
            text=text,
            sender=UNSET if sender is None else sender,
            stop_reason=UNSET if stop_reason is None else stop_reason,
            fidelity=UNSET if fidelity is None else fidelity_raw(fidelity),
        )
        self._write(ev.TextRecorded, _MODEL, payload, now)

    def record_thinking(
        self,
        thinking: str,
        *,
        now: datetime,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """A complete ``thinking`` message from the assistant."""
        payload = om.Thinking(
            role="assistant",
            thinking=thinking,
            stop_reason=UNSET if stop_reason is None else stop_reason,
            fidelity=UNSET if fidelity is None else fidelity_raw(fidelity),
        )
        self._write(ev.ThinkingRecorded, _MODEL, payload, now)

    def record_inline_thinking(
        self,
        data: str,
        mime_type: str,
        *,
        now: datetime,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """An ``inline_thinking`` message (base64 ``data``)."""
        payload = om.InlineThinking(
            role="assistant",
            data=data,
            mime_type=mime_type,
            stop_reason=UNSET if stop_reason is None else stop_reason,
            fidelity=UNSET if fidelity is None else fidelity_raw(fidelity),
        )
        self._write(ev.InlineThinkingRecorded, _MODEL, payload, now)

    def record_tool_call(
        self,
        name: str,
        arguments: str,
        tool_call_id: str,
        *,
        now: datetime,
        fidelity: Fidelity = None,
        stop_reason: str | None = _COMPLETED,
    ) -> None:
        """A ``tool_call`` (``arguments`` is a JSON string); needs an open request."""
        payload = om.ToolCall(
            role="assistant",
            name=name,
            arguments=arguments,
            tool_call_id=tool_call_id,
            stop_reason=UNSET if stop_reason is None else stop_reason,
            fidelity=UNSET if fidelity is None else fidelity_raw(fidelity),
        )
        if self.deleted or not self.started or not self.open_request:
            self._require_open_request("tool_call")
        head = PayloadHead("tool_call", "assistant", tool_call_id, None, stop_reason)
        self._write(ev.ToolCallRecorded, _MODEL, payload, now, head)

    def record_tool_output(
        self,
        tool_call_id: str,
        output: str,
        *,
        now: datetime,
        images: Sequence[str] = (),
        stop_reason: str | None = None,
    ) -> None:
        """A ``tool_call_output`` for a call awaiting output (unknown or answered ids: refused)."""
        payload = om.ToolCallOutput(
            role="user",
            output=output,
            images=tuple(images) if images else UNSET,
            tool_call_id=tool_call_id,
            stop_reason=UNSET if stop_reason is None else stop_reason,
        )
        self._check_writable("tool_call_output")
        self._check_output_allowed(tool_call_id)
        head = PayloadHead("tool_call_output", "user", tool_call_id, None, stop_reason)
        self._write(ev.ToolCallOutputRecorded, _MODEL, payload, now, head)

    def record_image_url(self, image_url: str, *, now: datetime, role: om.Role = "user") -> None:
        """An ``image_url`` message."""
        self._write(ev.ImageUrlRecorded, _MODEL, om.ImageUrl(role=role, image_url=image_url), now)

    def record_inline_data(
        self,
        data: str,
        mime_type: str,
        *,
        now: datetime,
        role: om.Role = "user",
        fidelity: Fidelity = None,
    ) -> None:
        """An ``inline_data`` message (base64 ``data``)."""
        payload = om.InlineData(
            role=role, data=data, mime_type=mime_type, fidelity=fidelity_raw(fidelity)
        )
        self._write(ev.InlineDataRecorded, _MODEL, payload, now)

    def record_model_message(self, payload: om.ModelPayload, *, now: datetime) -> None:
        """Any complete model message given as an OmniMessage payload; ``partial_*`` is refused."""
        if om.is_partial(payload):
            ptype = om.payload_type(payload)
            raise PartialMessageError(
                self._where(str(ptype))
                + f"expected a complete model message, found a streaming fragment {ptype!r}",
                hint="append the complete message once the stream segment ends",
            )
        if isinstance(payload, om.ToolCall):
            self._require_open_request("tool_call")
        elif isinstance(payload, om.ToolCallOutput):
            self._check_writable("tool_call_output")
            self._check_output_allowed(payload.tool_call_id)
        kind = om.envelope_type_for(payload)
        assert kind is not None, "model payloads belong in a known envelope type"
        self._write(ev.model_message_class(om.payload_type(payload)), kind, payload, now)
