"""A session's trace records as OpenTelemetry GenAI spans: one fold, no I/O (ADR 0097).

* ``invoke_agent {agent}`` per **task** (a prompt and the requests it leads to), the
  root of a trace of its own; a subagent session's tasks hang under the span that
  started them, in their parent's trace (:class:`~.spans.ParentLink`).
* ``chat {model}`` (``generate_content`` for Gemini) per **request**, from
  ``request_begin`` to ``request_end``, with the request's ``token_usage``.
* ``execute_tool {name}`` per **tool call**, from the call to its output.
* ``compaction {mode}`` per compaction, over the requests it makes.

A span leaves once, when it is **finished**: when every record that decides one of
its fields is in.  ``Span.finished`` is the position of the record that finished
it, so the live exporter's cursor can say which spans a receiver holds (ADR 0098).
A request is finished by its ``token_usage``, or by the next record that rules one
out (a ``request_begin``, a new task, a compaction, a new shard); a task by the next
task's first record; a tool call by its output (or the next request, which finds it
cut off); a compaction by its end.  :meth:`SessionFold.settle` closes what is left
open when a session has gone quiet.  Timestamps are the records', never the clock's.

**Ids** come from positions, so that exporting again gives the same ids: a trace
id is a BLAKE2b digest (16 bytes) of the session (project, agent, session id,
ADR 0023) and the position of its task's first record; a span id (8 bytes) of
the session, the position of the record that opens the span and the span's role
(a task's ``invoke_agent`` and its first ``chat`` can both open at a
``request_begin``).  A receiver that keeps one span per id then holds every span
once, after a batch export, the live exporter, a restart or a SIGKILL.  The
all-zero id is invalid in OpenTelemetry: a digest of zero becomes 1.
"""

from __future__ import annotations

from functools import lru_cache
from hashlib import blake2b
from typing import Any, Final, Literal

from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.spans import (
    COMPLETED,
    Attributes,
    CompactionState,
    ParentLink,
    RequestState,
    Span,
    Spawn,
    SwitchResolver,
    TaskRef,
    TaskState,
    ToolState,
    as_int,
    chat_span,
    clean_payload,
    clean_text,
    compaction_span,
    input_message,
    output_part,
    record_time_ns,
    system_instructions,
    task_span,
    tool_span,
)
from pentrace.projections.session_summary import token_delta

__all__ = ["SessionFold", "SpanRole", "span_id", "trace_id"]

_SWITCH: Final = "[model_switch_from]"


def _switch_source(text: str) -> str | None:
    """The source session id of a ``[model_switch_from]`` block (its ``session_id:`` line)."""
    for line in text.split("\n")[1:8]:
        name, _, value = line.partition(":")
        if name.strip() == "session_id" and value.strip():
            return value.strip()
    return None


SpanRole = Literal["task", "chat", "tool", "compaction"]
_TRACE: Final = b"pentrace.trace"
_SPAN: Final = b"pentrace.span"


@lru_cache(maxsize=4096)
def _key_bytes(key: SessionKey) -> bytes:
    # Length-prefixed, so no two keys (names may hold any character but "/") share bytes.
    parts = (key.project, key.agent, key.session_id)
    return b"".join(b"%d:%s" % (len(encoded), encoded) for encoded in map(_utf8, parts))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _digest(person: bytes, key: SessionKey, position: int, role: bytes, size: int) -> int:
    value = int.from_bytes(
        blake2b(
            b"%s|%d|%s" % (_key_bytes(key), position, role), digest_size=size, person=person
        ).digest(),
        "big",
    )
    return value or 1


def trace_id(key: SessionKey, position: int) -> int:
    """The 128-bit trace id of the task of ``key`` that opens at ``position``."""
    return _digest(_TRACE, key, position, b"task", 16)


def span_id(key: SessionKey, position: int, role: SpanRole) -> int:
    """The 64-bit id of the ``role`` span of ``key`` that opens at ``position``."""
    return _digest(_SPAN, key, position, role.encode("ascii"), 8)


