"""The redaction API: what ``redact``, ``redact_text`` and ``is_redacted`` promise."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from pentrace.domain.redaction import (
    REDACTED,
    TOO_DEEP,
    Redacted,
    is_redacted,
    redact,
    redact_string,
    redact_text,
)
from pentrace.domain.redaction import keys as secret_keys
from pentrace.domain.redaction import text as secret_patterns
from pentrace.domain.redaction.keys import is_secret_key, normalize_key
from pentrace.domain.runtime import build_event

GHP = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sXy"


def test_value_rules_replace_only_the_secret_and_keep_the_text_readable() -> None:
    text = f"pushing with {GHP} to origin\nAuthorization: Bearer abcdefgh12345678"
    assert redact_text(text) == (
        "pushing with [redacted:github_token] to origin\nAuthorization: [redacted:authorization]"
    )


def test_key_rules_replace_the_whole_value_with_the_plain_marker() -> None:
    result = redact({"outer": {"client_secret": {"nested": [1, 2]}}, "ok": "fine"})
    assert result == Redacted(
        {"outer": {"client_secret": REDACTED}, "ok": "fine"}, ["outer.client_secret"], "sensitive"
    )
    assert result.redacted


def test_a_clean_value_is_public_and_equal() -> None:
    value = {"text": "hello", "n": [1, 2.5, None, True]}
    result = redact(value)
    assert (result.value, result.paths, result.classification, result.redacted) == (
        value,
        [],
        "public",
        False,
    )


def test_a_json_string_is_redacted_as_a_structure_and_re_encoded() -> None:
    result = redact({"arguments": '{"query": "x", "headers": {"X-Api-Key": "k-123456"}}'})
    assert result.paths == ["arguments"]
    assert msgspec.json.decode(result.value["arguments"]) == {
        "query": "x",
        "headers": {"X-Api-Key": REDACTED},
    }


def test_a_json_string_without_secrets_is_kept_byte_for_byte() -> None:
    text = '{ "query" :  "tokens: 5" }'
    assert redact({"arguments": text}).value == {"arguments": text}


@pytest.mark.parametrize("text", ['{"a": 1}\n ', " [1, 2] ", "\t{}\n", '\n{"k": "tokens: 5"}'])
def test_a_clean_json_string_keeps_the_whitespace_around_it(text: str) -> None:
    result = redact({"output": text})
    assert result.value == {"output": text}
    assert result.paths == []
    assert is_redacted({"output": text})


def test_tuples_become_lists_and_non_string_keys_are_judged_by_their_text() -> None:
    result = redact({1: ("a", "b"), "token": 1})
    assert result.value == {1: ["a", "b"], "token": REDACTED}


def test_paths_name_list_positions_inside_and_at_the_root() -> None:
    result = redact([{"a": [{"password": 1}]}, "x", ["--token", "t"]])
    assert result.paths == ["[0].a[0].password", "[2][1]"]


def test_a_secret_in_a_redacted_paths_list_is_never_hidden_as_a_pair() -> None:
    value = {"redacted_fields": ["password", "headers[0][1]"]}
    assert redact(value).value == value


def test_is_redacted_is_false_until_the_value_is_redacted() -> None:
    leaky = {"note": f"token {GHP}"}
    assert not is_redacted(leaky)
    assert is_redacted(redact(leaky).value)


def test_redaction_is_deterministic() -> None:
    value = {"a": f"x {GHP}", "password": "p", "list": ["--api-key", "v"]}
    assert msgspec.json.encode(redact(value)) == msgspec.json.encode(redact(value))


@pytest.mark.parametrize(
    ("key", "normal"),
    [
        ("apiKey", "api_key"),
        ("APIKey", "apikey"),
        ("XApiKey", "xapi_key"),
        ("x-api-key", "x_api_key"),
        ("Set-Cookie", "set_cookie"),
        ("__private.key__", "private_key"),
        ("HUGGING_FACE_HUB_TOKEN", "hugging_face_hub_token"),
    ],
)
def test_keys_normalise_the_way_penguin_normalises_them(key: str, normal: str) -> None:
    assert normalize_key(key) == normal
    assert is_secret_key(key)


def test_a_secret_used_as_a_key_is_masked_with_its_value() -> None:
    token = "sk-proj-Q7vX2mN9pL4kR8tW1yZ3aB6cD0eF5gH7jK2lM4nP6qR8sT0uV"
    result = redact({"cache": {token: {"hits": 3}, "size": 1}})
    assert result.value == {"cache": {"[redacted:api_key]": REDACTED, "size": 1}}
    assert result.paths == ["cache.[redacted:api_key]"]
    assert token not in msgspec.json.encode(result).decode()
    assert is_redacted(result.value)


def test_a_url_password_holding_a_raw_at_sign_is_hidden_whole() -> None:
    assert (
        redact_text("postgres://app:p@ss@db/prod")
        == "postgres://app:[redacted:url_password]@db/prod"
    )


def test_a_masked_key_does_not_unhide_a_name_value_pair_in_the_same_mapping() -> None:
    token = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sXy"
    result = redact({"name": "OPENAI_API_KEY", token: 1, "value": "pair-secret-1"})
    assert result.value == {
        "name": "OPENAI_API_KEY",
        "[redacted:github_token]": REDACTED,
        "value": REDACTED,
    }


def test_nesting_deeper_than_any_real_payload_is_hidden_not_a_crash() -> None:
    deep: Any = {"token": "t"}
    for _ in range(2000):
        deep = {"d": [deep]}
    result = redact(deep)
    assert TOO_DEEP in msgspec.json.encode(result.value).decode()
    assert result.classification == "sensitive"
    assert is_redacted(result.value)


def test_json_strings_nested_inside_strings_count_towards_the_depth() -> None:
    inner: Any = {"password": "deep-secret-1"}
    for _ in range(150):
        inner = {"d": inner}
    outer: Any = {"arguments": msgspec.json.encode(inner).decode()}
    for _ in range(150):
        outer = {"d": outer}
    encoded = msgspec.json.encode(redact(outer).value).decode()
    assert "deep-secret-1" not in encoded
    assert TOO_DEEP in encoded


def test_an_envelope_around_an_over_deep_payload_is_still_a_fixed_point() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    event = build_event(event_type="x", payload={"deep": deep}, time_ms=0, sequence=1)
    assert is_redacted(event.to_builtins())
    assert event.privacy.classification == "sensitive"


_KEY_RULE_NAMES = sorted(
    {*secret_keys._SECRET_WORDS, *secret_keys._SECRET_EXACT_SEGMENTS, *secret_keys._EXACT}
    | {"db_pass", "ssh_key", "github_tokens", "WEBHOOK_URL", "webhookUrl", "DBURL", "CONNSTR"}
)


@pytest.mark.parametrize("name", _KEY_RULE_NAMES)
def test_a_name_the_key_rules_call_secret_hides_its_value_in_text_too(name: str) -> None:
    # The text rules start from a short list of words; a secret name without
    # one of them would leak as ``NAME=value`` (WEBHOOK_URL, DBURL, CONNSTR did).
    assert is_secret_key(name)
    assert any(word in name.lower() for word in secret_patterns._SECRET_WORDS)
    for text in (f"{name}=Zq81Lm0x", f"export {name.upper()}=Zq81Lm0x", f"{name}: Zq81Lm0x"):
        assert "Zq81Lm0x" not in redact_text(text), text


_NESTED_SECRET = "Zq9nestedSecret77"
_NESTED_FORMS = {
    "flag list": ["--api-key", _NESTED_SECRET],
    "name pair": ["api_key", _NESTED_SECRET],
    "name/value object": [{"name": "OPENAI_API_KEY", "value": _NESTED_SECRET}],
}


@pytest.mark.parametrize("depth", range(4))
@pytest.mark.parametrize("form", sorted(_NESTED_FORMS))
def test_a_quoted_list_in_text_is_redacted_however_deeply_its_quotes_are_escaped(
    form: str, depth: int
) -> None:
    """Text quoting JSON that holds JSON strings (a tool call's output quoting a call whose
    ``arguments`` quote a command): each level doubles the backslashes before a quote."""
    value: object = {"command": "run " + json.dumps(_NESTED_FORMS[form])}
    for _ in range(depth):
        value = {"arguments": json.dumps(value)}
    text = "ran " + json.dumps(value)
    redacted = redact_string(text)
    assert _NESTED_SECRET not in redacted
    assert "[redacted:" in redacted
