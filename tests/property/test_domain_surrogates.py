"""Lone surrogates survive every path of ``domain/``, escaped as ADR 0015 escapes them.

A lone surrogate is legal in a JSON line (``"\\udc00"``) and PenguinHarness
writes it as it is, inside any string: a tool call's ``arguments`` (JSON
inside a string, where it may arrive as a code point or as an escape), text,
names, ids, the session's directory.  Generated records put them everywhere,
next to secrets, and every domain path must take them without an exception:
the JSON codec (round trip), the redaction walk, its fast loop and the
screen in front of it (all three agreeing), the runtime mapping and the
candidate fast path of :class:`SessionEvents` (byte for byte the mapping's
envelope, as ``tests/property/test_session_events.py`` holds it elsewhere).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.json_codec import JsonDecoder, JsonEncoder, json_bytes
from pentrace.domain.records import TraceRecord
from pentrace.domain.redaction import is_redacted, redact, redact_decoded, redact_reference
from pentrace.domain.redaction.shapes import HYPERSCAN
from pentrace.domain.runtime import SessionEvents, runtime_event_from_record
from pentrace.domain.session.key import SessionKey

_ENGINES = ("hs", "re", "off") if HYPERSCAN else ("re", "off")
_encode = JsonEncoder().encode
_decode = JsonDecoder[Any]().decode
_SURROGATES = st.sampled_from(["\udc00", "\ud800", "\udfff", "\ud83d", "\udcff"])
_PIECES = (
    _SURROGATES
    | st.sampled_from(["password=hunter2", "--api-key", "sk-argv-secret-789", "é", '"', "\\"])
    | st.text(max_size=6)
)
_texts = st.lists(_PIECES, max_size=5).map("".join)


@st.composite
def _arguments(draw: st.DrawFn) -> str:
    """A tool call's ``arguments``: JSON text whose strings hold surrogates (either spelling)."""
    value = {draw(_texts): draw(_texts), "argv": ["--token", draw(_texts)]}
    if draw(st.booleans()):
        return json.dumps(value, ensure_ascii=False)  # surrogates as code points
    return json.dumps(value)  # surrogates as \\uXXXX escapes


@st.composite
def _payloads(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(["tool_call", "text", "tool_call_output", "subagent", "abort"]))
    if kind == "tool_call":
        payload = {"type": kind, "role": "assistant", "name": draw(_texts)}
        payload |= {"arguments": draw(_arguments()), "tool_call_id": draw(_texts)}
        return "model_msg", payload
    if kind == "text":
        return "model_msg", {"type": kind, "role": "user", "text": draw(_texts), "sender": "u"}
    if kind == "tool_call_output":
        return "model_msg", {
            "type": kind,
            "role": "user",
            "output": draw(_texts),
            "tool_call_id": "c",
        }
    if kind == "subagent":
        return "event_msg", {"type": kind, "session_id": draw(_texts)}
    return "event_msg", {"type": kind, "reason": draw(_texts), draw(_texts): draw(_texts)}


@st.composite
def _records(draw: st.DrawFn) -> TraceRecord:
    kind, payload = draw(_payloads())
    value: dict[str, Any] = {"timestamp": "2026-07-18T03:10:22.531Z", "type": kind}
    value["payload"] = payload
    if draw(st.booleans()):
        value["origin"] = [draw(_texts)]
    # Written as a line the way PenguinHarness writes one: surrogates as escapes.
    return TraceRecord(_encode(value))


@settings(max_examples=300, deadline=None)
@given(_records(), _texts, st.one_of(st.none(), _texts), st.integers(1, 4))
def test_every_domain_path_takes_lone_surrogates_and_the_fast_paths_agree(
    record: TraceRecord, session: str, directory: str | None, position: int
) -> None:
    value = record.value()
    assert _decode(_encode(value)) == value
    reference = redact_reference(value)
    assert redact(value) == reference
    for engine in _ENGINES:
        assert redact_decoded(value, record.raw, engine=engine) == reference
    assert is_redacted(reference.value)
    assert _decode(json_bytes(reference.value)) == reference.value

    key = SessionKey("proj\udc00", "agent", session)
    encoded = SessionEvents(key, directory).encoded(position, record)
    full = runtime_event_from_record(
        record,
        session_id=session,
        position=position,
        project=key.project,
        agent=key.agent,
        directory=directory,
    )
    assert encoded.json == _encode(full.to_builtins())
    assert encoded.event == full
    encoded.json.decode("utf-8")  # the bytes are UTF-8: every surrogate left as an escape


def test_the_issues_arguments_string_is_redacted_and_mapped_without_a_crash() -> None:
    line = (
        rb'{"timestamp":"2026-07-18T03:10:22.531Z","type":"model_msg","payload":'
        rb'{"type":"tool_call","role":"assistant","name":"x",'
        rb'"arguments":"{\"k\":\"\\udc00\",\"password\":\"\udc00hunter2\"}","tool_call_id":"c1"}}'
    )
    record = TraceRecord(line)
    redacted = redact(record.value())
    assert "hunter2" not in json_bytes(redacted.value).decode("utf-8")
    encoded = SessionEvents(SessionKey("p", "a", "s"), None).encoded(2, record)
    assert b"hunter2" not in encoded.json
    assert b"\\udc00" in encoded.json
