"""Properties of the OpenTelemetry fold over generated sessions and hostile records.

* A generated legal session gives one ``chat`` span per request begun and one
  ``execute_tool`` span per tool call; the chat spans' token counts add up to the
  session's token numbers (the ones ``pentrace stats tokens`` shows); ids are unique
  and every parent is there.
* The live exporter's way of folding (a cursor of acknowledged positions, restarts
  that replay up to it, sessions settled mid-way) sends every span id a batch export
  sends, each once, and the very same spans when nothing was settled early.
* Records with odd values anywhere never break the fold, and what it gives the SDK
  always encodes as OTLP.
* A record's timestamp read the quick way (the shape PenguinHarness writes) is the
  one ``datetime.fromisoformat`` reads, for any text of that length.
* The sender's own OTLP encoding (ADR 0105) is the SDK encoder's, message for message
  and byte for byte: over generated sessions, odd records, and spans of any
  attributes (lone surrogates, integers past 64 bits, lists, events, links).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pentrace import testing as pt
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.export import SpanSender
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import Span, iso_ns, stamp_ns
from pentrace.projections.session_summary import TOKEN_FIELDS, add_tokens, token_delta
from tests.otel_support import fold_all, memory_sender
from tests.support import BOUNDED_PROPERTY

KEY = SessionKey("demo", "agent_1", pt.render.DEFAULT_SESSION_ID)


def _records(commands: list[pt.Command]) -> list[tuple[int, TraceRecord]]:
    lines = [line for shard in pt.render_shards(commands) for line in shard]
    return list(enumerate((TraceRecord(line) for line in lines), 1))


def _usage(span: Span) -> dict[str, int]:
    """The span's usage in ``pentrace stats tokens`` terms (input there is fresh input)."""
    counts = {
        name: value
        for name, value in span.attributes.items()
        if name.startswith("gen_ai.usage.") and isinstance(value, int)
    }
    if not counts:
        return {}
    cache_read = counts["gen_ai.usage.cache_read.input_tokens"]
    cache_write = counts["gen_ai.usage.cache_creation.input_tokens"]
    output = counts["gen_ai.usage.output_tokens"]
    everything_in = counts["gen_ai.usage.input_tokens"]
    return {
        "input": everything_in - cache_read - cache_write,
        "output": output,
        "cache_read": cache_read,
        "cache_write": cache_write,
        "total": everything_in + output,
    }


@settings(BOUNDED_PROPERTY, max_examples=150)
@given(pt.session_commands(open_tail=True))
def test_spans_count_requests_and_calls_and_add_up_the_tokens(commands: list[pt.Command]) -> None:
    recs = _records(commands)
    spans = fold_all(recs, KEY)
    kinds = [span.attributes.get("gen_ai.operation.name") for span in spans]
    assert kinds.count("chat") == sum(r.ptype == "request_begin" for _, r in recs)
    assert kinds.count("execute_tool") == sum(r.ptype == "tool_call" for _, r in recs)
    expected: dict[str, int] = {}
    for _, record in recs:
        delta = token_delta(record.payload()) if record.ptype == "token_usage" else None
        if delta is not None:
            add_tokens(expected, delta)
    found: dict[str, int] = {}
    for span in spans:
        usage = _usage(span)
        if usage:
            add_tokens(found, tuple(usage[name] for name in TOKEN_FIELDS))  # type: ignore[arg-type]
    assert found == expected
    ids = [span.span_id for span in spans]
    assert len(ids) == len(set(ids))
    for span in spans:
        assert span.parent_id == 0 or span.parent_id in ids
        assert span.start_ns <= span.end_ns
        assert span.opened <= span.finished
        assert span.trace_id == next(s.trace_id for s in spans if s.span_id in (span.span_id,))


def _comparable(span: Span) -> tuple[Any, ...]:
    return (
        span.name,
        span.trace_id,
        span.span_id,
        span.parent_id,
        span.start_ns,
        span.end_ns,
        sorted(span.attributes.items()),
        span.failed,
        span.error,
        span.links,
    )


