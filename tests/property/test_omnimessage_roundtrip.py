"""Round trips: every payload type, fidelity bytes, unknown keys and numbers survive."""

from __future__ import annotations

from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain import omnimessage as om

ALL_PAYLOAD_TYPES: tuple[type[msgspec.Struct], ...] = (
    om.SessionMeta,
    *om.COMPLETE_MODEL_TYPES,
    *om.PARTIAL_TYPES,
    *om.EVENT_TYPES,
)
FIDELITY_TYPES = (om.Text, om.Thinking, om.InlineThinking, om.ToolCall, om.InlineData)
KNOWN_TAGS = {cls.__struct_config__.tag for cls in ALL_PAYLOAD_TYPES} - {None}
_fields = msgspec.json.Decoder(dict[str, om.Raw])
_encode = msgspec.json.encode

# Astral and BMP text without lone surrogates (msgspec cannot encode those).
texts = st.text(st.characters(codec="utf-8"), max_size=40)
_chunks = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
huge_texts = st.builds(lambda s, n: s * n, _chunks, st.integers(2_000, 20_000))
strings = st.one_of(texts, texts, texts, huge_texts)
numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-(2**200), 2**200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 10, 10.0, -0.0, 1e21, 5e-324, 2**53 + 1]),
)

# --- JSON text written by someone else: odd whitespace, escapes, number spellings ----------

_ws = st.sampled_from(["", "", " ", "\t", "\n", "\r\n", " \t\n "])
_number_texts = st.one_of(
    st.sampled_from(["0", "-0", "10", "10.0", "1e5", "1E+21", "-2.5e-3", "0.1", "1.0E-300"]),
    st.integers(-(2**100), 2**100).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr).map(lambda s: s.replace("inf", "1")),
)
_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


@st.composite
def _json_string_text(draw: st.DrawFn) -> str:
    """One JSON string literal whose characters are spelled in varied legal ways."""
    out = []
    for char in draw(st.text(st.characters(codec="utf-8"), max_size=12)):
        code = ord(char)
        style = draw(st.integers(0, 3))
        if char in _SHORT and (style < 2 or (code < 0x20 and char not in "\n\t\r\b\f")):
            out.append(_SHORT[char])
        elif code < 0x20 or char in _SHORT or style == 0:
            if code > 0xFFFF:
                high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
                out.append(f"\\u{high:04x}\\u{low:04X}")
            else:
                out.append(f"\\u{code:04x}" if style % 2 else f"\\u{code:04X}")
        elif char == "/" and style == 1:
            out.append("\\/")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _json_value_text(depth: int) -> st.SearchStrategy[str]:
    scalars = st.one_of(
        st.sampled_from(["null", "true", "false"]), _number_texts, _json_string_text()
    )
    if depth >= 3:
        return scalars
    return st.one_of(scalars, _json_array_text(depth + 1), _json_object_text(depth + 1))


@st.composite
def _json_array_text(draw: st.DrawFn, depth: int) -> str:
    items = draw(st.lists(_json_value_text(depth), max_size=4))
    return "[" + ",".join(draw(_ws) + item + draw(_ws) for item in items) + draw(_ws) + "]"


@st.composite
def _json_object_text(draw: st.DrawFn, depth: int) -> str:
    keys = draw(
        st.lists(_json_string_text(), max_size=4, unique_by=lambda k: msgspec.json.decode(k))
    )
    members = [
        draw(_ws) + key + draw(_ws) + ":" + draw(_ws) + draw(_json_value_text(depth)) + draw(_ws)
        for key in keys
    ]
    return "{" + ",".join(members) + draw(_ws) + "}"


json_objects = _json_object_text(0).map(str.encode)
json_values = _json_value_text(0).map(str.encode)


# --- typed payloads, derived from the Struct definitions themselves ----------------------


def _strategy(info: mi.Type) -> st.SearchStrategy[Any]:
    if isinstance(info, mi.StrType):
        return strings
    if isinstance(info, mi.IntType | mi.FloatType):
        return numbers
    if isinstance(info, mi.NoneType):
        return st.none()
    if isinstance(info, mi.RawType):
        return json_values.map(om.Raw)
    if isinstance(info, mi.VarTupleType):
        return st.lists(_strategy(info.item_type), max_size=3).map(tuple)
    if isinstance(info, mi.UnionType):
        return st.one_of([_strategy(member) for member in info.types])
    if isinstance(info, mi.StructType):
        return _struct_strategy(info)
    raise AssertionError(f"no strategy for {info!r}")


def _struct_strategy(info: mi.StructType) -> st.SearchStrategy[Any]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in info.fields:
        value = _strategy(field.type)
        optional = not field.required and field.default is msgspec.NODEFAULT
        fields[field.name] = st.one_of(st.just(om.UNSET), value) if optional else value
    return st.fixed_dictionaries(fields).map(lambda kwargs: info.cls(**kwargs))


