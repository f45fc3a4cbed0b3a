"""A session's identity and the ids derived from it (ADR 0023)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pentrace.domain.session.key import (
    SessionKey,
    key_of_reference,
    legacy_event_parts,
    parse_session_stream,
    split_reference,
)
from pentrace.errors import AmbiguousIdError, UsageError
from pentrace.infrastructure.sessions.refs import ambiguous, match_sessions
from pentrace.infrastructure.storage.layout import name_problem

SID = "session-2026-11-29-10-00-00-3f8a1c2d"
# Any name the layout accepts as one path component (no '/', no control characters).
names = st.text(min_size=1, max_size=12).filter(lambda name: name_problem(name) is None)


def test_common_names_give_ids_that_read_as_the_reference() -> None:
    key = SessionKey("demo", "agent_1", SID)
    assert key.reference == f"demo/agent_1/{SID}"
    assert key.stream_id == f"session:demo/agent_1/{SID}"
    assert key.event_id(7) == f"evt:session:demo/agent_1/{SID}:00000007"


def test_the_same_id_under_two_agents_or_projects_gives_different_event_ids() -> None:
    ids = {
        SessionKey(project, agent, SID).event_id(1)
        for project, agent in (("p1", "a1"), ("p1", "a2"), ("p2", "a1"))
    }
    assert len(ids) == 3


def test_names_with_separators_and_unicode_are_percent_encoded_into_ascii() -> None:
    key = SessionKey("a:b", "x%y z", "séance")
    assert key.stream_id == "session:a%3Ab/x%25y%20z/s%C3%A9ance"
    assert key.event_id(1).isascii()
    assert parse_session_stream(key.stream_id) == key


@given(names, names, names)
def test_every_key_round_trips_through_its_stream_id_and_ids_stay_header_safe(
    project: str, agent: str, session_id: str
) -> None:
    key = SessionKey(project, agent, session_id)
    assert parse_session_stream(key.stream_id) == key
    event_id = key.event_id(3)
    # Safe in an SSE id: line, a Last-Event-ID header and a URL query.
    assert event_id.isascii()
    assert not {"\n", "\r", "\x00", " "} & set(event_id)
    assert event_id.count("/") == 2


@given(st.tuples(names, names, names), st.tuples(names, names, names))
def test_distinct_keys_never_share_a_stream(
    one: tuple[str, str, str], other: tuple[str, str, str]
) -> None:
    if one != other:
        assert SessionKey(*one).stream_id != SessionKey(*other).stream_id


def test_streams_of_other_kinds_and_the_earlier_form_are_no_session_keys() -> None:
    assert parse_session_stream(f"session:{SID}") is None
    assert parse_session_stream("global") is None
    assert parse_session_stream("session:a/b/c/d") is None
    assert parse_session_stream("session:a/b%2/c") is None  # a broken escape


def test_earlier_event_ids_are_recognised_and_new_ones_are_not() -> None:
    assert legacy_event_parts(f"evt:session:{SID}:00000042") == (SID, 42)
    assert legacy_event_parts(SessionKey("p", "a", SID).event_id(42)) is None
    assert legacy_event_parts("evt:global:00000001") is None
    assert legacy_event_parts(f"evt:session:{SID}:x") is None


def test_a_reference_names_its_owner_in_one_two_or_three_parts() -> None:
    assert split_reference("3f8a") == (None, None, "3f8a")
    assert split_reference("a1/3f8a") == (None, "a1", "3f8a")
    assert split_reference(" p1/a1/3f8a ") == ("p1", "a1", "3f8a")
    with pytest.raises(UsageError, match="found 4 parts"):
        split_reference("p/a/b/c")
    assert key_of_reference(f"p1/a1/{SID}") == SessionKey("p1", "a1", SID)
    with pytest.raises(UsageError, match="full session reference"):
        key_of_reference(SID)


def test_matching_prefers_an_exact_id_and_narrows_by_owner() -> None:
    longer = SID + "-copy"
    keys = [
        SessionKey("p1", "a1", SID),
        SessionKey("p1", "a2", SID),
        SessionKey("p2", "a1", SID),
        SessionKey("p1", "a1", longer),
    ]
    assert match_sessions(keys, SID) == keys[:3]  # the exact id wins over the longer one
    assert match_sessions(keys, f"p1/a2/{SID}") == [keys[1]]
    assert match_sessions(keys, f"a1/{SID}") == [keys[0], keys[2]]
    assert match_sessions(keys, "p2/a1/3f8a") == [keys[2]]  # a prefix of the 8-hex token
    assert match_sessions(keys, "p1/a1/session-2026-11-29") == [keys[0], keys[3]]
    assert match_sessions(keys, "p3/a1/3f8a") == []


def test_an_ambiguous_reference_lists_full_references_and_names_the_owner_form() -> None:
    error = ambiguous(SID, [SessionKey("p1", "a1", SID), SessionKey("p1", "a2", SID)])
    assert isinstance(error, AmbiguousIdError)
    assert error.message == (
        f"session reference {SID!r} matches 2 sessions: p1/a1/{SID}, p1/a2/{SID}"
    )
    assert error.hint == f"name the owner: project/agent/session-id, for example p1/a1/{SID}"
    # Candidates of one owner differ in their ids: more characters do tell them apart.
    same_owner = ambiguous("3f8", [SessionKey("p", "a", "3f8a"), SessionKey("p", "a", "3f8b")])
    assert same_owner.hint == "type more characters of the id"
