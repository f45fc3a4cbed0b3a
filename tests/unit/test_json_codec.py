"""The one way pentrace encodes text that is not valid Unicode: lone surrogates as JSON escapes."""

from __future__ import annotations

import json

import msgspec
import pytest

from pentrace.domain import omnimessage as om
from pentrace.domain.json_codec import JsonDecoder, JsonEncoder, escape_surrogates, json_bytes


class Event(msgspec.Struct, omit_defaults=True, tag="ev"):
    text: str
    fidelity: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    count: int = 0


def test_valid_text_encodes_exactly_as_msgspec_does() -> None:
    value = {"a": "é\x01\n\u2028", "b": [1.5, None, True, 2**70], "c": Event("x", count=3)}
    assert json_bytes(value) == msgspec.json.encode(value)


def test_lone_surrogates_in_values_and_keys_become_lowercase_json_escapes() -> None:
    value = {"\udcff": ["a\ud800b", "é\x01"], "n": 1}
    encoded = json_bytes(value)
    assert encoded == b'{"\\udcff":["a\\ud800b","\xc3\xa9\\u0001"],"n":1}'
    assert json.loads(encoded) == value


def test_a_struct_with_raw_bytes_keeps_them_byte_for_byte_on_the_slow_path() -> None:
    event = Event("\ud800", fidelity=msgspec.Raw(b'{ "sig" : "\\u00e9" }'))
    assert json_bytes(event) == b'{"type":"ev","text":"\\ud800","fidelity":{ "sig" : "\\u00e9" }}'


def test_deterministic_order_holds_on_the_slow_path() -> None:
    encoder = JsonEncoder(order="deterministic")
    assert encoder.encode({"b": "\ud800", "a": 1}) == b'{"a":1,"b":"\\ud800"}'


def test_escape_surrogates_changes_only_the_surrogates() -> None:
    assert escape_surrogates("plain é") == "plain é"
    assert escape_surrogates("x\udcffé") == "x\\udcffé"
    assert escape_surrogates("x\udcffé").encode("utf-8")


def test_the_decoder_reads_back_what_the_encoder_wrote() -> None:
    decoder: JsonDecoder[dict[str, list[str]]] = JsonDecoder(dict[str, list[str]])
    assert decoder.decode(b'{"k":["\\ud800"]}') == {"k": ["\ud800"]}
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(b'{"k":[1]}')
    with pytest.raises(msgspec.DecodeError):
        decoder.decode(b'{"k":')


def test_a_new_envelope_with_a_lone_surrogate_encodes_as_an_escape() -> None:
    line = om.encode_envelope(
        om.make_envelope("2026-07-18T03:10:22.531Z", om.text_message("user", "a\udcffb"))
    )
    assert b'"text":"a\\udcffb"' in line
    assert json.loads(line)["payload"]["text"] == "a\udcffb"