@settings(BOUNDED_PROPERTY, max_examples=150)
@given(pt.session_commands(open_tail=True), st.data())
def test_a_cursor_with_restarts_and_early_settling_sends_each_batch_span_once(
    commands: list[pt.Command], data: st.DataObject
) -> None:
    recs = _records(commands)
    batch = fold_all(recs, KEY, content=True)
    acked = settled = 0
    fold = SessionFold(KEY, content=True)
    sent: list[Span] = []
    settled_early = False
    position = 0
    while position < len(recs):
        step = data.draw(st.integers(1, 6), label="records read in one pass")
        for number, record in recs[position : position + step]:
            sent.extend(fold.feed(number, record))
        position = min(position + step, len(recs))
        if data.draw(st.booleans(), label="settle now") and fold.has_open():
            sent.extend(fold.settle())
            settled = position
            settled_early = settled_early or position < len(recs)
        acked = position  # the receiver acknowledged: the cursor moves
        fold.floor = acked
        if data.draw(st.booleans(), label="restart (SIGKILL) here"):
            fold = SessionFold(KEY, content=True, floor=acked)
            for number, record in recs[:acked]:
                assert fold.feed(number, record) == []
                if number == settled:  # sent when it was settled: dropped on a replay
                    assert {s.span_id for s in fold.settle()} <= {s.span_id for s in sent}
    sent.extend(fold.settle())
    ids = [span.span_id for span in sent]
    assert len(ids) == len(set(ids))
    assert set(ids) == {span.span_id for span in batch}
    if not settled_early:
        assert sorted(map(_comparable, sent)) == sorted(map(_comparable, batch))


_odd: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "", "[model_switch_from]\nsession_id: ../x", "completed"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_counts = st.one_of(
    _odd,
    st.fixed_dictionaries(
        {},
        optional={name: _odd for name in ("cache_read", "cache_write", "output", "total")},
    ),
)
_payload_fields = {
    name: _odd
    for name in (
        "role",
        "status",
        "stop_reason",
        "name",
        "arguments",
        "output",
        "text",
        "thinking",
        "session_id",
        "provider",
        "model_id",
        "source",
        "system_prompt",
        "decision",
        "reason",
        "mode",
        "attempt",
        "retry_in_ms",
        "error_message",
        "outcome",
        "sender",
    )
}
_ptypes = st.sampled_from(
    [
        "text",
        "thinking",
        "tool_call",
        "tool_call_output",
        "image_url",
        "inline_data",
        "partial_text",
        "request_begin",
        "request_end",
        "token_usage",
        "approval_decision",
        "abort",
        "compaction_begin",
        "compaction_end",
        "subagent",
        "goal_finished",
        "mystery",
    ]
)
_payload = st.fixed_dictionaries(
    {"type": st.one_of(_ptypes, _odd)},
    optional={
        **_payload_fields,
        "tool_call_id": st.one_of(st.sampled_from(["a", "b", ""]), _odd),
        "role": st.sampled_from(["user", "assistant", "system"]),
        "request": _counts,
    },
)
_envelope = st.fixed_dictionaries(
    {
        "timestamp": st.one_of(
            st.sampled_from(
                [
                    "2026-11-29T10:00:00.000Z",
                    "0001-01-01T00:00:00Z",
                    "9999-12-31T23:59:59.999+14:00",
                    "2026-11-29 10:00",
                ]
            ),
            _odd,
        ),
        "type": st.sampled_from(["session_meta", "model_msg", "event_msg", "other"]),
        "payload": st.one_of(_payload, _odd),
    },
    optional={"origin": st.one_of(_odd, st.just(["child"]))},
)


