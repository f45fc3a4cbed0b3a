"""``kinds_for``: which records may map to some event types, a test before the mapping."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import event_type_for
from pentrace.domain.runtime.mapping import EVENT_TYPES, MODEL_MESSAGE_TYPES, kinds_for
from pentrace.infrastructure.analytics.builtin.sessions import EVERY_TYPE
from pentrace.infrastructure.analytics.cold.bulkfold import _may_map

_PTYPES = [*EVENT_TYPES, *MODEL_MESSAGE_TYPES, "request_end", "compaction_end", "other", None, 7]
_KINDS = st.sampled_from(["session_meta", "model_msg", "event_msg", "other"]) | st.none()
_TYPES = sorted(EVERY_TYPE)


@given(
    kind=_KINDS | st.just([1]),
    ptype=st.sampled_from(_PTYPES),
    status=st.sampled_from(["completed", "aborted", "x", None]),
    position=st.integers(1, 3),
    types=st.sets(st.sampled_from(_TYPES), max_size=4),
)
def test_a_record_of_the_types_is_of_one_of_their_kinds(
    kind: object, ptype: object, status: object, position: int, types: set[str]
) -> None:
    record = TraceRecord(
        msgspec.json.encode({"type": kind, "payload": {"type": ptype, "status": status}})
    )
    kinds = kinds_for(types)
    if event_type_for(record, position) in types:
        assert _may_map(kinds, record)


def test_the_token_types_need_two_kinds_and_trace_records_any() -> None:
    tokens = {"session.created", "session.updated", "run.started", "token.usage.updated"}
    expected = {"session_meta": None, "event_msg": frozenset({"request_begin", "token_usage"})}
    assert kinds_for(tokens) == expected
    assert kinds_for({"trace.record"}) is None
    assert kinds_for({"tool.called", "run.error"}) == {
        "model_msg": frozenset({"tool_call"}),
        "event_msg": frozenset({"request_end"}),
    }
    assert kinds_for({"message.updated", "trace.event"}) == {"model_msg": None, "event_msg": None}
