"""Envelopes built with a shared header equal envelopes built field by field.

``runtime_event_from_record`` reuses the redacted header (type to actor) of
earlier events when the payload cannot change it.  The reference here is
``build_event`` with the record's fields, the way every envelope was built
before the header was shared: the encoded bytes must be equal, for the first
event with a header and for every later one, whatever the payload holds
(scope and correlation keys, ``part``, ``status``, secrets) and whatever the
session, agent or directory names (secret-looking ones included).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import build_event, runtime_event_from_record
from pentrace.domain.runtime import mapping as event_mapping
from pentrace.domain.session.key import SessionKey

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)
SECRETS = [case["input"] for case in CORPUS["positives"] if case.get("embeddable")]

names = st.sampled_from(["s1", "sess-2026", "", "password", "a b/c", SECRETS[0], "ghp_x"])
texts = st.sampled_from(SECRETS) | st.text(max_size=12) | st.sampled_from(["completed", "x"])
_READ_KEYS = ("status", "part", "info", "session_id", "sessionID", "agentID", "id", "directory")
_OTHER_KEYS = ("type", "text", "requestID", "trace_id", "provider", "sender", "role", "api_key")
payload_keys = st.sampled_from([*_READ_KEYS, *_OTHER_KEYS, "tool_call_id", "cwd", "messageID"])
payload_values = st.recursive(
    texts | st.none() | st.integers(),
    lambda children: st.dictionaries(payload_keys, children, max_size=3),
    max_leaves=6,
)


@st.composite
def records(draw: st.DrawFn) -> TraceRecord:
    kind = draw(st.sampled_from(["model_msg", "event_msg", "session_meta", "odd"]))
    ptype = draw(
        st.sampled_from(["text", "tool_call", "partial_text", "partial_tool_call", "subagent"])
        | st.sampled_from(["token_usage", "approval_decision", "compaction_end", "request_end"])
        | st.sampled_from(["partial_thinking", "new"])
    )
    payload: dict[str, Any] = {"type": ptype, **draw(st.dictionaries(payload_keys, payload_values))}
    for key, choices in (
        ("role", st.sampled_from(["user", "assistant"])),
        ("tool_call_id", names),
        ("sender", names),
        ("session_id", names),
        ("provider", names),
    ):
        if draw(st.booleans()):
            payload[key] = draw(choices)
    envelope: dict[str, Any] = {"timestamp": "2026-07-18T03:10:22.531Z", "type": kind}
    envelope["payload"] = payload
    if draw(st.booleans()):
        envelope["origin"] = draw(st.lists(names | st.integers(), max_size=2))
    return TraceRecord.from_value(envelope)


def _reference(record: TraceRecord, **options: Any) -> bytes:
    # ``event_from_record`` as it was: every field through ``build_event``.
    session_id = options["session_id"]
    position = options["position"]
    key = SessionKey(options["project"], options["agent"], session_id)
    payload = event_mapping._payload(record)
    event_type = event_mapping.event_type_for(record, position)
    anchor = (
        record.tool_call_id
        if isinstance(record.tool_call_id, str) and record.tool_call_id
        else position
    )
    event = build_event(
        event_type=event_type,
        payload=payload,
        time_ms=event_mapping.time_ms_of(record, 0),
        sequence=position,
        category=event_mapping.partial_category(record),
        stream_id=key.stream_id,
        scope=event_mapping.record_scope(
            record, payload, session_id, options["project"], options["agent"], options["directory"]
        ),
        correlation=event_mapping.record_correlation(record, payload),
        actor=event_mapping.record_actor(record, payload, options["agent"]),
        projections={"opencode": {"id": f"{event_type}:{session_id}:{anchor}", "type": event_type}},
        home=options["home"],
    )
    if event.stream_id == key.stream_id:
        # The id is the key's (ADR 0023) unless redaction changed the stream.
        event = msgspec.structs.replace(event, id=key.event_id(position))
    return msgspec.json.encode(event)


contexts = st.fixed_dictionaries(
    {
        "session_id": st.sampled_from(["s1", "", SECRETS[0]]),
        "project": st.sampled_from(["acme", "password"]),
        "agent": st.sampled_from(["a", "ghp_x"]),
        "directory": st.sampled_from(["~/work", "/srv/app", None, SECRETS[1]]),
        "home": st.sampled_from([None, "/home/u"]),
    }
)


def homeless_batches(max_size: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Run a test 200 times on lists of (record, context) whose context has no home folder."""
    batches = st.lists(
        st.tuples(records(), contexts.filter(lambda c: c["home"] is None)), max_size=max_size
    )
    return lambda test: settings(max_examples=200, deadline=None)(given(batches)(test))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(records(), contexts), min_size=1, max_size=8))
def test_a_shared_header_gives_the_bytes_of_a_field_by_field_build(
    batch: list[tuple[TraceRecord, dict[str, Any]]],
) -> None:
    # Each record is built twice, in sessions and contexts drawn from small
    # pools, so later builds meet headers remembered for other inputs.
    for position, (record, context) in enumerate(batch * 2, start=1):
        options = {**context, "position": position}
        built = runtime_event_from_record(record, **options)
        assert msgspec.json.encode(built) == _reference(record, **options)


def test_events_of_a_session_share_one_header_and_none_of_its_dicts() -> None:
    event_mapping._headers.clear()
    record = TraceRecord.from_value(
        {"timestamp": "2026-07-18T03:10:22.531Z", "type": "model_msg",
         "payload": {"type": "text", "role": "assistant", "text": "hi"}}
    )  # fmt: skip
    options: dict[str, Any] = {"session_id": "s1", "project": "p", "agent": "a", "directory": "/d"}
    first = runtime_event_from_record(record, position=2, **options)
    assert len(event_mapping._headers) == 1
    second = runtime_event_from_record(record, position=3, **options)
    assert len(event_mapping._headers) == 1
    first.scope["session_id"] = "changed"
    first.actor["id"] = "changed"
    assert second.scope["session_id"] == "s1"
    assert second.actor["id"] == "a"


def test_a_header_is_not_shared_between_different_homes() -> None:
    record = TraceRecord.from_value(
        {"timestamp": "2026-07-18T03:10:22.531Z", "type": "model_msg",
         "payload": {"type": "text", "role": "assistant", "text": "hi"}}
    )  # fmt: skip
    options: dict[str, Any] = {"session_id": "s1", "project": "p", "agent": "a"}
    bare = runtime_event_from_record(record, position=2, directory="~/w", **options)
    homed = runtime_event_from_record(record, position=2, directory="~/w", home="/h", **options)
    assert (bare.scope["directory"], homed.scope["directory"]) == ("~/w", "/h/w")
