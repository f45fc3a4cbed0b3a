"""The redaction memos (envelope fields, known fixed-point strings) agree with the full walk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.redaction import is_redacted, redact, redact_reference
from pentrace.domain.redaction.core import redact_flat

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)
TEXT_SECRETS = [case["input"] for case in CORPUS["positives"] if case.get("embeddable")]
KEY_NAMES = sorted(
    {key for case in CORPUS["positives"] if case["kind"] == "key" for key in case["input"]}
)

flat = st.dictionaries(
    st.sampled_from(["session_id", "agent_id", "directory", "id", "type", *KEY_NAMES[:12]]),
    st.sampled_from(TEXT_SECRETS)
    | st.text(max_size=12)
    | st.integers(-2, 2)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(flat, min_size=1, max_size=4), st.integers(0, 2))
def test_memoised_fields_equal_the_full_walk_every_time_they_repeat(
    fields: list[dict[str, Any]], depth: int
) -> None:
    for value in [*fields, *fields]:
        clean, paths = redact_flat(value, depth=depth)
        expected = redact_reference(value, depth=depth)
        assert clean == expected.value
        assert [type(item) for item in clean.values()] == [
            type(item) for item in expected.value.values()
        ]
        assert paths == expected.paths


def test_one_and_true_never_share_a_memo_entry() -> None:
    assert redact_flat({"n": 1})[0]["n"] is not True
    assert redact_flat({"n": True})[0]["n"] is True
    assert redact_flat({"n": 1})[0]["n"] is not True


def test_a_caller_mutating_its_result_changes_no_later_result() -> None:
    first, _ = redact_flat({"session_id": "s1", "password": "hunter2-x"})
    first["session_id"] = "changed"
    again, paths = redact_flat({"session_id": "s1", "password": "hunter2-x"})
    assert again == {"session_id": "s1", "password": "[redacted]"}
    assert paths == ["password"]


def test_a_string_redaction_has_seen_is_trusted_only_in_its_redacted_form() -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    text = "log line " * 40 + f"GITHUB_TOKEN={secret} " + "more " * 40
    first = redact({"output": text})
    again = redact({"output": text})
    assert secret not in first.value["output"]
    assert again == first
    assert is_redacted(first.value)
    assert not is_redacted({"output": text})
    assert not is_redacted({"other": text})
