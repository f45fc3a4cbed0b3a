"""Credentials planted in every position and encoding: the screen plus the walk hides exactly
what the reference walk hides, and no planted value survives.

Each generated record holds one planted value in one of the shapes a secret
takes in a trace: after a secret flag at any index of an argument list, that
list JSON-encoded in a tool call's ``arguments``, quoted inside free text
(``run ["deploy", "--api-key", "..."]``) and inside JSON inside a string,
``name=value`` and ``key=value`` in text, header pairs and ``Authorization``
lines, name/value objects and secret keys, and a secret name followed by its
value as a two-element list (``["api_key", "sk-..."]``), as a list, as JSON in
a tool call's ``arguments`` and quoted inside free text.  Around it: filler with lone
surrogates, quotes, backslashes and secret-looking words, nesting, and long
text.  The planted values themselves are hostile: secret words inside them
(``sk-argv-secret-789``), lone surrogates, non-ASCII letters.

For every record: :func:`redact_decoded` (the screen in front, with each
engine) and :func:`redact` (the fast loop) equal :func:`redact_reference`
(the walk alone) in value, paths and classification; the planted value is in
none of the redacted strings, nor in the redacted record's JSON bytes.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.json_codec import json_bytes
from pentrace.domain.redaction import is_redacted, redact, redact_decoded, redact_reference
from pentrace.domain.redaction.shapes import HYPERSCAN

_ENGINES = ("hs", "re", "off") if HYPERSCAN else ("re", "off")
_FLAGS = ["--api-key", "--token", "--password", "--client-secret", "-api_key", "--auth-token"]
_NAMES = ["api_key", "password", "DB_PASSWORD", "client_secret", "access_token", "OPENAI_API_KEY"]
_FILLER_ARGS = ["deploy", "--verbose", "-v", "run", "--region", "eu-west-1", "x", "--", "1"]
_FILLER_TEXT = st.sampled_from(
    ["", "plain words", "tokens: 42", "max_tokens=100", '"quoted"', "back\\slash", "\udc00",
     "\ud800x", "é€𝄞", "session", "the key to it", "secretary", "\n", "\t", "{", "]"]
)  # fmt: skip
_PLAIN = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def _distinct(core: str) -> str:
    # A prefix no rule or filler holds, so finding the value in the output means it leaked.
    return f"Zq9{core}"


# Values as they come: secret words inside, dashes, dots, a lone surrogate, non-ASCII.
_values = st.builds(
    lambda parts: _distinct("".join(parts)),
    st.lists(
        st.sampled_from(["secret", "token", "-", "_", ".", "789", "argv", "Key", "é", "\udc00"])
        | st.text(alphabet=_PLAIN, min_size=1, max_size=6),
        min_size=2,
        max_size=6,
    ),
)
# Values a ``key=`` rule must judge as credentials: mixed case and digits, 16+ characters.
_keylike = st.text(alphabet=_PLAIN, min_size=16, max_size=30).map(
    lambda text: _distinct("Ab1" + text)
)


@st.composite
def _argv(draw: st.DrawFn, value: str) -> list[str]:
    before = draw(st.lists(st.sampled_from(_FILLER_ARGS), max_size=4))
    after = draw(st.lists(st.sampled_from(_FILLER_ARGS), max_size=3))
    return [*before, draw(st.sampled_from(_FLAGS)), value, *after]


@st.composite
def planted(draw: st.DrawFn) -> tuple[Any, str]:
    """One record with one planted value, and the value."""
    value = draw(_values)
    form = draw(st.integers(0, 15))
    if form == 0:
        holder: Any = {"argv": draw(_argv(value))}
    elif form == 1:
        holder = {"arguments": json.dumps({"cmd": draw(_argv(value))}, ensure_ascii=False)}
    elif form == 2:
        holder = {"text": "run " + json.dumps(draw(_argv(value)), ensure_ascii=False)}
    elif form == 3:
        inner = "run " + json.dumps(draw(_argv(value)), ensure_ascii=False)
        holder = {"arguments": json.dumps({"command": inner}, ensure_ascii=False)}
    elif form == 4:
        holder = {"text": " ".join(draw(_argv(value)))}
    elif form == 5:
        value = draw(_keylike)
        holder = {"text": f"{draw(_FILLER_TEXT)} key={value} {draw(_FILLER_TEXT)}"}
    elif form == 6:
        holder = {"text": f"export {draw(st.sampled_from(_NAMES))}={value}"}
    elif form == 7:
        holder = {"headers": [["Authorization", f"Bearer {value}"], ["Accept", "*/*"]]}
    elif form == 8:
        holder = {"text": f"curl -H 'Authorization: Bearer {value}' https://api.example"}
    elif form == 9:
        holder = {"env": [{"name": draw(st.sampled_from(_NAMES)), "value": value}]}
    elif form == 10:
        holder = {draw(st.sampled_from(_NAMES)): value}
    elif form == 11:
        holder = {"output": json.dumps({"config": {"password": value}}, ensure_ascii=False)}
    elif form == 12:
        holder = {"pair": [draw(st.sampled_from(_NAMES)), value]}
    elif form == 13:
        pair = json.dumps([draw(st.sampled_from(_NAMES)), value], ensure_ascii=False)
        holder = {"text": f"{draw(_FILLER_TEXT)} run {pair} {draw(_FILLER_TEXT)}"}
    elif form == 14:
        listed = [draw(st.sampled_from(_NAMES)), value]
        holder = {"arguments": json.dumps({"env": listed}, ensure_ascii=False)}
    else:
        pair = json.dumps([draw(st.sampled_from(_NAMES)), value], ensure_ascii=False)
        holder = {"arguments": json.dumps({"command": f"set {pair}"}, ensure_ascii=False)}
    for _ in range(draw(st.integers(0, 3))):
        holder = draw(st.sampled_from(["payload", "items", "nested"])), holder
        holder = {holder[0]: holder[1]} if draw(st.booleans()) else [holder[1]]
    record = {
        "type": "tool_call",
        "note": draw(_FILLER_TEXT) * draw(st.integers(1, 3)),
        "long": draw(_FILLER_TEXT) * draw(st.sampled_from([1, 500])),
        "body": holder,
    }
    return record, value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (str(key), *_strings(item))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def _escaped_forms(value: str) -> list[str]:
    # The value as it may sit inside JSON inside a string (escaped once or twice).
    once = json.dumps(value)[1:-1]
    return [value, once, json.dumps(once)[1:-1]]


@settings(max_examples=400, deadline=None)
@given(planted())
def test_the_screened_path_hides_exactly_what_the_walk_hides_and_no_planted_value_survives(
    case: tuple[Any, str],
) -> None:
    record, value = case
    reference = redact_reference(record)
    data = json_bytes(record)
    for engine in _ENGINES:
        assert redact_decoded(record, data, engine=engine) == reference, engine
    assert redact(record) == reference
    assert is_redacted(reference.value)
    assert reference.classification == "sensitive"
    out = json_bytes(reference.value).decode("utf-8")
    for form in _escaped_forms(value):
        assert all(form not in text for text in _strings(reference.value)), (form, reference)
        assert form not in out


def test_the_argv_examples_of_the_issue_are_hidden_with_and_without_the_screen() -> None:
    secret = "sk-argv-secret-789"
    for record in (
        {"argv": ["--api-key", secret, "--verbose"]},
        {"argv": ["deploy", "--api-key", secret]},
        {"text": f'run ["deploy", "--api-key", "{secret}"]'},
        {"arguments": json.dumps({"cmd": f'run ["deploy", "--api-key", "{secret}"]'})},
        {"text": "key=AIzaSyFAKE0planted0value"},
        {"argv": ["api_key", secret]},
        {"text": f'run ["api_key", "{secret}"]'},
        {"arguments": json.dumps({"cmd": f'set ["password", "{secret}"]'})},
    ):
        data = json_bytes(record)
        for engine in _ENGINES:
            screened = redact_decoded(record, data, engine=engine)
            assert secret not in json_bytes(screened.value).decode()
            assert "AIzaSyFAKE0planted0value" not in json_bytes(screened.value).decode()
            assert screened == redact_reference(record)
