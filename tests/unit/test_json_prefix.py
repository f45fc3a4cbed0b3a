"""The torn-fragment test: every proper prefix of a record is one, corruption is not."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pentrace.domain.json_codec import is_object_prefix

RECORD = json.dumps(
    {
        "timestamp": "2026-11-29T10:00:00.000Z",
        "type": "model_msg",
        "payload": {
            "type": "text",
            "text": 'h\u00e9llo " \\ \U0001f600 \\u00e9 \ud800',
            "n": [1, -2.5e10, 0.5, 1e-7, True, False, None, {}, [], [[]]],
        },
    },
    ensure_ascii=False,
).encode("utf-8", "surrogatepass")


def test_every_proper_prefix_of_a_record_is_a_fragment_and_the_record_is_not() -> None:
    assert all(is_object_prefix(RECORD[:cut]) for cut in range(1, len(RECORD)))
    assert not is_object_prefix(RECORD)


_short_text = st.text(max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _short_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_short_text, inner, max_size=4),
    max_leaves=10,
)


@given(st.dictionaries(_short_text, json_values, min_size=1, max_size=4), st.data())
def test_a_cut_anywhere_in_any_object_is_a_fragment(
    value: dict[str, object], data: st.DataObject
) -> None:
    encoded = json.dumps(value, ensure_ascii=data.draw(st.booleans())).encode(
        "utf-8", "surrogatepass"
    )
    cut = data.draw(st.integers(1, len(encoded) - 1))
    assert is_object_prefix(encoded[:cut])


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"[1,",
        b"{}x",
        b'{"a":1}{"b"',
        b'{"a" 1',
        b'{"a":01',
        b'{"a":1x',
        b'{"a":tx',
        b'{"a":"\x01',
        b'{"a":[1,]',
        b'{"a",',
        b"\x00\x00\x00",
        b' {"a"',
        b'{"a":1.e',
        b'{"a":"\\x',
        b'{"a":[}',
        b'{"a":{]',
        b"{not json",
    ],
)
def test_text_with_a_syntax_error_before_its_end_is_not_a_fragment(text: bytes) -> None:
    assert not is_object_prefix(text)
