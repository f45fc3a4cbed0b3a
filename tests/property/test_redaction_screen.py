"""The screen never lowers recall: screened and unscreened redaction agree exactly.

``redact_decoded`` skips the walk when the screen finds nothing in a record's
bytes; these tests hold it to ``redact`` (value, paths and class) on both
corpora and on generated records, with both engines (Hyperscan where it is
installed, and the standard library).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.redaction import redact, redact_decoded
from pentrace.domain.redaction import screen as screen_module
from pentrace.domain.redaction.keys import is_secret_key
from pentrace.domain.redaction.text import secret_words

FIXTURES = Path(__file__).parent.parent / "fixtures"
OLD = json.loads((FIXTURES / "redaction_corpus.json").read_text("utf-8"))
NEW = json.loads((FIXTURES / "redaction_providers.json").read_text("utf-8"))
CORPUS_VALUES: list[Any] = [
    *(case["input"] for case in OLD["positives"] + OLD["negatives"]),
    *("".join(case["parts"]) for case in NEW["cases"]),
    *(case["input"] for case in NEW["benign"]),
]
ENGINES = ["re"] + (["hs"] if screen_module.HYPERSCAN else [])


def _agree(value: Any, data: bytes, engine: str) -> None:
    expected = redact(value)
    screened = redact_decoded(value, data, engine=engine)
    assert screened.value == expected.value
    assert screened.paths == expected.paths
    assert screened.classification == expected.classification


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("index", range(len(CORPUS_VALUES)))
def test_screened_redaction_equals_the_walk_on_every_corpus_value(engine: str, index: int) -> None:
    value = CORPUS_VALUES[index]
    for wrapped in (value, {"type": "event_msg", "payload": {"output": value}}):
        _agree(wrapped, msgspec.json.encode(wrapped), engine)
        _agree(wrapped, json.dumps(wrapped).encode(), engine)


_PIECES = st.sampled_from(
    [
        *secret_words(),
        *(part for case in NEW["cases"] for part in case["parts"]),
        *["session_id", "max_tokens", "tokenizer", "secretary", "--", "-", "=", ": ", " ", "\n"],
        *['"', "\\", "/", "://", "@", "K", "\u212a", "\u0130", "é", "Basic ", "AKIA", "sk-"],
    ]
)
_TEXT = st.lists(_PIECES, max_size=8).map("".join) | st.text(max_size=20)
_KEYS = _TEXT | st.sampled_from(["api_key", "name", "value", "auth", "accesstoken", "text"])
_VALUES = st.recursive(
    _TEXT | st.integers() | st.none() | st.booleans(),
    lambda children: st.dictionaries(_KEYS, children, max_size=4) | st.lists(children, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None)
@given(value=_VALUES, ascii_only=st.booleans())
def test_screened_redaction_equals_the_walk_on_generated_records(
    engine: str, value: Any, ascii_only: bool
) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    _agree(value, data, engine)
    _agree(value, msgspec.json.encode(value), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_clean_record_passes_the_screen_though_benign_names_hold_secret_words(
    engine: str,
) -> None:
    record = {"type": "event_msg", "payload": {"session_id": "s1", "max_tokens": 4, "text": "hi"}}
    assert not screen_module.may_change(msgspec.json.encode(record), engine_name=engine)
    data = msgspec.json.encode({"payload": {"api_key": "x"}})
    assert screen_module.may_change(data, engine_name=engine)
    assert screen_module.may_change(msgspec.json.encode(record), engine_name="off")


_SEGMENTS = st.sampled_from(
    [
        "session", "Session", "SESSION", "id", "key", "token", "tokens", "auth", "secret",
        "api", "access", "refresh", "cookie", "private", "user", "db", "pass", "url", "max",
        "cache", "public", "sort", "x", "2", "name", "type", "db", "url", "uri", "conn",
        "str", "database", "string", "web", "hook", "connection", "dsn", "pwd", "Db", "URL",
    ]
)  # fmt: skip
_NAMES = st.lists(_SEGMENTS, min_size=1, max_size=4).flatmap(
    lambda parts: st.sampled_from(["_", "-", "", ".", " ", "/", ": "]).map(lambda g: g.join(parts))
)


@settings(max_examples=500, deadline=None)
@given(name=_NAMES)
def test_every_secret_name_holds_a_word_the_screen_looks_for(name: str) -> None:
    # The screen drops words no secret name needs alone (``session``); a name
    # the key rules call secret must still hold one it looks for.
    if is_secret_key(name):
        data = msgspec.json.encode({name: "plain value"})
        for engine in ENGINES:
            assert screen_module.may_change(data, engine_name=engine)


_BRACKETED = st.lists(
    # About one bracket a piece: the counts straddle _NESTING (100).
    st.sampled_from([b"{", b"[", b"[{", b'{"', b"a", b"}\n", b"]\xff", b" {[ "]),
    min_size=60,
    max_size=140,
)


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=300, deadline=None)
@given(pieces=_BRACKETED)
def test_a_record_with_many_brackets_is_never_cleared(engine: str, pieces: list[bytes]) -> None:
    # Either engine sends a record holding _NESTING brackets ({ or [, counted
    # anywhere, in strings too) to the walk; these bytes hold nothing else to walk for.
    data = b"".join(pieces)
    brackets = data.count(b"{") + data.count(b"[")
    assert screen_module.may_change(data, engine_name=engine) == (
        brackets >= screen_module._NESTING
    )