class SessionFold:
    """Feeds on one session's records in order and gives back the spans each one finishes.

    ``parent`` places a subagent session under its spawning span; ``switch`` finds
    the task a model-switched session came from; with ``content`` the spans carry the
    redacted messages.  Spans finished at or before ``floor`` are not built (a
    receiver holds them already).  ``spawns`` collects the ``subagent`` pointers and
    ``tasks`` every task's root span.
    """

    def __init__(
        self,
        key: SessionKey,
        *,
        parent: ParentLink | None = None,
        content: bool = False,
        switch: SwitchResolver | None = None,
        floor: int = 0,
    ) -> None:
        self.key = key
        self.parent = parent
        self.content = content
        self.switch = switch
        self.floor = floor
        self.position = 0
        self.spawns: list[Spawn] = []
        self.tasks: list[TaskRef] = []
        reference = clean_text(key.reference)
        self._common: Attributes = {
            "gen_ai.conversation.id": reference,
            "session.id": parent.session if parent is not None else reference,
        }
        self._agent = clean_text(key.agent)
        self._provider = self._model = ""
        self._source: str | None = None
        self._system: str | None = None
        self._seen_input = False
        self._now = self._prev = self._before_begin = 0
        self._task: TaskState | None = None
        self._request: RequestState | None = None
        self._window: RequestState | None = None  # ended, waiting for its token_usage
        self._calls: dict[str | int, ToolState] = {}  # open calls by id (by position without one)
        self._compaction: CompactionState | None = None
        self._pending: list[dict[str, Any]] = []  # input no request has sent (content)
        self._retry_of: tuple[int, int] | None = None

    @property
    def session(self) -> str:
        """The ``session.id`` value: the root session's (redacted) reference."""
        return str(self._common["session.id"])

    def feed(self, position: int, record: TraceRecord) -> list[Span]:
        """Take the record at ``position``; the spans it finishes, in the order they finished."""
        out: list[Span] = []
        self.position = position
        self._prev = self._now
        stamp = record_time_ns(record)
        if stamp is not None:
            self._now = stamp
        if record.has_origin:
            return out  # a subagent's message: its own trace tells it
        kind = record.kind
        if kind == "event_msg":
            self._event(position, record, out)
        elif kind == "model_msg" and record.is_model_msg:
            self._message(position, record, out)
        elif kind == "session_meta":
            self._meta(record, out)
        return out

    def has_open(self) -> bool:
        """True while some span is open (settling would close it)."""
        return bool(
            self._window is not None
            or (self._request is not None and not self._request.done)
            or any(not tool.done for tool in self._calls.values())
            or (self._compaction is not None and not self._compaction.done)
            or (self._task is not None and not self._task.done)
        )

    def settle(self) -> list[Span]:
        """Close every open span at the last record, for a session that has gone quiet.

        The task ends there; a request or tool call still running is marked
        ``pentrace.open``.  What was closed stays closed: when its records
        arrive later, nothing is emitted again (the ids would repeat)."""
        out: list[Span] = []
        position, now = self.position, self._now
        # Settling comes after the last record: the floor (spans a receiver holds up to that
        # record) does not cover it.  A replay that settles where a cursor says it did
        # drops what this returns.
        floor, self.floor = self.floor, -1
        try:
            self._close_window(position, out)
            if self._request is not None:
                self._finish_request(self._request, position, out, now, still_open=True)
            for tool in self._calls.values():
                self._finish_tool(tool, position, out, now, still_open=True)
            if self._compaction is not None:
                compaction = self._compaction
                self._finish_compaction(compaction, position, out, now, {}, still_open=True)
            if self._task is not None:
                self._finish_task(self._task, position, out, now)
        finally:
            self.floor = floor
        return out

    # -- records -----------------------------------------------------------------------
    def _event(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        ptype = record.ptype
        if ptype == "request_begin":
            self._begin(position, out)
        elif ptype == "request_end":
            self._end(position, record, out)
        elif ptype == "token_usage":
            self._usage(position, record, out)
        elif ptype == "approval_decision":
            self._approval(record)
        elif ptype == "abort":
            self._abort(record)
        elif ptype == "compaction_begin":
            self._compaction_begin(position, record, out)
        elif ptype == "compaction_end":
            self._compaction_end(position, record, out)
        elif ptype == "subagent":
            self._subagent(position, record, out)
        elif ptype == "goal_finished" and self._task is not None:
            goal = clean_payload(record).get("outcome")
            self._task.goal = goal if isinstance(goal, str) else None
            if goal == "aborted":
                self._task.outcome = "aborted"

    def _message(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        ptype = record.ptype
        if ptype == "tool_call":
            self._call(position, record, out)
        elif ptype == "tool_call_output":
            self._output(position, record, out)
        elif record.role == "user":
            self._input(position, record, out)
        elif self._request is not None:
            self._request.answered = True
            if self.content:
                part = output_part(ptype, clean_payload(record))
                if part is not None:
                    self._request.outputs.append(part)

    def _meta(self, record: TraceRecord, out: list[Span]) -> None:
        self._close_window(self.position, out)  # a new shard: a new context
        payload = clean_payload(record)
        provider, model = payload.get("provider"), payload.get("model_id")
        self._provider = provider if isinstance(provider, str) else ""
        self._model = model if isinstance(model, str) else ""
        if self.position == 1 and isinstance(payload.get("source"), str):
            self._source = payload["source"]
        if self.content:
            self._system = system_instructions(payload.get("system_prompt"))

    def _input(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        """User-side input: a task's prompt, unless a compaction asked for it."""
        if self._compaction is None:
            self._maybe_new_task(position, record, out)
        if not self._seen_input:
            self._seen_input = True
            text = record.payload().get("text")
            if isinstance(text, str) and text.startswith(_SWITCH) and self._task is not None:
                self._task.switch_from = _switch_source(text)
        if self.content:
            message = input_message(record.ptype, clean_payload(record))
            if message is not None:
                self._take_input(message)
                if self._task is not None and self._compaction is None:
                    self._task.prompts.append(message)

    def _take_input(self, message: dict[str, Any]) -> None:
        request = self._request
        if request is not None and not request.answered:
            request.inputs.append(message)
        else:
            self._pending.append(message)

    def _maybe_new_task(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        """A prompt opens a new task once the current one has made a request.

        A prompt inside a request that has no answer yet (PenguinHarness may write the
        input after ``request_begin``) opens the task at that ``request_begin``."""
        task, request = self._task, self._request
        if task is None:
            self._start_task(position, self._now, out, 0)
        elif request is not None:
            if request.answered or task.requests < 2:
                return
            task.requests -= 1
            fresh = self._start_task(request.position, request.start_ns, out, self._before_begin)
            fresh.requests = 1
            request.task, request.parent_id = fresh, fresh.span_id
        elif task.requests:
            self._start_task(position, self._now, out, self._prev)

    def _start_task(self, position: int, start_ns: int, out: list[Span], old_end: int) -> TaskState:
        if self._task is not None:
            self._finish_task(self._task, self.position, out, old_end)
        parent = self.parent
        if parent is not None:
            trace, parent_id, root_start = parent.trace_id, parent.span_id, parent.task_start_ns
        else:
            trace, parent_id, root_start = trace_id(self.key, position), 0, start_ns
        task = TaskState(
            position,
            start_ns,
            trace,
            span_id(self.key, position, "task"),
            parent_id,
            root_start,
            self._provider,
            self._model,
        )
        self._task = task
        self.tasks.append(TaskRef(position, start_ns, task.trace_id, task.span_id))
        return task

    def _ensure_task(self, position: int, out: list[Span]) -> TaskState:
        return (
            self._task if self._task is not None else self._start_task(position, self._now, out, 0)
        )

    def _parent_span(self, task: TaskState) -> int:
        return self._compaction.span_id if self._compaction is not None else task.span_id

    # -- requests ----------------------------------------------------------------------
    def _begin(self, position: int, out: list[Span]) -> None:
        self._close_window(position, out)
        if self._request is not None:  # never ended: a new request cut it off (a crash)
            self._finish_request(self._request, position, out, self._prev)
        self._interrupt_calls(position, out)
        task = self._ensure_task(position, out)
        task.requests += 1
        self._request = RequestState(
            position,
            self._now,
            task,
            self._parent_span(task),
            self._provider,
            self._model,
            span_id(self.key, position, "chat"),
            self._retry_of,
            self._pending,
        )
        self._pending, self._retry_of = [], None
        self._before_begin = self._prev

    def _end(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        request = self._request
        if request is None:
            return  # an end without a begin: no request to show
        payload = clean_payload(record)
        status = payload.get("status")
        request.status = status if isinstance(status, str) and status else "unknown"
        message = payload.get("error_message")
        request.error_message = message if isinstance(message, str) else ""
        request.attempt = as_int(payload.get("attempt"))
        request.retry_in_ms = as_int(payload.get("retry_in_ms"))
        request.end_ns = self._now
        self._request = None
        completed = request.status == COMPLETED
        if request.parent_id == request.task.span_id:  # a compaction's request is its own
            request.task.outcome = None if completed else request.status
        if request.retry_in_ms is not None:
            self._retry_of = (request.task.trace_id, request.span_id)
        if not completed:  # its calls were never run, or were cut off with it
            for key, tool in list(self._calls.items()):
                if tool.request is request:
                    del self._calls[key]
                    self._finish_tool(tool, position, out, self._now, outcome=request.status)
        if request.usage is not None:
            self._finish_request(request, position, out, request.end_ns)
        else:
            self._window = request

    def _usage(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        payload = record.payload()  # counts only: nothing of it leaves as text
        delta = token_delta(payload)
        if delta is None:
            return
        fresh, output, cache_read, cache_write, _ = delta
        counts = (fresh + cache_read + cache_write, output, cache_read, cache_write)
        target = self._request if self._request is not None else self._window
        if target is None:  # no request to credit: kept apart on the task (one opens for it)
            task = self._ensure_task(position, out)
            task.unattributed = [a + b for a, b in zip(task.unattributed, counts, strict=True)]
            return
        target.usage = [a + b for a, b in zip(target.usage or [0, 0, 0, 0], counts, strict=True)]
        request = payload.get("request")
        reasoning = as_int(request.get("reasoning")) if isinstance(request, dict) else None
        if reasoning is not None:
            target.reasoning = (target.reasoning or 0) + reasoning
        if target is self._window:
            self._window = None
            self._finish_request(target, position, out, target.end_ns)

    def _close_window(self, position: int, out: list[Span]) -> None:
        if self._window is not None:
            window, self._window = self._window, None
            self._finish_request(window, position, out, window.end_ns)

    # -- tool calls --------------------------------------------------------------------
    def _call(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        payload = clean_payload(record)
        task = self._ensure_task(position, out)
        request = self._request
        if request is not None:
            request.answered = True
            request.tool_calls += 1
            if self.content:
                part = output_part("tool_call", payload)
                if part is not None:
                    request.outputs.append(part)
        call_id = record.tool_call_id
        usable = isinstance(call_id, str) and call_id and call_id not in self._calls
        name, shown_id = payload.get("name"), payload.get("tool_call_id")
        arguments = payload.get("arguments") if self.content else None
        self._calls[call_id if usable else position] = ToolState(
            position,
            self._now,
            shown_id if isinstance(shown_id, str) else "",
            name if isinstance(name, str) else "",
            task,
            self._parent_span(task),
            span_id(self.key, position, "tool"),
            request,
            None if arguments is None else str(arguments),
        )

    def _output(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        payload = clean_payload(record) if self.content else None
        if payload is not None:
            message = input_message("tool_call_output", payload)
            if message is not None:
                self._take_input(message)
        call_id = record.tool_call_id
        tool = self._calls.pop(call_id, None) if isinstance(call_id, str) else None
        if tool is None:
            return  # no call awaits it
        stop = record.stop_reason
        outcome = None if stop is None or stop == COMPLETED else clean_text(stop) or "failed"
        result = None if payload is None else payload.get("output")
        self._finish_tool(tool, position, out, self._now, outcome=outcome, result=result)

    def _interrupt_calls(self, position: int, out: list[Span]) -> None:
        """Calls a new request finds unanswered were cut off (resume answers them so)."""
        for tool in self._calls.values():
            self._finish_tool(tool, position, out, self._now, outcome="interrupted")
        self._calls.clear()

    def _approval(self, record: TraceRecord) -> None:
        call_id = record.tool_call_id
        tool = self._calls.get(call_id) if isinstance(call_id, str) else None
        decision = clean_payload(record).get("decision")
        if tool is not None and isinstance(decision, str):
            tool.decision = decision
            tool.events.append(("approval_decision", self._now, {"pentrace.decision": decision}))

    def _abort(self, record: TraceRecord) -> None:
        reason = clean_payload(record).get("reason")
        if self._request is not None:
            attributes: Attributes = {"pentrace.reason": reason} if isinstance(reason, str) else {}
            self._request.events.append(("abort", self._now, attributes))
        if self._task is not None:
            self._task.outcome = "aborted"

    def _subagent(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        """A child session hangs under the call that started it (the latest one still
        running), else under the task."""
        child = record.payload().get("session_id")
        if not isinstance(child, str) or not child:
            return
        task = self._ensure_task(position, out)
        running = [tool for tool in self._calls.values() if not tool.done]
        spawner = max(running, key=lambda tool: tool.position).span_id if running else task.span_id
        link = ParentLink(task.trace_id, spawner, self.session, task.root_start_ns)
        self.spawns.append(Spawn(child, position, link))

    # -- compactions -------------------------------------------------------------------
    def _compaction_begin(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        self._close_window(position, out)
        if self._compaction is not None:  # never ended
            self._finish_compaction(self._compaction, position, out, self._prev, {})
        task = self._ensure_task(position, out)
        payload = clean_payload(record)
        attributes: Attributes = {}
        for name in ("reason", "mode", "context", "turns"):
            value = payload.get(name)
            if isinstance(value, str | int) and not isinstance(value, bool):
                attributes[f"pentrace.compaction.{name}"] = value
        self._compaction = CompactionState(
            position, self._now, task, span_id(self.key, position, "compaction"), attributes
        )

    def _compaction_end(self, position: int, record: TraceRecord, out: list[Span]) -> None:
        self._close_window(position, out)
        compaction, self._compaction = self._compaction, None
        if compaction is None:
            return
        payload = clean_payload(record)
        status = payload.get("status")
        ending: Attributes = {
            "pentrace.compaction.status": status if isinstance(status, str) else ""
        }
        attempt = as_int(payload.get("attempt"))
        if attempt is not None:
            ending["pentrace.compaction.attempt"] = attempt
        message = payload.get("error_message")
        self._finish_compaction(
            compaction,
            position,
            out,
            self._now,
            ending,
            error=message if isinstance(message, str) else "",
        )

    # -- finishing ---------------------------------------------------------------------
    def _closing(
        self, state: RequestState | ToolState | CompactionState | TaskState, position: int
    ) -> bool:
        """Mark ``state`` finished; True on its first finish when its span is to be sent
        (``position`` is above the floor the receiver holds already)."""
        if state.done:
            return False
        state.done = True
        return position > self.floor

    def _finish_request(
        self,
        request: RequestState,
        position: int,
        out: list[Span],
        end_ns: int,
        *,
        still_open: bool = False,
    ) -> None:
        if self._closing(request, position):
            span = chat_span(
                request,
                position,
                end_ns,
                self._common,
                system=self._system,
                still_open=still_open,
            )
            out.append(span)

    def _finish_tool(
        self,
        tool: ToolState,
        position: int,
        out: list[Span],
        end_ns: int,
        *,
        outcome: str | None = None,
        result: Any = None,
        still_open: bool = False,
    ) -> None:
        if self._closing(tool, position):
            out.append(
                tool_span(
                    tool,
                    position,
                    end_ns,
                    self._common,
                    outcome=outcome,
                    result=result,
                    still_open=still_open,
                )
            )

    def _finish_compaction(
        self,
        compaction: CompactionState,
        position: int,
        out: list[Span],
        end_ns: int,
        ending: Attributes,
        *,
        error: str = "",
        still_open: bool = False,
    ) -> None:
        if self._closing(compaction, position):
            out.append(
                compaction_span(
                    compaction,
                    position,
                    end_ns,
                    self._common,
                    ending,
                    error=error,
                    still_open=still_open,
                )
            )

    def _finish_task(self, task: TaskState, position: int, out: list[Span], end_ns: int) -> None:
        if not self._closing(task, position):
            return
        link = None
        if task.switch_from is not None and self.switch is not None:
            link = self.switch(task.switch_from, task.start_ns)
        out.append(
            task_span(
                task,
                position,
                end_ns,
                self._common,
                agent=self._agent,
                source=self._source,
                link=link,
            )
        )
