"""Spans to an OpenTelemetry receiver through the SDK, and the batch export (ADR 0097).

The spans become SDK spans (``ReadableSpan``: ids, times and attributes as
given) and leave through the SDK's OTLP/HTTP exporter, one synchronous call per
batch, so the caller knows whether the receiver acknowledged them.  The
exporter is configured the OpenTelemetry way: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
(used as it is), else ``OTEL_EXPORTER_OTLP_ENDPOINT`` (``/v1/traces`` appended),
``--endpoint`` over both; headers, timeout, compression and certificates are
the SDK's own variables; the resource is ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` is ``pentrace`` unless set).

**Lineage**: where a session's spans hang.  A subagent session's trace names no
parent: the parent's trace holds one ``subagent`` pointer with the child's id.  The
parent is looked for in the child's project (the child may run under another
agent), the child's own agent first, then by name, so every exporter picks the same
one; the pointer's position in the parent's fold gives the spawning span.  A
session that is not a subagent, or whose pointer is nowhere (yet), is a root: its
tasks are traces of their own.  A model-switched session names its source in its
first input; the link goes to the source's last task begun before the switch.
What it reads is remembered per session with the shards' sizes, and read again
when they change.

This module imports the SDK; only ``pentrace otel`` and the followers that
export load it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from pentrace.domain.json_codec import escape_surrogates
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.errors import ConfigError, ExportError, PentraceError
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import (
    Attributes,
    AttributeValue,
    ParentLink,
    Span,
    SwitchResolver,
    TaskRef,
    clean_text,
)
from pentrace.infrastructure.redaction_policy import activate_policy
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef
from pentrace.infrastructure.trace.reader import read_session, read_shard

__all__ = [
    "DEFAULT_ENDPOINT",
    "ExportReport",
    "Lineage",
    "SpanSender",
    "export_sessions",
    "open_sender",
    "session_records",
    "settled",
    "signature",
    "traces_endpoint",
]

DEFAULT_ENDPOINT: Final = "http://localhost:4318"
_TRACES_PATH: Final = "/v1/traces"
_PROTOCOLS: Final = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_KINDS: Final = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_UNSET: Final = Status(StatusCode.UNSET)
_HAS_IS_REMOTE: Final = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK  # never remote
_PROTO_UNSET: Final = ProtoStatus(code=ProtoStatus.STATUS_CODE_UNSET)
_PROTO_KINDS: Final = {
    "internal": ProtoSpan.SpanKind.SPAN_KIND_INTERNAL,
    "client": ProtoSpan.SpanKind.SPAN_KIND_CLIENT,
}
_CONTAINERS: Final = {"span": ProtoSpan, "event": ProtoSpan.Event, "link": ProtoSpan.Link}
_INT64: Final = (-(2**63), 2**63 - 1)
BATCH_SPANS: Final = 512
_ATTEMPTS: Final = 3


def _version() -> str:
    try:
        return version("pentrace")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def traces_endpoint(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The traces URL: ``given`` (``--endpoint``), else the OTLP variables, else localhost.

    A base URL gets ``/v1/traces``; one that ends in it, or the traces variable,
    is used as it is."""
    env = os.environ if environ is None else environ
    for name in _PROTOCOLS:
        protocol = env.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise ConfigError(
                f"{name}={protocol}: pentrace exports over OTLP/HTTP with protobuf only",
                hint="set it to http/protobuf (or unset it) and point the endpoint at the "
                "receiver's OTLP/HTTP port, usually 4318",
            )
    direct = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if given is None and direct:
        url, source = direct, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    else:
        base = given if given is not None else env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        source = "--endpoint" if given is not None else "OTEL_EXPORTER_OTLP_ENDPOINT"
        base = base or DEFAULT_ENDPOINT
        url = base if base.rstrip("/").endswith(_TRACES_PATH) else base.rstrip("/") + _TRACES_PATH
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{source}: expected an http:// or https:// URL, found {clean_text(url)!r}",
            hint="for example --endpoint http://127.0.0.1:4318",
        )
    return url


