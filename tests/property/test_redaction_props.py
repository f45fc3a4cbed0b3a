"""Properties of the redaction policy over random nested structures.

Corpus secrets are planted at random depths of random JSON-like values, inside
random surrounding text, and also as JSON-encoded strings: none may survive in
the encoded output, and redacting twice must equal redacting once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.redaction import is_redacted, redact
from pentrace.domain.runtime import build_event

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)
TEXT_SECRETS = [case for case in CORPUS["positives"] if case.get("embeddable")]
KEY_SECRETS = [case for case in CORPUS["positives"] if case["kind"] == "key"]
SEPARATORS = st.sampled_from(
    [" ", "\n", "\t", " \n", "\r\n", '"', "'", "(", ")", ",", ";", "<", ">", "[", "]", "`"]
)

safe_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8).filter(
    lambda key: not redact({key: 1}).paths
)
leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
structures = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(safe_keys, children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def planted_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A corpus secret string inside random text, with whitespace on both sides."""
    case = draw(st.sampled_from(TEXT_SECRETS))
    before = draw(st.text(max_size=15))
    after = draw(st.text(max_size=15))
    text = f"{before}{draw(SEPARATORS)}{case['input']}{draw(SEPARATORS)}{after}"
    return text, case["secrets"]


@st.composite
def planted(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """A corpus secret as text, as a key/value pair, or JSON-encoded inside a string."""
    how = draw(st.sampled_from(["text", "key", "json"]))
    if how == "key":
        case = draw(st.sampled_from(KEY_SECRETS))
        return case["input"], case["secrets"]
    text, secrets = draw(planted_text())
    if how == "json":
        return json.dumps({"note": text, "n": 1}), secrets
    return text, secrets


def plant(draw: st.DrawFn, base: Any, item: Any) -> Any:
    """Put ``item`` at a random place inside ``base`` (or wrap base around it)."""
    if isinstance(base, dict) and base and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(base)))
        return {**base, key: plant(draw, base[key], item)}
    if isinstance(base, list) and base and draw(st.booleans()):
        index = draw(st.integers(0, len(base) - 1))
        return [*base[:index], plant(draw, base[index], item), *base[index + 1 :]]
    if isinstance(base, list):
        return [*base, item]
    return {"slot": item, "other": base} if draw(st.booleans()) else [base, item]


@st.composite
def structures_with_secrets(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """A random structure with one to three corpus secrets planted in it."""
    value = draw(structures)
    secrets: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        item, found = draw(planted())
        value = plant(draw, value, item)
        secrets.extend(found)
    return value, secrets


@settings(max_examples=200, deadline=None)
@given(structures_with_secrets())
def test_no_planted_secret_survives_in_the_encoded_output(case: tuple[Any, list[str]]) -> None:
    value, secrets = case
    result = redact(value)
    encoded = msgspec.json.encode(result.value).decode("utf-8")
    for secret in secrets:
        assert secret not in encoded
    assert result.classification == "sensitive"


@settings(max_examples=200, deadline=None)
@given(structures_with_secrets() | structures.map(lambda value: (value, [])))
def test_redaction_is_idempotent(case: tuple[Any, list[str]]) -> None:
    once = redact(case[0]).value
    assert redact(once).value == once
    assert is_redacted(once)


@settings(max_examples=200, deadline=None)
@given(structures)
def test_redaction_returns_a_copy_and_never_mutates_its_input(value: Any) -> None:
    before = msgspec.json.encode(value)
    redact(value)
    assert msgspec.json.encode(value) == before


envelope_fields = st.dictionaries(st.text(max_size=10), structures, max_size=3)


@settings(max_examples=80, deadline=None)
@given(
    payload=envelope_fields,
    actor=envelope_fields,
    scope=envelope_fields,
    correlation=envelope_fields,
    projections=envelope_fields,
    subject=st.text(max_size=30),
    planted_secret=planted(),
)
def test_every_built_envelope_is_a_fixed_point_the_ledger_accepts(
    payload: dict[str, Any],
    actor: dict[str, Any],
    scope: dict[str, Any],
    correlation: dict[str, Any],
    projections: dict[str, Any],
    subject: str,
    planted_secret: tuple[Any, list[str]],
) -> None:
    item, secrets = planted_secret
    event = build_event(
        event_type="message.updated",
        payload={**payload, "planted": item},
        time_ms=0,
        sequence=1,
        actor={**actor, "planted": item},
        scope=scope,
        correlation=correlation,
        projections=projections,
        subject=subject,
    )
    envelope = event.to_builtins()
    assert is_redacted(envelope)
    encoded = msgspec.json.encode(envelope).decode("utf-8")
    for secret in secrets:
        assert secret not in encoded
