"""The redaction corpus: every known miss of Penguin's policy (W12) and realistic near-misses.

A positive that leaks is a security bug; a negative that changes hides telemetry or ids
that operators need.  The data lives in ``tests/fixtures/redaction_corpus.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.domain.redaction import is_redacted, redact

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_corpus.json").read_text("utf-8")
)
POSITIVES: list[dict[str, Any]] = CORPUS["positives"]
NEGATIVES: list[dict[str, Any]] = CORPUS["negatives"]


def _encoded(value: Any) -> str:
    return msgspec.json.encode(value).decode("utf-8")


@pytest.mark.parametrize("case", POSITIVES, ids=[case["id"] for case in POSITIVES])
def test_every_corpus_secret_is_removed_and_the_value_marked_sensitive(
    case: dict[str, Any],
) -> None:
    result = redact(case["input"])
    encoded = _encoded(result.value)
    for secret in case["secrets"]:
        assert secret not in encoded
        assert secret not in result.value if isinstance(result.value, str) else True
    assert result.classification == "sensitive"
    assert result.paths
    if "marker" in case:
        assert case["marker"] in encoded


@pytest.mark.parametrize("case", POSITIVES, ids=[case["id"] for case in POSITIVES])
def test_redacting_a_redacted_corpus_value_again_changes_nothing(case: dict[str, Any]) -> None:
    once = redact(case["input"]).value
    assert redact(once).value == once
    assert is_redacted(once)


@pytest.mark.parametrize("case", NEGATIVES, ids=[case["id"] for case in NEGATIVES])
def test_near_misses_pass_through_unchanged_and_public(case: dict[str, Any]) -> None:
    result = redact(case["input"])
    assert result.value == case["input"]
    assert result.paths == []
    assert result.classification == "public"
    assert is_redacted(case["input"])


def test_the_corpus_covers_every_w12_key_name() -> None:
    w12 = {
        "github_token", "hf_token", "HUGGING_FACE_HUB_TOKEN", "api_token", "oauth_token",
        "slack_token", "npm_token", "csrf_token", "cookie", "Set-Cookie", "credentials",
        "passwd", "pwd", "passphrase", "PGPASSWORD", "secrets", "passwords", "password2",
        "api_key2", "apikey", "APIKey", "XApiKey", "x-api-key", "session_key", "ssh_key",
        "openai_key", "anthropic_key", "aws_access_key_id", "aws_secret_access_key", "jwt",
        "database_url", "dsn",
    }  # fmt: skip
    covered = {case["id"].removeprefix("key:") for case in POSITIVES if case["kind"] == "key"}
    assert w12 <= covered
