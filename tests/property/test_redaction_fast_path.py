"""redact()'s fast loop over plain dicts hides exactly what the full walk hides.

The differential contract: for any input, :func:`redact` (fast path where it
applies) and :func:`redact_reference` (the full walk) give equal values, equal
paths in equal order and the same classification.  Inputs mix the redaction
corpus's secrets (as values, as secret keys, as keys themselves), names that
make the walk look at neighbours (``name``/``value``, ``redacted_fields``),
JSON-looking strings, lists, odd key and scalar types, and depths at the
200-level cut.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.redaction import (
    REDACTED,
    is_redacted,
    redact,
    redact_reference,
    redact_string,
)
from pentrace.domain.redaction import core as redaction
from pentrace.domain.runtime.envelope import build_event

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)
TEXT_SECRETS = [case["input"] for case in CORPUS["positives"] if case.get("embeddable")]
KEY_SECRETS = [case["input"] for case in CORPUS["positives"] if case["kind"] == "key"]
NEAR_MISSES = [case["input"] for case in CORPUS["negatives"] if isinstance(case["input"], str)]
SECRET_KEY_NAMES = sorted({key for item in KEY_SECRETS for key in item})

keys = (
    st.sampled_from(["type", "role", "text", "tokens", "input_tokens", "session_id", "id"])
    | st.sampled_from(SECRET_KEY_NAMES)
    | st.sampled_from(["name", "value", "Value", "val", "key", "header", "redacted_fields"])
    | st.sampled_from([TEXT_SECRETS[0][:40], "sk-proj-Q7vX2mN9pL4kR8tW1yZ3aB6cD0eF5gH7jK2"])
    | st.text(max_size=10)
)
strings = (
    st.sampled_from(TEXT_SECRETS)
    | st.sampled_from(NEAR_MISSES or ["plain"])
    | st.sampled_from(["OPENAI_API_KEY", "--api-key", "Authorization", '{"password": "x1y2z3"}'])
    | st.sampled_from([" [1, 2]", "[redacted]", "[redacted:api_key]", "\tindented"])
    | st.text(max_size=30)
)
scalars = strings | st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
odd_keys = st.integers() | st.booleans()
values = st.recursive(
    scalars,
    lambda children: (
        st.dictionaries(keys, children, max_size=5)
        | st.dictionaries(odd_keys, children, max_size=2)
        | st.lists(children, max_size=3)
    ),
    max_leaves=16,
)


def _not_json_like(text: str) -> bool:
    # Strings the walk might parse as JSON leave the fast path by design.
    return not text or not (text[0] in "[{" or text[0].isspace())


plain_values = st.recursive(
    st.text(max_size=30).filter(_not_json_like)
    | st.sampled_from([text for text in TEXT_SECRETS if _not_json_like(text)])
    | st.integers()
    | st.none(),
    lambda children: st.dictionaries(st.sampled_from(["a", "b", "text", "cmd"]), children),
    max_leaves=10,
)
depths = st.integers(0, 3) | st.integers(195, 201)


def _same(value: Any, depth: int) -> None:
    fast = redact(value, depth=depth)
    slow = redact_reference(value, depth=depth)
    assert fast.value == slow.value
    assert [type(item) for item in _leaves(fast.value)] == [
        type(item) for item in _leaves(slow.value)
    ]
    assert fast.paths == slow.paths
    assert fast.classification == slow.classification


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=6), depths)
def test_the_fast_path_redacts_any_mapping_exactly_as_the_full_walk(
    value: dict[Any, Any], depth: int
) -> None:
    _same(value, depth)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "text"]), plain_values, min_size=1), depths)
def test_plain_mappings_take_the_fast_path_and_agree_with_the_full_walk(
    value: dict[str, Any], depth: int
) -> None:
    _same(value, depth)
    if depth < 190:
        # The differential test above is only worth something if the fast
        # loop really answers for plain inputs, without the full walk.
        with patch.object(redaction, "_walked", side_effect=AssertionError("walked")):
            redact(value, depth=depth)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(KEY_SECRETS), st.sampled_from(TEXT_SECRETS))
def test_corpus_secrets_nested_in_plain_mappings_are_hidden_the_same_way(
    key_case: dict[str, Any], text: str
) -> None:
    value = {"outer": {**key_case, "note": text}, "cmd": text}
    _same(value, 1)
    assert redact(value).paths


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=6), st.booleans())
def test_is_redacted_answers_exactly_what_comparing_with_the_full_walk_answers(
    value: dict[Any, Any], redact_first: bool
) -> None:
    # Redacted inputs make the True answer as common as the False one.
    candidate = redact_reference(value).value if redact_first else value
    assert is_redacted(candidate) == (redact_reference(candidate).value == candidate)


def _agrees(candidate: Any) -> None:
    expected = redact_reference(candidate).value == candidate
    assert is_redacted(candidate) == expected
    # Again, with every string and key tuple of the first check remembered.
    assert is_redacted(candidate) == expected


path_entries = strings | st.sampled_from(["--api-key", "OPENAI_API_KEY", "password", "token"])
envelopes = st.fixed_dictionaries(
    {
        "id": strings,
        "type": strings,
        "scope": st.dictionaries(keys, strings | st.none(), max_size=4),
        "privacy": st.fixed_dictionaries(
            {
                "classification": st.sampled_from(["public", "sensitive"]),
                "redacted": st.booleans(),
                "redacted_fields": st.lists(path_entries, max_size=4)
                | st.tuples(path_entries, path_entries)
                | values,
            }
        ),
        "payload": st.dictionaries(keys, values, max_size=4),
    }
)


@settings(max_examples=300, deadline=None)
@given(envelopes, st.booleans())
def test_is_redacted_on_envelope_shapes_answers_what_the_full_walk_answers(
    envelope: dict[str, Any], redact_first: bool
) -> None:
    # Envelope shapes take the key-tuple fast loop, including the item-by-item
    # path list (where ``["--api-key", "x"]`` names fields and hides nothing).
    _agrees(redact_reference(envelope).value if redact_first else envelope)


@settings(max_examples=60, deadline=None)
@given(envelopes, st.integers(194, 201), st.booleans())
def test_is_redacted_cuts_over_deep_envelopes_where_the_walk_cuts(
    envelope: dict[str, Any], levels: int, redact_first: bool
) -> None:
    nested: Any = envelope
    for _ in range(levels):
        nested = {"a": nested}
    _agrees(redact_reference(nested).value if redact_first else nested)


def test_a_secret_inside_a_redacted_paths_list_is_refused() -> None:
    secret = "sk-proj-Q7vX2mN9pL4kR8tW1yZ3aB6cD0eF5gH7jK2"
    clean = {"privacy": {"redacted_fields": ["--api-key", "payload.text"]}}
    assert is_redacted(clean)
    assert not is_redacted({"privacy": {"redacted_fields": ["--api-key", secret]}})
    assert not is_redacted({"privacy": {"redacted_fields": [{"password": "hunter2"}]}})
    # A tuple is not a paths list: the walk applies the list rules (and makes a list).
    assert not is_redacted({"privacy": {"redacted_fields": ("a", "b")}})


def test_a_built_envelope_is_checked_without_the_full_walk() -> None:
    # The ledger checks every envelope: the fast loop must answer for the
    # ordinary ones alone, or the speed of ``ledger sync`` is lost.
    envelope = build_event(
        event_type="message.updated",
        payload={"text": "hello", "meta": {"n": 1}},
        time_ms=1,
        sequence=1,
        scope={"session_id": "s1"},
        actor={"type": "assistant", "id": "a"},
        projections={"opencode": {"id": "message.updated:s1:1", "type": "message.updated"}},
    ).to_builtins()
    assert envelope["privacy"]["redacted_fields"] == []
    with patch.object(redaction, "_walk_keeps", side_effect=AssertionError("walked")):
        assert is_redacted(envelope)


def test_every_kind_of_value_is_cut_at_the_depth_the_walk_cuts_it() -> None:
    # A sweep across the 200-level cut: each kind of value (JSON-looking text,
    # dicts, lists, inside a paths list and beside it) under each nesting.
    leaves: list[Any] = [" [1, 2]", '{"a": 1}', {"a": 1}, [1], "plain", 5]
    for levels in range(190, 202):
        for leaf in leaves:
            for envelope in (
                {"privacy": {"redacted_fields": ["x", leaf]}},
                {"payload": {"text": leaf}},
                {"payload": {"password": REDACTED, "items": leaf}},
            ):
                nested: Any = envelope
                for _ in range(levels):
                    nested = {"a": nested}
                _agrees(nested)
                _agrees(redact_reference(nested).value)


@settings(max_examples=200, deadline=None)
@given(strings, st.integers(0, 3) | st.integers(196, 200))
def test_redact_string_is_redact_of_the_string_and_remembers_it_clean(
    text: str, depth: int
) -> None:
    expected = redact_reference(text, depth=depth).value
    assert redact_string(text, depth=depth) == expected
    assert redact_string(text, depth=depth) == expected
    if isinstance(expected, str) and not (expected[:1] in ("[", "{") or expected[:1].isspace()):
        assert is_redacted({"projections": {"opencode": {"id": expected}}})
