"""A candidate's byte template gives ``encode_event`` of its struct, byte for byte.

:meth:`Candidates.encoded` fills a per-header byte template with the
position, time, correlation, payload and opencode anchor instead of building
and encoding a :class:`RuntimeEvent`.  Its bytes, id and time must be the
struct's (:meth:`Candidates.with_header` then ``encode_event``) for every
record, and where the template cannot encode a value (a lone surrogate) it
must step aside (None) so the struct's escaping path runs.  Names, texts and
directories with ``%``, quotes, backslashes, control characters and
non-ASCII letters meet the template's own ``%`` slots and string splicing.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime.candidate import Candidates
from pentrace.domain.runtime.session_events import encode_event
from pentrace.domain.session.key import SessionKey
from tests.property.test_event_mapping_header import SECRETS, records

_HOSTILE = ["%s", "%d%%", "100%", 'q"uote', "back\\slash", "tab\tnl\n", "é€𝄞", "\x00\x1f", "\u2028"]
_texts = st.sampled_from(_HOSTILE + SECRETS[:4]) | st.text(max_size=8)
_names = st.sampled_from(["s1", "p%d", "a%s", "séance", "x y"])


def _assert_template_is_the_struct(
    candidates: Candidates, position: int, record: TraceRecord, directory: str | None
) -> bool:
    found = candidates.with_header(position, record, directory)
    fast = candidates.encoded(position, record, directory)
    if found is None:
        assert fast is None
        return False
    event, header = found
    expected = encode_event(event)
    if fast is None:
        # Only a value msgspec cannot encode (a lone surrogate) sends the record back.
        with pytest.raises(UnicodeEncodeError):
            msgspec.json.encode(event)
        return False
    assert fast.json == expected, (position, record.raw)
    assert fast.header is header
    assert fast.event_id == event.id
    assert fast.time == event.time
    return True


@settings(max_examples=300, deadline=None)
@given(
    st.lists(records(), min_size=1, max_size=6),
    _names,
    _names,
    _names,
    st.sampled_from([None, "/srv/app", "/srv/100%", '/srv/"q"', "/srv/\\x", "/srv/é"]),
)
def test_the_template_gives_the_structs_bytes(
    batch: list[TraceRecord], project: str, agent: str, session: str, directory: str | None
) -> None:
    candidates = Candidates(SessionKey(project, agent, session))
    # Twice, so the second pass meets the templates remembered for the first.
    for position, record in enumerate(batch * 2, start=1):
        _assert_template_is_the_struct(candidates, position, record, directory)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        ["text", "tool_call_output", "token_usage", "request_end", "approval_decision"]
    ),
    _texts,
    _texts,
    st.one_of(st.none(), _texts),
    st.one_of(st.none(), st.lists(_texts, max_size=3)),
    st.integers(min_value=1, max_value=10**9),
    st.sampled_from(["2026-07-18T03:10:22.531Z", "1969-12-31T23:59:59Z", "bad", "2026-07-18"]),
)
def test_hostile_values_in_every_slot_give_the_structs_bytes(
    ptype: str,
    text: str,
    sender: str,
    tool_call_id: str | None,
    origin: list[str] | None,
    position: int,
    stamp: str,
) -> None:
    kind = "model_msg" if ptype in ("text", "tool_call_output") else "event_msg"
    payload: dict[str, Any] = {"type": ptype, "role": "user", "text": text, "sender": sender}
    if tool_call_id is not None:
        payload["tool_call_id"] = tool_call_id
    line: dict[str, Any] = {"timestamp": stamp, "type": kind, "payload": payload}
    if origin is not None:
        line["origin"] = origin
    record = TraceRecord.from_value(line)
    candidates = Candidates(SessionKey("acme%d", "coder", "s%s"))
    taken = _assert_template_is_the_struct(candidates, position, record, "/srv/%")
    surrogate = any("\ud800" <= c <= "\udfff" for c in text + sender + (tool_call_id or ""))
    assert taken or surrogate or any("\ud800" <= c <= "\udfff" for c in "".join(origin or []))


@pytest.mark.parametrize(
    ("payload", "templated"),
    [
        ({"type": "tool_call", "role": "assistant", "tool_call_id": "c%1"}, True),
        # A lone surrogate: msgspec cannot encode it, so the record takes the struct.
        ({"type": "text", "role": "assistant", "text": "bad \ud800"}, False),
    ],
)
def test_a_plain_record_takes_the_template_and_a_lone_surrogate_the_struct(
    payload: dict[str, Any], templated: bool
) -> None:
    record = TraceRecord.from_value(
        {"timestamp": "2026-07-18T03:10:22.531Z", "type": "model_msg", "payload": payload}
    )
    candidates = Candidates(SessionKey("acme", "coder", "s1"))
    if templated:
        assert _assert_template_is_the_struct(candidates, 7, record, "/srv/app")
    else:
        assert candidates.encoded(2, record, None) is None
        assert candidates.with_header(2, record, None) is not None
