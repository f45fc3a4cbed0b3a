"""Envelope validation: privacy blocks Penguin refuses are refused here too, naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pentrace.compat.penguin import build_runtime_event, normalize_runtime_event
from pentrace.domain.runtime.envelope import envelope_problems, privacy_problem

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)


_MISSING = object()


def block(classification: Any, redacted: Any, fields: Any) -> dict[str, Any]:
    """A privacy block; ``_MISSING`` leaves a key out."""
    given = {"classification": classification, "redacted": redacted, "redacted_fields": fields}
    return {key: value for key, value in given.items() if value is not _MISSING}


@pytest.mark.parametrize(
    ("privacy", "field"),
    [
        (block("public", True, []), "privacy.redacted"),
        (block("public", _MISSING, []), "privacy.redacted"),
        (block("sensitive", False, ["a"]), "privacy.redacted"),
        (block("internal", False, []), "privacy.classification"),
        (block(_MISSING, False, []), "privacy.classification"),
        (block("sensitive", True, _MISSING), "privacy.redacted_fields"),
        (block("sensitive", True, "a"), "privacy.redacted_fields"),
        (block("sensitive", True, [1]), "privacy.redacted_fields"),
        (block("public", False, ["a"]), "privacy.redacted_fields"),
        (block("public", 0, []), "privacy.redacted"),
    ],
)
def test_an_inconsistent_privacy_block_is_refused_naming_the_field(
    privacy: dict[str, Any], field: str
) -> None:
    problem = privacy_problem(privacy)
    assert problem is not None
    assert problem.startswith(f"{field}: expected")


@pytest.mark.parametrize(
    "privacy",
    [
        {"classification": "public", "redacted": False, "redacted_fields": []},
        {"classification": "sensitive", "redacted": True, "redacted_fields": ["a.b"]},
        {"classification": "sensitive", "redacted": True, "redacted_fields": []},
    ],
)
def test_penguins_two_consistent_privacy_blocks_are_accepted(privacy: dict[str, Any]) -> None:
    assert privacy_problem(privacy) is None


def test_envelope_problems_name_every_bad_field() -> None:
    problems = envelope_problems(
        {"schema_version": "v0", "id": "", "type": 3, "payload": [], "privacy": None}
    )
    assert [problem.split(":")[0] for problem in problems] == [
        "schema_version",
        "id",
        "type",
        "payload",
        "privacy",
    ]


def _values() -> list[Any]:
    return [case["input"] for case in CORPUS["positives"] + CORPUS["negatives"] if "input" in case]


def test_pentraces_builders_only_ever_write_consistent_privacy_blocks() -> None:
    values = _values()
    assert values
    for value in values:
        event = build_runtime_event(event_type="x.y", payload={"v": value}, sequence=1, time_ms=1)
        assert envelope_problems(event) == [], value


@pytest.mark.parametrize(
    "given",
    [
        {"classification": "public", "redacted": True, "redacted_fields": []},
        {"classification": "internal", "redacted": False, "redacted_fields": []},
        {"classification": "sensitive", "redacted": False, "redacted_fields": []},
    ],
)
def test_normalize_replaces_an_inconsistent_privacy_block_penguin_would_keep(
    given: dict[str, Any],
) -> None:
    event = {"id": "evt:x:1", "type": "x.y", "payload": {"a": 1}, "privacy": given}
    normalized = normalize_runtime_event(event, now_ms=1)
    assert normalized is not None
    assert normalized["privacy"] == {
        "classification": "public",
        "redacted": False,
        "redacted_fields": [],
    }
