"""The full redaction walk: every rule, every node, a path stack (the reference).

:func:`pentrace.domain.redaction.redact` is the public entry point; it hands
plain subtrees to a one-loop fast path and everything else to :class:`Walker`
here.  :func:`redact_reference` runs the walk alone, so tests can hold the
fast path to it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Final, Literal, NamedTuple

import msgspec

from pentrace.domain.json_codec import JsonDecoder, JsonEncoder
from pentrace.domain.redaction.keys import is_secret_key, is_secret_name_alone
from pentrace.domain.redaction.text import redact_secrets_in_text

__all__ = [
    "MAX_DEPTH",
    "MAX_NAME_LENGTH",
    "NEIGHBOUR_KEYS",
    "PATH_LIST_KEYS",
    "REDACTED",
    "SCALAR_SECRET_KEYS",
    "TOO_DEEP",
    "VALUE_KEYS",
    "Classification",
    "Redacted",
    "Walker",
    "key_rule",
    "redact_reference",
]

REDACTED: Final = "[redacted]"
TOO_DEEP: Final = "[redacted:too_deep]"
MAX_DEPTH: Final = 200
Classification = Literal["public", "sensitive"]

_NAME_FIELDS: Final = ("name", "key", "header", "Name", "Key", "Header")
_PATH_LIST_KEYS: Final = frozenset({"redacted_fields"})
_VALUE_FIELDS: Final = ("value", "Value", "val")
# Keys that make the walk look at a mapping's neighbours (name/value pairs,
# lists of redacted paths).
# ``auth`` holds ``user:password``, a base64 credential (Docker's ``auths``) or
# a settings dict: its value is hidden when it is a string that is not a
# short lower-case word (``"auth": "oauth2"`` stays, the settings dict is walked).
SCALAR_SECRET_KEYS: Final = frozenset({"auth", "Auth", "AUTH"})
_ENUM_WORD: Final = re.compile(r"[a-z0-9_-]{1,20}")
NEIGHBOUR_KEYS: Final = frozenset(_VALUE_FIELDS) | _PATH_LIST_KEYS | SCALAR_SECRET_KEYS
# The two halves: value keys make the walk read a name beside them; a list
# under a path-list key is walked item by item, without the list rules.
VALUE_KEYS: Final = frozenset(_VALUE_FIELDS)
PATH_LIST_KEYS: Final = _PATH_LIST_KEYS
MAX_NAME_LENGTH: Final = 66
_NAME_SHAPE: Final = re.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_.-]*")
_json_decoder: Final = JsonDecoder[Any]()
_json_encoder: Final = JsonEncoder()


class Redacted(NamedTuple):
    """A redacted deep copy of a value, the paths that were hidden, and its class."""

    value: Any
    paths: list[str]
    classification: Classification = "public"

    @property
    def redacted(self) -> bool:
        """True when anything was hidden."""
        return bool(self.paths)


def _names_a_secret(candidate: object) -> bool:
    # Only identifier-shaped strings are names: a marker like "[redacted:api_key]"
    # normalises to a secret-looking name but must not hide its neighbour.
    return (
        isinstance(candidate, str)
        and len(candidate) <= MAX_NAME_LENGTH
        and _NAME_SHAPE.fullmatch(candidate) is not None
        and is_secret_key(candidate)
    )


def _credential_under(name: str, item: object) -> bool:
    """True for a credential string under a key such as ``auth`` (see ``SCALAR_SECRET_KEYS``)."""
    return (
        name in SCALAR_SECRET_KEYS
        and isinstance(item, str)
        and bool(item)
        and _ENUM_WORD.fullmatch(item) is None
    )


def _is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


@lru_cache(maxsize=16384)
def key_rule(name: str) -> tuple[str, bool]:
    """A key with any secret inside it masked, and whether its value is a secret."""
    return redact_secrets_in_text(name), is_secret_key(name)


def _format_path(stack: list[str | int]) -> str:
    pieces: list[str] = []
    for part in stack:
        if isinstance(part, int):
            pieces.append(f"[{part}]")
        else:
            pieces.append(f".{part}" if pieces else part)
    return "".join(pieces)


class Walker:
    # The path is a stack of keys and indices, formatted only when something is
    # hidden: most values are not secrets, so most paths are never needed.
    __slots__ = ("depth", "paths", "stack")

    def __init__(self, depth: int = 0) -> None:
        self.paths: list[str] = []
        self.stack: list[str | int] = []
        # Nesting already walked by an enclosing walker (JSON inside strings).
        self.depth = depth

    def _hidden(self) -> None:
        self.paths.append(_format_path(self.stack))

    def walk(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._string(value)
        if kind is dict or isinstance(value, dict | list | tuple):
            if len(self.stack) + self.depth >= MAX_DEPTH:
                # Deeper than any real payload; hidden whole rather than risk
                # running out of stack half way through (and leaking nothing).
                self._hidden()
                return TOO_DEEP
            if kind is dict or isinstance(value, dict):
                return self._mapping(value)
            return self._sequence(value)
        if isinstance(value, str):
            return self._string(str(value))
        return value

    def _mapping(self, value: dict[Any, Any]) -> dict[Any, Any]:
        hidden_value_field = self._name_value_field(value)
        out: dict[Any, Any] = {}
        stack = self.stack
        for key, item in value.items():
            name = key if type(key) is str else str(key)
            clean, secret = key_rule(name)
            if clean != name:
                # A secret used as a key (a token-keyed cache, say): the key is
                # masked and its value hidden, so neither value nor path leaks it.
                key = name = clean
                secret = True
            stack.append(name)
            if secret or key == hidden_value_field or _credential_under(name, item):
                out[key] = REDACTED
                self._hidden()
            elif key in _PATH_LIST_KEYS and isinstance(item, list):
                # A list of redacted paths ("password", "headers[0][1]") names
                # fields; the name/value pair rule must not hide one of them.
                out[key] = [self._at(index, entry) for index, entry in enumerate(item)]
            elif type(item) is int or type(item) is bool or item is None:
                out[key] = item
            else:
                out[key] = self.walk(item)
            stack.pop()
        return out

    def _at(self, index: int, item: Any) -> Any:
        self.stack.append(index)
        result = self.walk(item)
        self.stack.pop()
        return result

    @staticmethod
    def _name_value_field(value: dict[Any, Any]) -> str | None:
        # {"name": "OPENAI_API_KEY", "value": "..."}: env lists, header objects.
        for value_field in _VALUE_FIELDS:
            if value_field in value:
                for name_field in _NAME_FIELDS:
                    if _names_a_secret(value.get(name_field)):
                        return value_field
        return None

    def _sequence(self, value: list[Any] | tuple[Any, ...]) -> list[Any]:
        out: list[Any] = []
        # ["--api-key", "sk-..."] and ["Authorization", "Bearer ..."]: a secret name hides
        # the element after it: a flag (``-``) anywhere in the list, a name in a pair.
        # What follows a flag is its value unless it is another flag, whatever it looks
        # like (``sk-argv-secret-789`` holds a secret word, and is still the value); what
        # follows a pair's name is a value unless it is a secret's name too, made of name
        # words alone (a list of names): ``["api_key", "sk-argv-secret-789"]`` is a pair.
        hide_after: str | None = None
        pair = len(value) == 2
        for index, item in enumerate(value):
            if (
                hide_after is not None
                and _is_scalar(item)
                and not (
                    str(item).startswith("-")
                    if hide_after == "flag"
                    else _names_a_secret(item) and is_secret_name_alone(str(item))
                )
            ):
                out.append(REDACTED)
                self.stack.append(index)
                self._hidden()
                self.stack.pop()
                hide_after = None
                continue
            out.append(self._at(index, item))
            hide_after = None
            if _names_a_secret(item):
                if str(item).startswith("-"):
                    hide_after = "flag"
                elif pair:
                    hide_after = "pair"
        return out

    def _string(self, value: str) -> str:
        if value and (value[0] in "[{" or value[0].isspace()):
            stripped = value.strip()
            if len(stripped) >= 2 and stripped[0] in "[{" and stripped[-1] in "]}":
                nested = self._json_string(stripped)
                if nested is not None:
                    # Nothing hidden: the text stays as it was, its whitespace included.
                    return value if nested is stripped else nested
        result = redact_secrets_in_text(value)
        if result != value:
            self._hidden()
        return result

    def _json_string(self, text: str) -> str | None:
        try:
            decoded = _json_decoder.decode(text)
        except (msgspec.DecodeError, RecursionError):
            return None
        redacted = Walker(self.depth + len(self.stack) + 1).walk(decoded)
        if redacted == decoded:
            return text
        self._hidden()
        return _json_encoder.encode(redacted).decode("utf-8")


def redact_reference(value: Any, *, depth: int = 0) -> Redacted:
    """The full walk alone: the reference the fast path of ``redact`` is tested against."""
    walker = Walker(depth)
    result = walker.walk(value)
    classification: Classification = "sensitive" if walker.paths else "public"
    return Redacted(result, walker.paths, classification)
