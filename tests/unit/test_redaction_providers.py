"""The provider corpus: each published credential format, in the places agents put them.

``tests/fixtures/redaction_providers.json`` (versioned) holds fake credentials in
each provider's format, split into pieces so that no whole token sits in the
repository for secret scanners to flag; the tests join them.  Every case is tried
in user text, inside JSON-encoded tool arguments and inside tool output, and
must vanish from all three; its benign values must come back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.domain.redaction import is_redacted, redact, redact_decoded

CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_providers.json").read_text("utf-8")
)
CASES: list[dict[str, Any]] = CORPUS["cases"]
BENIGN: list[dict[str, Any]] = CORPUS["benign"]


def _user_text(secret: str) -> Any:
    return {"role": "user", "content": [{"type": "text", "text": f"use this: {secret} thanks"}]}


def _tool_arguments(secret: str) -> Any:
    arguments = json.dumps({"cmd": f"curl -d '{secret}' https://api.example.com"})
    return {"type": "function_call", "name": "bash", "arguments": arguments}


def _tool_output(secret: str) -> Any:
    return {"type": "function_call_output", "output": f"line 1\n{secret}\nline 3"}


CONTEXTS: dict[str, Callable[[str], Any]] = {
    "user-text": _user_text,
    "tool-arguments": _tool_arguments,
    "tool-output": _tool_output,
}


def _whole(case: dict[str, Any]) -> str:
    return "".join(case["parts"])


def _secret(case: dict[str, Any]) -> str:
    return str(case["parts"][case["secret_part"]]) if "secret_part" in case else _whole(case)


def _encoded(value: Any) -> str:
    return msgspec.json.encode(value).decode("utf-8")


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_each_provider_credential_vanishes_wherever_an_agent_puts_it(
    case: dict[str, Any], context: str
) -> None:
    value = CONTEXTS[context](_whole(case))
    result = redact(value)
    assert _secret(case) not in _encoded(result.value)
    assert result.classification == "sensitive"
    assert is_redacted(result.value)


@pytest.mark.parametrize(
    "case", [c for c in CASES if "secret_part" not in c], ids=lambda c: c["id"]
)
def test_a_provider_token_is_marked_with_its_kind(case: dict[str, Any]) -> None:
    assert redact(f"token {_whole(case)} here").value == f"token [redacted:{case['kind']}] here"


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_the_screen_never_lets_a_corpus_credential_through(case: dict[str, Any]) -> None:
    value = _tool_output(_whole(case))
    data = msgspec.json.encode({"type": "event_msg", "payload": value})
    assert redact_decoded(value, data).value == redact(value).value


@pytest.mark.parametrize("case", BENIGN, ids=[case["id"] for case in BENIGN])
def test_benign_values_and_token_telemetry_stay_visible(case: dict[str, Any]) -> None:
    result = redact(case["input"])
    assert result.value == case["input"]
    assert result.paths == []


def test_the_corpus_covers_every_provider_the_issue_names() -> None:
    named = {
        "aws", "gcp", "azure", "github", "gitlab", "bitbucket", "slack", "discord", "telegram",
        "stripe", "square", "sendgrid", "mailgun", "twilio", "openai", "anthropic",
        "huggingface", "groq", "replicate", "npm", "pypi", "digitalocean", "heroku", "vault",
        "databricks", "doppler", "supabase", "pem", "openssh", "age", "jwt", "url", "header",
        "cli",
    }  # fmt: skip
    assert named <= {case["provider"] for case in CASES}
    assert CORPUS["version"] == 1


@pytest.mark.parametrize("name", ["db-url", "db.url", "conn-str", "conn.str"])
def test_glued_secret_names_are_found_in_text_whatever_joins_their_halves(name: str) -> None:
    # ``db_url`` and ``conn_str`` are secret names; spelt with ``-`` or ``.``
    # the text rules once had no word to start from.
    assert redact(f"{name}=plainValue42 rest").value == f"{name}=[redacted:secret] rest"
    value = {name.replace("-", "/"): "plainValue42"}
    assert redact_decoded(value, msgspec.json.encode(value)).value == {
        next(iter(value)): "[redacted]"
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"auth": "Basic dXNlcjpwYXNz"}, {"auth": "[redacted]"}),
        (
            {"auths": {"registry.io": {"auth": "dXNlcjpwYXNz"}}},
            {"auths": {"registry.io": {"auth": "[redacted]"}}},
        ),
        ({"auth": "user:hunter2"}, {"auth": "[redacted]"}),
        ({"auth": "oauth2"}, {"auth": "oauth2"}),
        (
            {"auth": {"type": "basic", "password": "p1"}},
            {"auth": {"type": "basic", "password": "[redacted]"}},
        ),
    ],
)
def test_a_credential_string_under_auth_is_hidden_and_a_setting_is_not(
    value: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert redact(value).value == expected
    assert redact_decoded(value, msgspec.json.encode(value)).value == expected
    assert is_redacted(expected)