def payloads(cls: type) -> st.SearchStrategy[Any]:
    """Any value of one payload class, every optional field sometimes unset."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return _struct_strategy(info)


envelopes_origin = st.one_of(st.just(om.UNSET), st.lists(texts, min_size=1, max_size=3))


def _retyped(envelope: om.Envelope) -> om.Envelope:
    payload = envelope.payload
    fresh = payload if isinstance(payload, om.UnknownPayload) else msgspec.structs.replace(payload)
    return msgspec.structs.replace(envelope, payload=fresh)


def _object_text(members: list[tuple[bytes, bytes]]) -> bytes:
    return b"{" + b",".join(key + b":" + value for key, value in members) + b"}"


@pytest.mark.parametrize("cls", ALL_PAYLOAD_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_payload_type_round_trips_with_its_values_and_number_types(
    cls: type, data: st.DataObject
) -> None:
    payload = data.draw(payloads(cls))
    envelope = om.make_envelope(data.draw(texts), payload, origin=data.draw(envelopes_origin))
    line = om.encode_envelope(envelope)
    decoded = om.decode_envelope(line)
    assert decoded == envelope
    assert om.encode_envelope(decoded) == line
    # Re-encoding from typed values alone gives the same bytes: 10 stays 10,
    # 10.0 stays 10.0, big integers keep every digit.
    assert om.encode_envelope(_retyped(decoded)) == line


@settings(max_examples=80, deadline=None)
@given(cls=st.sampled_from(FIDELITY_TYPES), fidelity=json_objects, data=st.data())
def test_fidelity_bytes_survive_decode_and_reencode_exactly(
    cls: type, fidelity: bytes, data: st.DataObject
) -> None:
    assert isinstance(msgspec.json.decode(fidelity), dict)  # the generator writes legal JSON
    payload = msgspec.structs.replace(data.draw(payloads(cls)), fidelity=om.Raw(b"{}"))
    plain = om.encode_envelope(om.make_envelope("t", payload))
    line = plain.replace(b'"fidelity":{}', b'"fidelity":' + fidelity)
    decoded = om.decode_envelope(line)
    kept = decoded.payload.fidelity  # type: ignore[union-attr]
    assert isinstance(kept, om.Raw)
    assert bytes(kept) == fidelity
    assert om.encode_envelope(decoded) == line
    assert om.encode_envelope(msgspec.structs.replace(decoded, origin=("c",))).count(fidelity) >= 1
    assert om.encode_envelope(_retyped(decoded)) == line


@st.composite
def _unknown_members(draw: st.DrawFn, taken: set[str]) -> list[tuple[bytes, bytes]]:
    names = draw(st.lists(texts.filter(lambda k: k not in taken), max_size=4, unique=True))
    return [(_encode(name), draw(json_values)) for name in names]


def _with_members(text: bytes, extra: list[tuple[bytes, bytes]], positions: list[int]) -> bytes:
    members = list(_fields.decode(text).items())
    encoded = [(_encode(key), bytes(value)) for key, value in members]
    for (key, value), position in zip(extra, positions, strict=True):
        encoded.insert(position % (len(encoded) + 1), (key, value))
    return _object_text(encoded)


@pytest.mark.parametrize("cls", ALL_PAYLOAD_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_unknown_keys_in_payload_and_envelope_are_preserved(cls: type, data: st.DataObject) -> None:
    payload = data.draw(payloads(cls))
    plain = om.encode_envelope(om.make_envelope("t", payload))
    taken = (
        {field.name for field in msgspec.structs.fields(cls)} | {"type"} | set(om.LEGACY_META_KEYS)
    )
    extra = data.draw(_unknown_members(taken))
    positions = data.draw(st.lists(st.integers(0, 20), min_size=len(extra), max_size=len(extra)))
    payload_text = _with_members(bytes(_fields.decode(plain)["payload"]), extra, positions)
    outer_extra = data.draw(_unknown_members({"timestamp", "type", "payload", "origin"}))
    line = _object_text(
        [
            (b'"timestamp"', b'"t"'),
            (b'"type"', _encode(om.envelope_type_for(payload))),
            *outer_extra,
        ]
    )
    line = line[:-1] + (b"," if len(line) > 2 else b"") + b'"payload":' + payload_text + b"}"
    decoded = om.decode_envelope(line)
    assert decoded.payload == payload
    assert om.encode_envelope(decoded) == line
    rewrapped = om.encode_envelope(msgspec.structs.replace(decoded, origin=("child",)))
    assert bytes(_fields.decode(rewrapped)["payload"]) == payload_text


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["model_msg", "event_msg", "memory_msg"]),
    ptype=texts.filter(lambda t: t not in KNOWN_TAGS),
    body=json_objects,
)
def test_unknown_payload_types_are_kept_whole(kind: str, ptype: str, body: bytes) -> None:
    members = [
        (k, v)
        for k, v in ((_encode(k), bytes(v)) for k, v in _fields.decode(body).items())
        if k != b'"type"'
    ]
    payload_text = _object_text([(b'"type"', _encode(ptype)), *members])
    line = b'{"timestamp":"t","type":' + _encode(kind) + b',"payload":' + payload_text + b"}"
    decoded = om.decode_envelope(line)
    assert isinstance(decoded.payload, om.UnknownPayload)
    assert decoded.payload.payload_type == ptype
    assert om.encode_envelope(decoded) == line
    assert om.encode_envelope(_retyped(decoded)) == line


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_number_texts, min_size=8, max_size=8))
def test_numbers_survive_as_written(values: list[str]) -> None:
    def counts(part: list[str]) -> str:
        return ",".join(
            f'"{k}":{v}'
            for k, v in zip(("cache_read", "cache_write", "output", "total"), part, strict=True)
        )

    line = (
        '{"timestamp":"t","type":"event_msg","payload":{"type":"token_usage",'
        f'"session":{{{counts(values[:4])}}},"request":{{{counts(values[4:])}}}}}}}'
    ).encode()
    decoded = om.decode_envelope(line)
    assert om.encode_envelope(decoded) == line
    session = decoded.payload.session  # type: ignore[union-attr]
    for text, value in zip(values, msgspec.structs.astuple(session), strict=False):
        assert isinstance(value, float) == any(c in text for c in ".eE")