@settings(BOUNDED_PROPERTY, max_examples=300)
@given(st.lists(st.one_of(_envelope, _odd), max_size=30), st.booleans())
def test_odd_records_never_break_the_fold_and_always_encode(
    values: list[Any], content: bool
) -> None:
    recs = [(n, TraceRecord.from_value(v, n)) for n, v in enumerate(values, 1)]
    fold = SessionFold(KEY, content=content)
    spans = [span for number, record in recs for span in fold.feed(number, record)]
    spans += fold.settle()
    sender, _ = memory_sender()
    request = encode_spans([sender.sdk_span(span) for span in spans])
    assert len(request.SerializeToString()) >= 0
    _assert_encodes_as_the_sdk(sender, spans)
    encoded = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(encoded) == len(spans)
    for span in spans:
        assert 0 <= span.start_ns <= span.end_ns < 2**63


def _assert_encodes_as_the_sdk(sender: SpanSender, spans: list[Span]) -> None:
    """The sender's encoding of ``spans`` equals the SDK encoder's, twice (the second time
    from the fragments it kept)."""
    reference = encode_spans([sender.sdk_span(span) for span in spans])
    for _ in range(2):
        encoded = sender.encode(spans)
        assert ExportTraceServiceRequest.FromString(encoded) == reference
        assert encoded == reference.SerializeToString()


@settings(BOUNDED_PROPERTY, max_examples=150)
@given(pt.session_commands(open_tail=True), st.booleans())
def test_the_sender_encodes_generated_sessions_as_the_sdk_does(
    commands: list[pt.Command], content: bool
) -> None:
    spans = fold_all(_records(commands), KEY, content=content)
    sender, _ = memory_sender()
    _assert_encodes_as_the_sdk(sender, spans)


_ids = st.integers(1, 2**64 - 1)
_names = st.text(max_size=12)  # any code point, lone surrogates included
_values = st.one_of(
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    _names,
    st.text(min_size=65, max_size=90),  # longer than what the encoder keeps
    st.lists(_names, max_size=3).map(tuple),
)
_attributes = st.dictionaries(
    st.one_of(st.sampled_from(["gen_ai.operation.name", "k", "\ud800", "\\ud800"]), _names),
    _values,
    max_size=6,
)
_spans = st.builds(
    Span,
    name=_names,
    kind=st.sampled_from(["internal", "client"]),
    trace_id=st.integers(1, 2**128 - 1),
    span_id=_ids,
    parent_id=st.one_of(st.just(0), _ids),
    start_ns=st.integers(0, 2**63 - 1),
    end_ns=st.integers(0, 2**63 - 1),
    attributes=_attributes,
    failed=st.booleans(),
    error=_names,
    events=st.lists(st.tuples(_names, st.integers(0, 2**63 - 1), _attributes), max_size=2),
    links=st.lists(st.tuples(st.integers(1, 2**128 - 1), _ids, _attributes), max_size=2),
)


@settings(BOUNDED_PROPERTY, max_examples=300)
@given(st.lists(_spans, max_size=8))
def test_the_sender_encodes_spans_of_any_attributes_as_the_sdk_does(spans: list[Span]) -> None:
    sender, _ = memory_sender()
    _assert_encodes_as_the_sdk(sender, spans)


_stamp_chars = st.sampled_from("0123456789" * 3 + "-T:.Z+ ٣²x\ud800")


def _chars(size: int) -> st.SearchStrategy[str]:
    return st.text(_stamp_chars, min_size=size, max_size=size)


_stamps = st.one_of(
    st.builds(
        "{}-{:02d}-{:02d}T{:02d}:{:02d}:{}.{}Z".format,
        st.sampled_from(["0001", "1969", "1970", "2026", "9999"]),
        st.integers(1, 12),
        st.integers(1, 28),
        st.integers(0, 23),
        st.integers(0, 59),
        _chars(2),  # seconds, mostly digits
        _chars(3),
    ),
    _chars(24),
)


@settings(BOUNDED_PROPERTY, max_examples=500)
@given(_stamps)
def test_a_timestamp_read_the_quick_way_is_the_iso_reading(stamp: str) -> None:
    assert stamp_ns(stamp) == iso_ns(stamp)
    assert stamp_ns(stamp) == iso_ns(stamp)  # again, from the minute it kept
