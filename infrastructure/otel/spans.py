"""What a span carries: its types, its attributes, and the opt-in message content (ADR 0097).

:mod:`.mapping` folds a session's records into the states here (a task, a
request, a tool call, a compaction); the builders at the bottom turn a finished
state into a :class:`Span` with the GenAI attributes: ``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.response.finish_reasons``, ``gen_ai.tool.*``, ``gen_ai.conversation.id``
(the session) and ``session.id`` (the root session, which Phoenix and Langfuse
group by), errors as the ERROR status and ``error.type``.  What the conventions
do not name is under ``pentrace.*``.

**Content** is opt-in (``--content``): ``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions``,
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``, as JSON strings of
the conventions' ``{role, parts: [{type, ...}], finish_reason}`` (the SDK takes
flat values only, which the conventions allow).  Every text comes out of a
payload that went through the redaction policy first (:func:`clean_payload`),
the ledger's; images and inline data are left out, a part says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction import redact_decoded, redact_text
from pentrace.projections.session_summary import parse_timestamp

__all__ = [
    "COMPLETED",
    "MAX_TEXT",
    "AttributeValue",
    "Attributes",
    "CompactionState",
    "ParentLink",
    "RequestState",
    "Span",
    "Spawn",
    "SwitchResolver",
    "TaskRef",
    "TaskState",
    "ToolState",
    "as_int",
    "chat_span",
    "clean_payload",
    "clean_text",
    "compaction_span",
    "input_message",
    "iso_ns",
    "messages_json",
    "output_part",
    "provider_name",
    "record_time_ns",
    "stamp_ns",
    "system_instructions",
    "task_span",
    "tool_span",
]

AttributeValue = str | bool | int | float | tuple[str, ...]
Attributes = dict[str, AttributeValue]
SpanKindName = Literal["internal", "client"]

COMPLETED: Final = "completed"
# gen_ai.provider.name for the provider groups PenguinHarness and the agents write.
_PROVIDERS: Final = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "openai": "openai",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "google": "gcp.gemini",
    "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "aws_bedrock": "aws.bedrock",
    "deepseek": "deepseek",
    "mistral": "mistral_ai",
    "groq": "groq",
    "xai": "x_ai",
    "x_ai": "x_ai",
    "perplexity": "perplexity",
    "cohere": "cohere",
}
_USAGE: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read.input_tokens",
    "cache_creation.input_tokens",
)
_GENERATE: Final = frozenset({"gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai"})
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_NS: Final = 2**63 - 1
_STAMP: Final = b'{"timestamp":"'


@dataclass(slots=True)
class Span:
    """One finished span, for any exporter (``export.py`` makes an SDK span of it).

    ``failed`` is the ERROR status, ``error`` its description; ``opened`` and
    ``finished`` are the positions of the records that opened and finished it;
    ``task_start_ns`` is when its trace's root task began (``--since`` / ``--until``)."""

    name: str
    kind: SpanKindName
    trace_id: int
    span_id: int
    parent_id: int
    start_ns: int
    end_ns: int
    attributes: Attributes
    failed: bool = False
    error: str = ""
    events: list[tuple[str, int, Attributes]] = field(default_factory=list)
    links: list[tuple[int, int, Attributes]] = field(default_factory=list)
    opened: int = 0
    finished: int = 0
    task_start_ns: int = 0


@dataclass(frozen=True, slots=True)
class ParentLink:
    """Where a subagent session's tasks hang: its parent's trace and spawning span, the
    root session's reference (``session.id``) and when the root task began."""

    trace_id: int
    span_id: int
    session: str
    task_start_ns: int


@dataclass(frozen=True, slots=True)
class Spawn:
    """A ``subagent`` pointer: the child's id, the pointer's position, the child's parent."""

    child_id: str
    position: int
    link: ParentLink


@dataclass(frozen=True, slots=True)
class TaskRef:
    """A task's root span, for a model switch's link to it."""

    position: int
    start_ns: int
    trace_id: int
    span_id: int


# (source session id, switch time in ns) -> the source's task the switch left, or None.
SwitchResolver = Callable[[str, int], TaskRef | None]


def provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a trace's provider group (itself when not a known one)."""
    return _PROVIDERS.get(provider.lower(), provider) if provider else "unknown"


def stamp_ns(stamp: Any) -> int | None:
    """A timestamp in ns since the epoch (OTLP's range), or None when it is not one."""
    if isinstance(stamp, str) and len(stamp) == 24:
        fast = _ms_stamp_ns(stamp)
        if fast is not None:
            return fast
    return iso_ns(stamp)