def resource_of() -> Resource:
    """The resource every span carries: the OpenTelemetry variables', named ``pentrace``
    unless ``OTEL_SERVICE_NAME`` (or ``service.name`` in the attributes) names it."""
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "pentrace"}))
    return resource


class SpanSender:
    """Spans to one receiver, synchronously: :meth:`send` says whether it acknowledged them.

    ``exporter`` is any SDK ``SpanExporter``: the OTLP/HTTP one (:func:`open_sender`),
    or the SDK's in-memory exporter in tests.  ``where`` names the receiver in
    messages (redacted, since a URL may carry a password)."""

    def __init__(
        self, exporter: SpanExporter, where: str, resource: Resource | None = None
    ) -> None:
        self.exporter = exporter
        self.where = clean_text(where)
        self.resource = resource if resource is not None else resource_of()
        self.scope = InstrumentationScope("pentrace", _version())
        self._encoder: OtlpEncoder | None = None

    def sdk_span(self, span: Span) -> ReadableSpan:
        """The SDK span of ``span``: its own ids, times, attributes, events and links.

        Text is OTLP's UTF-8, so a lone surrogate a trace may spell goes as its JSON
        escape (ADR 0015)."""
        context = SpanContext(span.trace_id, span.span_id, False, _SAMPLED)
        parent = SpanContext(span.trace_id, span.parent_id, False, _SAMPLED)
        return ReadableSpan(
            name=escape_surrogates(span.name),
            context=context,
            parent=parent if span.parent_id else None,
            resource=self.resource,
            attributes=_utf8(span.attributes),
            events=[
                Event(escape_surrogates(name), _utf8(attributes), at)
                for name, at, attributes in span.events
            ],
            links=[
                Link(SpanContext(trace, linked, False, _SAMPLED), _utf8(attributes))
                for trace, linked, attributes in span.links
            ],
            kind=_KINDS[span.kind],
            status=Status(StatusCode.ERROR, escape_surrogates(span.error))
            if span.failed
            else _UNSET,
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=self.scope,
        )

    def send(self, spans: Sequence[Span]) -> bool:
        """Export ``spans`` in one call; True when the receiver acknowledged them.

        Into the SDK's OTLP/HTTP exporter the request goes as :meth:`encode` makes it,
        through that exporter's own HTTP client (endpoint, headers, compression, TLS,
        retries); any other exporter gets the SDK spans."""
        if not spans:
            return True
        client = self._otlp_client()
        if client is not None:
            data = self.encode(spans)
            limit = getattr(self.exporter, "_max_request_size", 0)
            if isinstance(limit, int) and 0 < limit < len(data):
                return False  # what the SDK exporter does with a request over its limit
            return bool(client.export(data).success)
        sdk_spans = [self.sdk_span(span) for span in spans]
        return self.exporter.export(sdk_spans) is SpanExportResult.SUCCESS

    def encode(self, spans: Sequence[Span]) -> bytes:
        """The OTLP request of ``spans``, equal to the SDK encoder's
        (``encode_spans([self.sdk_span(s) for s in spans])``) and several times faster
        (ADR 0105)."""
        if self._encoder is None:
            self._encoder = OtlpEncoder(self.sdk_span)
        encoded: bytes = self._encoder.request(spans).SerializeToString()
        return encoded

    def _otlp_client(self) -> Any:
        module = sys.modules.get("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        if module is None or not isinstance(self.exporter, module.OTLPSpanExporter):
            return None
        client = getattr(self.exporter, "_client", None)  # the SDK's OTLP/HTTP client
        usable = callable(getattr(client, "export", None))
        # Not for a shut exporter, nor an SDK that holds its client elsewhere.
        return client if usable and not getattr(self.exporter, "_shutdown", False) else None

    def close(self) -> None:
        """Shut the exporter down (its HTTP session)."""
        self.exporter.shutdown()


def _utf8(attributes: Attributes) -> Attributes:
    """Attributes OTLP can carry: text with a UTF-8 form (:func:`escape_surrogates`), and an
    integer beyond 64 bits as its digits (a trace may hold ``2**70``)."""
    clean: Attributes = {}
    for name, value in attributes.items():
        if isinstance(value, str):
            value = escape_surrogates(value)
        elif isinstance(value, tuple):
            value = tuple(escape_surrogates(item) for item in value)
        elif isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            value = str(value)
        clean[escape_surrogates(name)] = value
    return clean


_CACHED_TEXT: Final = 64  # a longer text is most likely unique (content, a path): not kept
_CACHE_SIZE: Final = 1 << 16


class OtlpEncoder:
    """Spans straight into the OTLP protocol classes, the SDK encoder's result, faster.

    The SDK encoder (``encode_spans``) builds two protocol messages per attribute in
    Python for every span; most attributes repeat (the operation, provider, model,
    session).  Here each distinct attribute is encoded once, as the serialized
    protocol message of a span (event, link) holding that one attribute, and a
    span is its fixed fields plus those fragments merged in: protobuf merges
    concatenated messages by appending repeated fields, in order.  The envelope
    (resource, scope) comes from the SDK encoder itself.  A span whose attribute
    names change under :func:`_utf8` (a lone surrogate) takes the SDK's way, so
    the two never differ; the property tests hold them equal over generated sessions.
    """

    def __init__(self, reference: Callable[[Span], ReadableSpan]) -> None:
        self._reference = reference
        self._fragments: dict[tuple[str, str, type, AttributeValue], bytes] = {}
        self._envelope: ExportTraceServiceRequest | None = None

    def request(self, spans: Sequence[Span]) -> ExportTraceServiceRequest:
        """The ``ExportTraceServiceRequest`` of ``spans`` (one resource, one scope)."""
        request = ExportTraceServiceRequest()
        if not spans:
            return request
        if self._envelope is None:
            envelope = encode_spans([self._reference(spans[0])])
            envelope.resource_spans[0].scope_spans[0].ClearField("spans")
            self._envelope = envelope
        request.CopyFrom(self._envelope)
        add = request.resource_spans[0].scope_spans[0].spans.add
        for span in spans:
            self._span(span, add)
        return request

    def _span(self, span: Span, add: Callable[..., Any]) -> None:
        parts = self._parts("span", span.attributes)
        events = [self._parts("event", attributes) for _, _, attributes in span.events]
        links = [self._parts("link", attributes) for _, _, attributes in span.links]
        if parts is None or None in events or None in links:
            # An attribute name the SDK way changes (a lone surrogate): its encoder decides.
            reference = encode_spans([self._reference(span)])
            add().CopyFrom(reference.resource_spans[0].scope_spans[0].spans[0])
            return
        status = (
            ProtoStatus(code=ProtoStatus.STATUS_CODE_ERROR, message=escape_surrogates(span.error))
            if span.failed
            else _PROTO_UNSET
        )
        message = add(
            trace_id=span.trace_id.to_bytes(16, "big"),
            span_id=span.span_id.to_bytes(8, "big"),
            parent_span_id=span.parent_id.to_bytes(8, "big") if span.parent_id else None,
            name=escape_surrogates(span.name),
            kind=_PROTO_KINDS[span.kind],
            start_time_unix_nano=span.start_ns,
            end_time_unix_nano=span.end_ns,
            status=status,
            flags=_HAS_IS_REMOTE,
        )
        for (name, at, _), fragments in zip(span.events, events, strict=True):
            event = message.events.add(name=escape_surrogates(name), time_unix_nano=at)
            event.MergeFromString(fragments or b"")
        for (linked_trace, linked, _), fragments in zip(span.links, links, strict=True):
            link = message.links.add(
                trace_id=linked_trace.to_bytes(16, "big"),
                span_id=linked.to_bytes(8, "big"),
                flags=_HAS_IS_REMOTE,
            )
            link.MergeFromString(fragments or b"")
        message.MergeFromString(parts)

    def _parts(self, container: str, attributes: Attributes) -> bytes | None:
        """The attributes as serialized fragments of ``container``; None when a name changes."""
        fragments = self._fragments
        found: list[bytes] = []
        for name, value in attributes.items():
            fragment = fragments.get((container, name, value.__class__, value))
            if fragment is None:
                fragment = self._fragment(container, name, value)
                if fragment is None:
                    return None
            found.append(fragment)
        return b"".join(found)

    def _fragment(self, container: str, name: str, value: AttributeValue) -> bytes | None:
        ((clean_name, clean_value),) = _utf8({name: value}).items()
        if clean_name != name:
            return None
        pair = KeyValue(key=name, value=_any(clean_value))
        fragment: bytes = _CONTAINERS[container](attributes=[pair]).SerializeToString()
        if not isinstance(value, str | tuple) or len(value) <= _CACHED_TEXT:
            if len(self._fragments) >= _CACHE_SIZE:
                self._fragments.clear()
            self._fragments[(container, name, value.__class__, value)] = fragment
        return fragment


def _any(value: AttributeValue) -> AnyValue:
    """The ``AnyValue`` of a value, as the SDK encoder makes it."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(array_value=ArrayValue(values=[_any(item) for item in value]))


def open_sender(given: str | None, *, timeout: float | None = None) -> SpanSender:
    """A sender to the configured receiver through the SDK's OTLP/HTTP exporter."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    url = traces_endpoint(given)
    return SpanSender(OTLPSpanExporter(endpoint=url, timeout=timeout), url)


def settled(ref: SessionRef, now_s: float, settle_s: float) -> bool:
    """True when no shard of the session changed in the last ``settle_s`` seconds."""
    if settle_s <= 0:
        return True
    newest = 0.0
    for shard in ref.shards:
        try:
            newest = max(newest, os.stat(shard.path).st_mtime)
        except FileNotFoundError:
            continue
    return now_s - newest >= settle_s


@dataclass
class ExportReport:
    """What a batch export did; ``still_open`` counts spans of sessions still being written
    that were left for a later export (or the live exporter)."""

    endpoint: str
    sessions: int = 0
    spans: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    still_open: int = 0
    failed_sessions: list[str] = field(default_factory=list)


def _roots_first(lineage: Lineage, refs: Iterable[SessionRef]) -> list[SessionRef]:
    """Sessions that are nobody's subagent first, so a child finds its parent's fold."""
    flagged = [(lineage.is_subagent(ref.shards), ref) for ref in refs]
    return [ref for child, ref in flagged if not child] + [ref for child, ref in flagged if child]


def _spans_of(
    lineage: Lineage, ref: SessionRef, *, content: bool, settle: bool, report: ExportReport
) -> Iterator[Span]:
    key = ref.key
    parent = lineage.parent_of(key) if lineage.is_subagent(ref.shards) else None
    fold = SessionFold(key, parent=parent, content=content, switch=lineage.switch_resolver(key))
    for position, record in session_records(ref.shards):
        yield from fold.feed(position, record)
    if settle:
        yield from fold.settle()
    elif fold.has_open():
        report.still_open += 1
    lineage.remember(key, ref.shards, fold)


def export_sessions(
    root: DataRoot,
    refs: Iterable[SessionRef],
    sender: SpanSender,
    *,
    content: bool = False,
    settle_s: float = 300.0,
    now_s: float | None = None,
    window: tuple[int | None, int | None] = (None, None),
    progress: Callable[[SessionRef], None] | None = None,
) -> ExportReport:
    """Export every span of ``refs`` to ``sender``, batch by batch.

    A session whose shards changed in the last ``settle_s`` seconds keeps its
    open spans for later; ``window`` (ns since the epoch, either end open) keeps
    the traces whose root task began in it.  A session that cannot be read is
    reported and skipped; a receiver that refuses a batch ends the export with
    :class:`~pentrace.errors.ExportError` (what was acknowledged stays sent)."""
    activate_policy(root.path)  # the root's redaction rules, as every store derived from it
    report = ExportReport(sender.where)
    lineage = Lineage(root)
    now = time.time() if now_s is None else now_s
    since, until = window
    batch: list[Span] = []
    for ref in _roots_first(lineage, refs):
        if progress is not None:
            progress(ref)
        try:
            spans = _spans_of(
                lineage, ref, content=content, settle=settled(ref, now, settle_s), report=report
            )
            for span in spans:
                start = span.task_start_ns
                if (since is None or start >= since) and (until is None or start <= until):
                    batch.append(span)
                    if len(batch) >= BATCH_SPANS:
                        _deliver(sender, batch, report)
        except ExportError:
            raise
        except PentraceError as error:
            report.failed_sessions.append(f"{ref.key.reference}: {error.message}")
            continue
        report.sessions += 1
    _deliver(sender, batch, report)
    return report


def _deliver(sender: SpanSender, batch: list[Span], report: ExportReport) -> None:
    """Send ``batch`` (a few attempts: the SDK retries transient errors within each), count
    it and empty it."""
    if not batch:
        return
    for attempt in range(_ATTEMPTS):
        if sender.send(batch):
            break
        if attempt + 1 < _ATTEMPTS:
            time.sleep(0.5 * 2**attempt)
    else:
        raise ExportError(
            f"the receiver at {sender.where} did not accept {len(batch)} span(s) after "
            f"{_ATTEMPTS} attempts; {report.spans} span(s) were delivered before",
            hint="check that it runs and reads OTLP/HTTP (often port 4318); --endpoint or "
            "OTEL_EXPORTER_OTLP_ENDPOINT names it.  Exporting again sends the same ids",
        )
    report.spans += len(batch)
    for span in batch:
        kind = str(span.attributes.get("gen_ai.operation.name", "compaction"))
        report.kinds[kind] = report.kinds.get(kind, 0) + 1
    batch.clear()


# -- lineage ---------------------------------------------------------------------------
Signature = tuple[tuple[str, int], ...]
_NOTHING: Final = sys.maxsize  # a fold floor that builds no span: only pointers and tasks
_RESCAN_S: Final = 5.0  # the least time between two reads of one project's pointers


def signature(shards: Iterable[ShardRef]) -> Signature:
    """The shards' paths and sizes: what changes when a session is written to."""
    sizes: list[tuple[str, int]] = []
    for shard in shards:
        try:
            sizes.append((str(shard.path), os.stat(shard.path).st_size))
        except FileNotFoundError:
            continue
    return tuple(sizes)


def session_records(shards: Iterable[ShardRef]) -> Iterator[tuple[int, TraceRecord]]:
    """A session's records with their positions (1-based, across its shards)."""
    return enumerate(read_session(shards), start=1)


@dataclass(frozen=True, slots=True)
class _Facts:
    signature: Signature
    spawns: dict[tuple[str, int], ParentLink]
    tasks: tuple[TaskRef, ...]


class Lineage:
    """Parents of subagent sessions and sources of model switches in one data root."""

    def __init__(self, root: DataRoot) -> None:
        self.root = root
        self._facts: dict[SessionKey, _Facts] = {}
        self._pointers: dict[str, tuple[Signature, dict[str, list[tuple[SessionKey, int]]]]] = {}
        self._parents: dict[SessionKey, ParentLink] = {}
        # Pointers the folds met, by (project, child id): found without reading a project.
        self._spawned: dict[tuple[str, str], dict[tuple[SessionKey, int], ParentLink]] = {}
        self._scanned: dict[str, float] = {}  # when each project's pointers were last read
        self._resolving: set[SessionKey] = set()
        self._cycles: set[SessionKey] = set()

    def is_subagent(self, shards: tuple[ShardRef, ...]) -> bool:
        """True when the session's first record says ``source: subagent``."""
        if not shards:
            return False
        try:
            first = next(iter(read_shard(shards[0].path)), None)
        except PentraceError:
            return False
        if first is None or first.kind != "session_meta":
            return False
        return first.payload().get("source") == "subagent"

    def remember(self, key: SessionKey, shards: tuple[ShardRef, ...], fold: SessionFold) -> None:
        """Keep what a fold over the whole session found (its pointers and tasks)."""
        spawns = {(spawn.child_id, spawn.position): spawn.link for spawn in fold.spawns}
        self._facts[key] = _Facts(signature(shards), spawns, tuple(fold.tasks))
        for (child, position), link in spawns.items():
            self._spawned.setdefault((key.project, child), {})[(key, position)] = link

    def parent_of(self, key: SessionKey) -> ParentLink | None:
        """The span a subagent session hangs under, or None (not found, or a pointer cycle)."""
        known = self._parents.get(key)
        if known is not None:
            return known
        if key in self._resolving:
            self._cycles.add(key)  # its parent chain comes back to it: it is the root
            return None
        self._resolving.add(key)
        try:
            found = self._find_parent(key)
        finally:
            self._resolving.discard(key)
        if key in self._cycles:
            self._cycles.discard(key)
            return None
        if found is not None:
            self._parents[key] = found
        return found

    def switch_resolver(self, key: SessionKey) -> SwitchResolver:
        """For :class:`SessionFold`: the source task of a model switch out of ``key``'s agent."""

        def resolve(source_id: str, at_ns: int) -> TaskRef | None:
            facts = self._facts_of(SessionKey(key.project, key.agent, source_id))
            if facts is None:
                return None
            before = [task for task in facts.tasks if task.start_ns <= at_ns]
            return before[-1] if before else None

        return resolve

    # -- reading -----------------------------------------------------------------------
    def _shards(self, key: SessionKey) -> list[ShardRef]:
        try:
            return self.root.find_shards(*key)
        except PentraceError:
            return []  # a name no session can have (it came from a trace)

    def _facts_of(self, key: SessionKey) -> _Facts | None:
        shards = self._shards(key)
        if not shards:
            return None
        now = signature(shards)
        known = self._facts.get(key)
        if known is not None and known.signature == now:
            return known
        parent = self.parent_of(key) if self.is_subagent(tuple(shards)) else None
        fold = SessionFold(key, parent=parent, floor=_NOTHING)
        try:
            for position, record in session_records(shards):
                fold.feed(position, record)
        except PentraceError:
            return None
        self.remember(key, tuple(shards), fold)
        return self._facts[key]

    def _find_parent(self, key: SessionKey) -> ParentLink | None:
        def order(pointer: tuple[SessionKey, int]) -> tuple[bool, str, str, int]:
            parent, position = pointer  # the child's own agent first, then by name
            return parent.agent != key.agent, parent.agent, parent.session_id, position

        met = self._spawned.get((key.project, key.session_id), {})
        known = sorted((pointer for pointer in met if pointer[0] != key), key=order)
        if known:
            return met[known[0]]
        candidates = sorted((p for p in self._pointers_to(key) if p[0] != key), key=order)
        for parent, position in candidates:
            facts = self._facts_of(parent)
            link = None if facts is None else facts.spawns.get((key.session_id, position))
            if link is not None:
                return link
        return None

    def _pointers_to(self, key: SessionKey) -> list[tuple[SessionKey, int]]:
        """The ``subagent`` pointers to ``key``'s id in its project (read again on a change)."""
        held = self._pointers.get(key.project)
        if held is not None and key.session_id in held[1]:
            return held[1][key.session_id]
        if time.monotonic() - self._scanned.get(key.project, -_RESCAN_S) < _RESCAN_S:
            return []  # read a moment ago: a project being written is not read on every pass
        self._scanned[key.project] = time.monotonic()
        try:
            refs = list(self.root.iter_sessions(key.project))
        except PentraceError:
            return []
        now = tuple(item for ref in refs for item in signature(ref.shards))
        if held is None or held[0] != now:
            index: dict[str, list[tuple[SessionKey, int]]] = {}
            for ref in refs:
                try:
                    for position, record in session_records(ref.shards):
                        if record.kind == "event_msg" and record.ptype == "subagent":
                            child = record.payload().get("session_id")
                            if isinstance(child, str):
                                index.setdefault(child, []).append((ref.key, position))
                except PentraceError:
                    continue  # an unreadable session points nowhere
            held = self._pointers[key.project] = (now, index)
        return held[1].get(key.session_id, [])
