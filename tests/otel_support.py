"""Receivers for the OpenTelemetry export tests: an OTLP/HTTP one in process, and Phoenix.

``Receiver`` is a real HTTP server on a loopback port that decodes OTLP/HTTP
protobuf requests with the OpenTelemetry protocol classes and keeps every copy
of every span it was sent; it can refuse (503) or go away and come back on the
same port.  ``Phoenix`` runs Arize Phoenix (``phoenix serve``) from the
executable named by ``PENTRACE_PHOENIX`` (``.ci/run`` installs it in a virtualenv
of its own and sets the variable); without it the Phoenix tests are skipped.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pentrace import testing as pt
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.export import SpanSender
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import ParentLink, Span, SwitchResolver
from tests.support import tool_turn

__all__ = [
    "FIXTURES",
    "NEEDS_PHOENIX",
    "PHOENIX",
    "Phoenix",
    "ReceivedSpan",
    "Receiver",
    "fold_all",
    "free_port",
    "memory_sender",
    "rich_root",
    "sdk_shape",
    "turns",
    "write_slowly",
]

FIXTURES: Final = Path(__file__).parent / "fixtures" / "penguin_harness"
PARENT_ID: Final = "session-2026-07-18-11-10-22-0000aaaa"
CHILD_ID: Final = "session-2026-07-18-11-11-00-0000bbbb"
PHOENIX: Final = os.environ.get("PENTRACE_PHOENIX", "")
_NO_PHOENIX: Final = (
    "needs Arize Phoenix: set PENTRACE_PHOENIX to its `phoenix` executable (.ci/run installs "
    "arize-phoenix in ~/.cache/pentrace-tests/phoenix-venv and sets it)"
)
NEEDS_PHOENIX: Final = pytest.mark.skipif(
    not (PHOENIX and shutil.which(PHOENIX)), reason=_NO_PHOENIX
)


def fold_all(
    records: Iterable[tuple[int, TraceRecord]],
    key: SessionKey,
    *,
    content: bool = False,
    parent: ParentLink | None = None,
    switch: SwitchResolver | None = None,
    settle: bool = True,
) -> list[Span]:
    """Every span of a session's records, settled at the end (a batch export's spans)."""
    fold = SessionFold(key, content=content, parent=parent, switch=switch)
    spans = [span for position, record in records for span in fold.feed(position, record)]
    return spans + fold.settle() if settle else spans


def memory_sender() -> tuple[SpanSender, InMemorySpanExporter]:
    """A sender into the SDK's in-memory exporter, and that exporter."""
    exporter = InMemorySpanExporter()
    return SpanSender(exporter, "memory"), exporter


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    return None if which is None else getattr(value, which)


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as a receiver got it (ids as hex, as Phoenix shows them)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    status: int
    status_message: str
    links: tuple[tuple[str, str], ...]
    resource: tuple[tuple[str, Any], ...]


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: ``copies`` holds every span it acknowledged, in
    order; ``refuse`` makes it answer 503 (nothing kept)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.copies: list[ReceivedSpan] = []
        self.requests = 0
        self.refuse = False
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The base URL (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if receiver.refuse or self.path != "/v1/traces":
                    self.send_response(503 if receiver.refuse else 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                receiver.take(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def take(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            resource = tuple(
                (kv.key, _value(kv.value)) for kv in resource_spans.resource.attributes
            )
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        ReceivedSpan(
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            span.name,
                            span.kind,
                            span.start_time_unix_nano,
                            span.end_time_unix_nano,
                            {kv.key: _value(kv.value) for kv in span.attributes},
                            span.status.code,
                            span.status.message,
                            tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in span.links),
                            resource,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.copies.extend(found)

    def held(self) -> dict[str, ReceivedSpan]:
        """One span per id, as a receiver that keeps the first copy holds them."""
        with self._lock:
            kept: dict[str, ReceivedSpan] = {}
            for span in self.copies:
                kept.setdefault(span.span_id, span)
            return kept


class Phoenix:
    """``phoenix serve`` on free loopback ports with a working folder of its own."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.grpc_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 240.0) -> Phoenix:
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        with (self.workdir / "phoenix.log").open("ab") as log:
            self.process = subprocess.Popen(
                [PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix exited: see {self.workdir / 'phoenix.log'}")
            try:
                self.get("/v1/projects")
                return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        raise RuntimeError(f"phoenix did not answer within {timeout} s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as answer:  # noqa: S310 (loopback)
            return json.loads(answer.read())

    def spans(self, project: str) -> list[dict[str, Any]]:
        """Every span Phoenix holds in ``project`` (none when the project does not exist)."""
        names = {p["name"] for p in self.get("/v1/projects")["data"]}
        if project not in names:
            return []
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = self.get(f"/v1/projects/{project}/spans?limit=1000{cursor}")
            found.extend(page["data"])
            if not page.get("next_cursor"):
                return found
            cursor = f"&cursor={page['next_cursor']}"

    def wait_for(self, project: str, count: int, timeout: float = 120.0) -> list[dict[str, Any]]:
        """The project's spans once at least ``count`` are in (Phoenix inserts in the
        background after it acknowledged)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans(project)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.5)


def _parent_commands() -> list[pt.Command]:
    """A session with a spawning call, a retried request, a denied call, an abort and a
    compaction: the generated half of the rich root."""
    usage = pt.TokenUsage(pt.TokenCounts(10, 20, 30, 100), pt.TokenCounts(10, 20, 30, 100))
    return [
        pt.StartSession(provider="anthropic", model_id="claude-sonnet-5"),
        pt.UserInput("review the change, with a subagent"),
        pt.BeginRequest(),
        pt.ToolCall("call_spawn", "run_subagent", '{"task":"review"}'),
        pt.Approval("call_spawn", "allow"),
        pt.SubagentPointer(CHILD_ID),
        pt.ToolOutput("call_spawn", "the reviewer says: fine"),
        pt.EndRequest("completed"),
        usage,
        pt.UserInput("now delete everything"),
        pt.BeginRequest(),
        pt.EndRequest("failed"),
        pt.BeginRequest(),
        pt.ToolCall("call_rm", "exec_command", '{"cmd":"rm -rf /"}'),
        pt.Approval("call_rm", "deny"),
        pt.ToolOutput("call_rm", "[denied]"),
        pt.Abort(),
        pt.EndRequest("aborted"),
        usage,
        pt.CompactionBegin("context", "summarize"),
        pt.UserInput(pt.strategies.COMPACTION_PROMPT),
        pt.BeginRequest(),
        pt.AssistantText("[summary]a review, then a refused delete[/summary]"),
        pt.EndRequest("completed"),
        usage,
        pt.CompactionEnd("context", "summarize", "completed"),
        pt.UserInput("thanks"),
        pt.BeginRequest(),
        pt.AssistantText("you are welcome"),
        pt.EndRequest("completed"),
        usage,
    ]


def _child_commands() -> list[pt.Command]:
    return [
        pt.StartSession(provider="anthropic", model_id="claude-haiku-5"),
        *tool_turn(
            "review: print('hello')",
            pt.ToolCall("call_read", "read_file", '{"path":"hello.py"}'),
            "print('hello')",
        ),
        pt.TokenUsage(pt.TokenCounts(1, 2, 3, 10), pt.TokenCounts(1, 2, 3, 10)),
        pt.BeginRequest(),
        pt.AssistantText("fine"),
        pt.EndRequest("completed"),
        pt.TokenUsage(pt.TokenCounts(2, 4, 6, 20), pt.TokenCounts(1, 2, 3, 10)),
    ]


def child_lines() -> list[list[bytes]]:
    """The child's shards, its meta saying ``source: subagent`` as spawned sessions do."""
    shards = pt.render_shards(_child_commands(), session_id=CHILD_ID)
    first = json.loads(shards[0][0])
    first["payload"]["source"] = "subagent"
    shards[0][0] = pt.render.envelope_line(first["timestamp"], "session_meta", first["payload"])
    return shards


def rich_root(root: Path) -> None:
    """The PenguinHarness fixtures (one agent each) and a generated parent with its subagent
    under ``generated/assistant``; the demo is added by the tests that want it."""
    for fixture in sorted(FIXTURES.glob("*.jsonl")):
        session_id = json.loads(fixture.read_bytes().split(b"\n", 1)[0])["payload"]["session_id"]
        lines = fixture.read_bytes().splitlines()
        pt.write_shards(root, "harness", fixture.stem, session_id, [lines])
    pt.write_trace(root, _parent_commands(), project="generated", agent="assistant",
                   session_id=PARENT_ID)  # fmt: skip
    pt.write_shards(root, "generated", "reviewer", CHILD_ID, child_lines())


def sdk_shape(span: Any) -> tuple[Any, ...]:
    """An SDK span (``ReadableSpan``) or a :class:`ReceivedSpan` in one comparable form."""
    if isinstance(span, ReceivedSpan):
        return (
            span.trace_id,
            span.span_id,
            span.parent_id,
            span.name,
            span.start,
            span.end,
            sorted(span.attributes.items()),
            span.status,
            span.links,
        )
    parent = span.parent
    return (
        f"{span.context.trace_id:032x}",
        f"{span.context.span_id:016x}",
        f"{parent.span_id:016x}" if parent is not None else "",
        span.name,
        span.start_time,
        span.end_time,
        sorted(span.attributes.items()),
        span.status.status_code.value,
        tuple((f"{ln.context.trace_id:032x}", f"{ln.context.span_id:016x}") for ln in span.links),
    )


def turns(count: int, *, failing_every: int = 3, compaction_at: int = 3) -> list[pt.Command]:
    """A session of ``count`` turns (a call and its output each, every ``failing_every``-th
    request failing), a discard compaction after turn ``compaction_at``."""
    commands: list[pt.Command] = [pt.StartSession()]
    for turn in range(count):
        commands += [
            *tool_turn(
                f"step {turn}",
                pt.ToolCall(f"call_{turn}", "exec_command", '{"cmd":"true"}'),
                "ok",
                status="failed" if turn % failing_every == 0 else "completed",
            ),
            pt.TokenUsage(pt.TokenCounts(1, 2, 3, 10), pt.TokenCounts(1, 2, 3, 10)),
        ]
        if turn == compaction_at:
            commands += [
                pt.CompactionBegin("context", "discard"),
                pt.CompactionEnd("context", "discard", "completed"),
            ]
    return commands


def write_slowly(
    root: Path, key: SessionKey, commands: list[pt.Command], pause: float, day: date | None = None
) -> None:
    """Append a session's lines one at a time, as a harness writes them."""
    from pentrace.infrastructure.storage.layout import DataRoot

    data = DataRoot(root)
    for index, lines in enumerate(pt.render_shards(commands, session_id=key.session_id), 1):
        path = data.shard_path(*key, index, day or pt.files.DEFAULT_DAY)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as handle:
            for line in lines:
                handle.write(line + b"\n")
                handle.flush()
                time.sleep(pause)