def _ms_stamp_ns(stamp: str) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ``, the shape PenguinHarness writes, from the minute's
    value (kept) and the digits after it: :func:`iso_ns` without a datetime per record.
    None for any other shape, or a minute near either end of the range."""
    seconds, millis = stamp[17:19], stamp[20:23]
    if not (
        stamp[16] == ":"
        and stamp[19] == "."
        and stamp[23] == "Z"
        and seconds.isascii()
        and seconds.isdigit()
        and seconds < "60"
        and millis.isascii()
        and millis.isdigit()
    ):
        return None
    minute = _MINUTES.get(stamp[:16])
    if minute is None:
        minute = iso_ns(stamp[:16] + ":00Z")
        if minute is None or not 0 < minute < _MAX_NS - 60 * 10**9:
            return None  # clamped, or not a minute at all: the slow way decides
        if len(_MINUTES) >= 1 << 16:
            _MINUTES.clear()
        _MINUTES[stamp[:16]] = minute
    return minute + int(seconds) * 10**9 + int(millis) * 10**6


_MINUTES: dict[str, int] = {}


def iso_ns(stamp: Any) -> int | None:
    """A timestamp in ns since the epoch by way of :func:`parse_timestamp` (any ISO 8601
    form), clamped to OTLP's unsigned 64 bits; None when it is not one."""
    moment = parse_timestamp(stamp) if isinstance(stamp, str) else None
    if moment is None:
        return None
    delta = moment - _EPOCH
    nanos = (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    return min(max(nanos, 0), _MAX_NS)  # OTLP times are unsigned 64-bit


def record_time_ns(record: TraceRecord) -> int | None:
    """The record's ``timestamp`` in ns since the epoch, or None when it has no readable one.

    PenguinHarness writes the timestamp first, so it is sliced off the line's bytes
    rather than decoding the line (a tool output may be megabytes)."""
    raw = record.raw
    if raw.startswith(_STAMP):
        end = raw.find(b'"', len(_STAMP))
        if end > 0:
            found = stamp_ns(raw[len(_STAMP) : end].decode("ascii", "replace"))
            if found is not None:
                return found
    value = record.value()
    return stamp_ns(value.get("timestamp")) if isinstance(value, dict) else None


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(slots=True, eq=False)
class TaskState:
    """A task being folded (its span when it is finished)."""

    position: int
    start_ns: int
    trace_id: int
    span_id: int
    parent_id: int
    root_start_ns: int
    provider: str
    model: str
    requests: int = 0
    outcome: str | None = None
    goal: str | None = None
    switch_from: str | None = None
    prompts: list[dict[str, Any]] = field(default_factory=list)
    unattributed: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    done: bool = False


@dataclass(slots=True, eq=False)
class RequestState:
    """A request being folded: open, or ended and waiting for its token usage."""

    position: int
    start_ns: int
    task: TaskState
    parent_id: int
    provider: str
    model: str
    span_id: int
    retry_of: tuple[int, int] | None
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]] = field(default_factory=list)
    answered: bool = False  # an assistant message arrived
    tool_calls: int = 0
    status: str | None = None  # set by request_end
    error_message: str = ""
    attempt: int | None = None
    retry_in_ms: int | None = None
    end_ns: int = 0
    usage: list[int] | None = None  # input (all), output, cache read, cache creation
    reasoning: int | None = None
    events: list[tuple[str, int, Attributes]] = field(default_factory=list)
    done: bool = False


@dataclass(slots=True, eq=False)
class ToolState:
    """A tool call awaiting its output."""

    position: int
    start_ns: int
    call_id: str
    name: str
    task: TaskState
    parent_id: int
    span_id: int
    request: RequestState | None
    arguments: str | None
    decision: str | None = None
    events: list[tuple[str, int, Attributes]] = field(default_factory=list)
    done: bool = False


@dataclass(slots=True, eq=False)
class CompactionState:
    """A compaction awaiting its end."""

    position: int
    start_ns: int
    task: TaskState
    span_id: int
    attributes: Attributes
    done: bool = False


# One attribute value at most (characters); a longer one is cut with a note.  Receivers
# refuse or cut far smaller attributes, and the trace keeps the whole text anyway.
MAX_TEXT: Final = 256 * 1024
_CUT: Final = "…[cut by pentrace: {} more characters]"


def clean_payload(record: TraceRecord) -> dict[str, Any]:
    """The record's payload after the redaction policy (the ledger's, with its screen)."""
    value = redact_decoded(record.payload(), record.raw, depth=1).value
    return value if isinstance(value, dict) else {}


def clean_text(value: Any) -> str:
    """A value as redacted text ("" for nothing): for names and messages that are not in a
    payload already redacted."""
    if value is None:
        return ""
    return redact_text(value if isinstance(value, str) else str(value))


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + _CUT.format(len(text) - MAX_TEXT)


def _text(value: Any) -> str:
    return _cut(value if isinstance(value, str) else "" if value is None else str(value))


def _arguments(value: Any) -> Any:
    """Tool arguments as the conventions prefer them (an object) when they are JSON."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return _text(value)
        return parsed if isinstance(parsed, dict) else _text(value)
    return value


def input_message(ptype: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    """One user-side message (a redacted payload) as a conventions message, or None."""
    if ptype == "tool_call_output":
        part = {
            "type": "tool_call_response",
            "id": _text(payload.get("tool_call_id")),
            "response": _text(payload.get("output")),
        }
        return {"role": "tool", "parts": [part]}
    if ptype == "text":
        return {"role": "user", "parts": [{"type": "text", "content": _text(payload.get("text"))}]}
    if ptype in ("image_url", "inline_data"):
        note = f"[{ptype} not exported]"
        return {"role": "user", "parts": [{"type": "text", "content": note}]}
    return None


def output_part(ptype: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    """One assistant message (a redacted payload) as a part of the output message, or None."""
    if ptype == "text":
        return {"type": "text", "content": _text(payload.get("text"))}
    if ptype == "thinking":
        return {"type": "reasoning", "content": _text(payload.get("thinking"))}
    if ptype == "tool_call":
        return {
            "type": "tool_call",
            "id": _text(payload.get("tool_call_id")),
            "name": _text(payload.get("name")),
            "arguments": _arguments(payload.get("arguments")),
        }
    return None


def system_instructions(prompt: Any) -> str | None:
    """``gen_ai.system_instructions`` of a redacted system prompt, or None without one."""
    if not isinstance(prompt, str) or not prompt:
        return None
    return messages_json([{"type": "text", "content": _text(prompt)}])


def messages_json(messages: list[dict[str, Any]]) -> str:
    """Messages (or parts) as the one JSON string an attribute holds (texts are cut inside,
    so the string stays JSON)."""
    return json.dumps(messages, ensure_ascii=False, separators=(",", ":"))


# -- the spans of finished states ------------------------------------------------------
def _closed(start_ns: int, end_ns: int) -> int:
    return max(end_ns, start_ns)  # a record stamped earlier than the span's start


def chat_span(
    request: RequestState,
    finished: int,
    end_ns: int,
    common: Attributes,
    *,
    system: str | None,
    still_open: bool,
) -> Span:
    """The ``chat {model}`` span of a request (``still_open``: it never ended)."""
    # Provider, model and tool names come from redacted payloads (:func:`clean_payload`).
    provider = provider_name(request.provider)
    operation = "generate_content" if provider in _GENERATE else "chat"
    model = request.model
    attributes: Attributes = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        **common,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    status = request.status or ("open" if still_open else "interrupted")
    attributes["pentrace.request.status"] = status
    if request.status == COMPLETED:
        attributes["gen_ai.response.finish_reasons"] = (
            ("tool_calls",) if request.tool_calls else ("stop",)
        )
    elif not still_open:
        attributes["gen_ai.response.finish_reasons"] = (status,)
    usage = request.usage
    if usage is not None:
        attributes["gen_ai.usage.input_tokens"] = usage[0]
        attributes["gen_ai.usage.output_tokens"] = usage[1]
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage[2]
        attributes["gen_ai.usage.cache_creation.input_tokens"] = usage[3]
    if request.reasoning is not None:
        attributes["gen_ai.usage.reasoning.output_tokens"] = request.reasoning
    if request.attempt is not None:
        attributes["pentrace.request.attempt"] = request.attempt
    if request.retry_in_ms is not None:
        attributes["pentrace.request.retry_in_ms"] = request.retry_in_ms
    failed = status != COMPLETED and not still_open
    if failed:
        attributes["error.type"] = status
    if still_open:
        attributes["pentrace.open"] = True
    if request.inputs:
        attributes["gen_ai.input.messages"] = messages_json(request.inputs)
    if request.outputs:
        reason = "tool_calls" if request.tool_calls else "stop"
        output = {"role": "assistant", "parts": request.outputs, "finish_reason": reason}
        attributes["gen_ai.output.messages"] = messages_json([output])
    if system is not None:
        attributes["gen_ai.system_instructions"] = system
    retried: Attributes = {"pentrace.link": "retry"}
    links = [] if request.retry_of is None else [(*request.retry_of, retried)]
    task = request.task
    return Span(
        f"{operation} {model}" if model else operation,
        "client",
        task.trace_id,
        request.span_id,
        request.parent_id,
        request.start_ns,
        _closed(request.start_ns, end_ns),
        attributes,
        failed,
        (request.error_message or status) if failed else "",
        request.events,
        links,
        request.position,
        finished,
        task.root_start_ns,
    )


def tool_span(
    tool: ToolState,
    finished: int,
    end_ns: int,
    common: Attributes,
    *,
    outcome: str | None,
    result: Any,
    still_open: bool,
) -> Span:
    """The ``execute_tool {name}`` span of a call; a denied approval or an output that did
    not complete (``outcome``) is its error."""
    name = tool.name
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
        **common,
    }
    if tool.call_id:
        attributes["gen_ai.tool.call.id"] = tool.call_id
    if tool.decision is not None:
        attributes["pentrace.tool.approval"] = tool.decision
    if tool.decision in ("deny", "forbidden"):
        outcome = tool.decision
    if outcome is not None:
        attributes["error.type"] = outcome
    if still_open:
        attributes["pentrace.open"] = True
    if tool.arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _text(tool.arguments)
    if result is not None:
        attributes["gen_ai.tool.call.result"] = _text(result)
    task = tool.task
    return Span(
        f"execute_tool {name}" if name else "execute_tool",
        "internal",
        task.trace_id,
        tool.span_id,
        tool.parent_id,
        tool.start_ns,
        _closed(tool.start_ns, end_ns),
        attributes,
        outcome is not None,
        outcome or "",
        tool.events,
        [],
        tool.position,
        finished,
        task.root_start_ns,
    )


def compaction_span(
    compaction: CompactionState,
    finished: int,
    end_ns: int,
    common: Attributes,
    ending: Attributes,
    *,
    error: str,
    still_open: bool,
) -> Span:
    """The ``compaction {mode}`` span: its begin's fields and its end's (``ending``); a
    status other than completed is its error (``interrupted`` when it never ended)."""
    attributes: Attributes = {**compaction.attributes, **ending, **common}
    status = ending.get("pentrace.compaction.status")
    outcome: str | None = None
    if still_open:
        attributes["pentrace.open"] = True
    elif not ending:
        outcome = "interrupted"  # another compaction began first
    elif status != COMPLETED:
        outcome = str(status) if status else "unknown"
    if outcome is not None:
        attributes["error.type"] = outcome
    mode = attributes.get("pentrace.compaction.mode")
    task = compaction.task
    return Span(
        f"compaction {mode}" if isinstance(mode, str) and mode else "compaction",
        "internal",
        task.trace_id,
        compaction.span_id,
        task.span_id,
        compaction.start_ns,
        _closed(compaction.start_ns, end_ns),
        attributes,
        outcome is not None,
        (error or outcome) if outcome is not None else "",
        [],
        [],
        compaction.position,
        finished,
        task.root_start_ns,
    )


def task_span(
    task: TaskState,
    finished: int,
    end_ns: int,
    common: Attributes,
    *,
    agent: str,
    source: str | None,
    link: TaskRef | None,
) -> Span:
    """The ``invoke_agent {agent}`` span of a task: an abort, or a last request that did
    not complete, is its error."""
    attributes: Attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": provider_name(task.provider),
        "gen_ai.agent.name": agent,
        **common,
    }
    model = task.model
    if model:
        attributes["gen_ai.request.model"] = model
    attributes["pentrace.task.position"] = task.position
    attributes["pentrace.task.requests"] = task.requests
    if source is not None:
        attributes["pentrace.session.source"] = source
    if task.goal is not None:
        attributes["pentrace.goal.outcome"] = task.goal
    if any(task.unattributed):
        for name, count in zip(_USAGE, task.unattributed, strict=True):
            attributes[f"pentrace.unattributed.{name}"] = count
    if task.switch_from is not None:
        attributes["pentrace.model_switch.from"] = clean_text(task.switch_from)
    if task.outcome is not None:
        attributes["error.type"] = task.outcome
    if task.prompts:
        attributes["gen_ai.input.messages"] = messages_json(task.prompts)
    switched: Attributes = {"pentrace.link": "model_switch"}
    links = [] if link is None else [(link.trace_id, link.span_id, switched)]
    return Span(
        f"invoke_agent {agent}" if agent else "invoke_agent",
        "internal",
        task.trace_id,
        task.span_id,
        task.parent_id,
        task.start_ns,
        _closed(task.start_ns, end_ns),
        attributes,
        task.outcome is not None,
        task.outcome or "",
        [],
        links,
        task.position,
        finished,
        task.root_start_ns,
    )
