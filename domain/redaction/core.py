"""The fast path of redaction, held to the full walk (:mod:`.walk`, the reference).

Everything that leaves a trace is redacted by :func:`redact`, which gives what
:func:`~pentrace.domain.redaction.walk.redact_reference` (the full walk: every
rule, every node) gives, faster:

* a fast loop handles the dicts that need no neighbour or index (most payloads
  and envelope fields) and hands every other subtree to the walk in place;
* :func:`is_redacted` (the ledger's check) answers with one read-only pass;
* :func:`redact_flat` memoises the verdicts on flat envelope fields (scope,
  actor, correlation), which repeat in every event of a session;
* :func:`redact_decoded` puts the compiled screen (:mod:`.screen`) in front,
  for values whose JSON bytes are at hand: where no rule can apply anywhere in
  the bytes, the value comes back unchanged without a walk.

The rules themselves (docs/redaction.md):

* **key rules** (:mod:`.keys`): the whole value under a secret key becomes
  ``"[redacted]"`` and the walk does not descend below it, exactly as Penguin
  does, but with the names Penguin misses (W12);
* **structure rules** (:mod:`.walk`): ``["--api-key", "sk-..."]`` argument
  lists, header pair lists ``[["Authorization", "..."]]`` and ``{"name":
  "OPENAI_API_KEY", "value": "..."}`` objects hide the value that follows the
  secret name;
* **value rules** (:mod:`.text`): secret shapes inside any string are
  replaced in place by ``[redacted:<kind>]`` so the surrounding text stays
  readable; a string that holds JSON (tool arguments) is parsed and redacted
  as a structure, then re-encoded compactly.

Paths are Penguin's: dotted keys with ``[i]`` for list indices.  The walk is
pure and deterministic; :func:`is_redacted` holds for every output.

The property tests that tie this fast path to the reference, over generated
input with hostile values (lone surrogates, deep and huge values, planted
credentials in every position and encoding):
``tests/property/test_redaction_fast_path.py`` (:func:`redact` and
:func:`is_redacted` against the walk), ``tests/property/test_redaction_screen.py``
(the screen in front, both engines) and ``tests/property/test_redaction_planted.py``
(planted credentials: the screened path hides exactly what the walk hides,
and none survives); ``tests/unit/test_redaction_memo.py`` holds the memo.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

from pentrace.domain.redaction.screen import may_change
from pentrace.domain.redaction.text import MARKER, redact_secrets_in_text
from pentrace.domain.redaction.walk import (
    MAX_DEPTH,
    NEIGHBOUR_KEYS,
    PATH_LIST_KEYS,
    REDACTED,
    SCALAR_SECRET_KEYS,
    TOO_DEEP,
    VALUE_KEYS,
    Redacted,
    Walker,
    key_rule,
    redact_reference,
)

__all__ = [
    "Finding",
    "find_secrets",
    "find_secrets_in_text",
    "is_redacted",
    "is_redacted_encoded",
    "redact",
    "redact_decoded",
    "redact_flat",
    "redact_string",
    "redact_text",
]


_PLAIN: Final = frozenset({int, bool, float, type(None)})
# Strings known to be redaction's fixed points: its outputs (idempotence)
# and the inputs it left alone.  Ids, names and paths repeat in every event,
# and the ledger checks each envelope it is handed again, so a set lookup
# (the string's hash is cached on it) replaces most scans.  Bounded by count
# and by characters held; cleared whole when full (one rescan per live string).
_FIXED_COUNT: Final = 65_536
_FIXED_CHARS: Final = 4_000_000
_fixed: set[str] = set()
_fixed_chars = [0]
# Key tuples of dicts whose keys need no rule (see ``_plain_keys``).
_PLAIN_KEY_SETS: Final = 4096
_plain_key_sets: set[tuple[Any, ...]] = set()


def _keep(text: str) -> None:
    # Without a lock: a racing add or clear can only skew the size count;
    # the set never holds anything but fixed points.
    if len(_fixed) >= _FIXED_COUNT or _fixed_chars[0] > _FIXED_CHARS:
        _fixed.clear()
        _fixed_chars[0] = 0
    _fixed.add(text)
    _fixed_chars[0] += len(text)


def _walked(value: Any, stack: list[str], depth: int, paths: list[str]) -> Any:
    # The full walk for one subtree, positioned where the fast loop stands so
    # that its paths and its depth cut are the ones a walk from the root makes.
    walker = Walker(depth - len(stack))
    walker.stack = list(stack)
    result = walker.walk(value)
    paths.extend(walker.paths)
    return result


def _mapping(value: dict[Any, Any], stack: list[str], depth: int, paths: list[str]) -> Any:
    """What the walk makes of a dict, one loop per level where the dict is plain.

    Most payloads and envelope fields are dicts of str keys over strings,
    numbers and such dicts: no rule there needs a neighbour or an index, so
    each key is judged once (cached) and each string scanned once.  A dict
    the loop cannot judge alone (name/value keys, masked or odd keys, the
    depth cut) is walked whole; a list or JSON-looking string below a plain
    dict is walked alone, in place.
    """
    if depth >= MAX_DEPTH or not NEIGHBOUR_KEYS.isdisjoint(value):
        return _walked(value, stack, depth, paths)
    out: dict[str, Any] = {}
    found = len(paths)
    for key, item in value.items():
        rule = key_rule(key) if type(key) is str else None
        if rule is None or rule[0] != key:
            del paths[found:]
            return _walked(value, stack, depth, paths)
        kind = type(item)
        if rule[1]:
            out[key] = REDACTED
            paths.append(".".join((*stack, key)))
        elif kind is str:
            if item and (item[0] in "[{" or item[0].isspace()):
                out[key] = _walked(item, [*stack, key], depth + 1, paths)
                continue
            if item in _fixed:
                out[key] = item
                continue
            result = redact_secrets_in_text(item)
            if result != item:
                paths.append(".".join((*stack, key)))
            _keep(result)
            out[key] = result
        elif kind in _PLAIN:
            out[key] = item
        elif kind is dict:
            stack.append(key)
            out[key] = _mapping(item, stack, depth + 1, paths)
            stack.pop()
        else:
            out[key] = _walked(item, [*stack, key], depth + 1, paths)
    return out


def redact(value: Any, *, depth: int = 0) -> Redacted:
    """Redact a deep copy of ``value`` (dicts, lists, strings, scalars).

    ``depth`` is how deep ``value`` sits in the document it belongs to (1 for
    an envelope's payload), so that redacting the part and then the whole
    cuts over-deep nesting at the same place.

    >>> redact({"apiKey": "x", "tokens": 5}).value
    {'apiKey': '[redacted]', 'tokens': 5}
    """
    if type(value) is not dict:
        return redact_reference(value, depth=depth)
    paths: list[str] = []
    result = _mapping(value, [], depth, paths)
    return Redacted(result, paths, "sensitive" if paths else "public")


def redact_string(text: str, *, depth: int = 0) -> str:
    """``redact(text, depth=depth).value``, remembered as clean for :func:`is_redacted`.

    The envelope builder redacts a few strings itself (projection ids); the
    ledger's check of the same envelope then finds them known.
    """
    if text in _fixed:
        return text
    if text and (text[0] in "[{" or text[0].isspace()):
        result = redact(text, depth=depth).value
        return result if isinstance(result, str) else text
    result = redact_secrets_in_text(text)
    _keep(result)
    return result


def redact_text(text: str) -> str:
    """Redact the secrets inside one string, keeping the text around them."""
    if text and (text[0] in "[{" or text[0].isspace()):
        # Possibly JSON: the structure rules apply inside it.
        result = redact(text).value
        return result if isinstance(result, str) else text
    return redact_secrets_in_text(text)


def _walk_keeps(value: Any, depth: int) -> bool:
    # The full walk's verdict on a value ``depth`` levels down its document.
    return bool(Walker(depth).walk(value) == value)


def _plain_keys(keys: tuple[Any, ...]) -> bool:
    """True when every key is a str the key rules keep as it is, none a secret.

    Such a dict is unchanged exactly when every value is: no value is hidden
    for its key and no key is masked.  A value key (``value``/``val``) sends
    the dict to the walk, whose name/value rule reads a neighbour; a path-list
    key (``redacted_fields``) may stay, its list is judged item by item below.
    Verdicts are remembered per key tuple (envelope fields repeat theirs).
    """
    if keys in _plain_key_sets:
        return True
    for key in keys:
        if type(key) is not str or key in VALUE_KEYS or key in SCALAR_SECRET_KEYS:
            return False
        clean, secret = key_rule(key)
        if secret or clean != key:
            return False
    if len(_plain_key_sets) >= _PLAIN_KEY_SETS:
        _plain_key_sets.clear()
    _plain_key_sets.add(keys)
    return True


def _text_unchanged(text: str, depth: int) -> bool:
    # One string ``depth`` levels down: JSON-looking text is walked as a
    # structure (its verdict depends on depth), any other is scanned once.
    if text in _fixed:
        return True
    if text and (text[0] in "[{" or text[0].isspace()):
        return _walk_keeps(text, depth)
    if redact_secrets_in_text(text) != text:
        return False
    _keep(text)
    return True


def _unchanged(value: dict[Any, Any], depth: int) -> bool:
    """``redact(value) == value`` for a dict ``depth`` levels down, without the copy.

    The first thing redaction would change answers, so a clean envelope (the
    ledger checks every one) costs one read-only pass: a set lookup for its
    key tuple, then one type test per value and a set lookup per string seen
    before.  A dict the loop cannot judge alone goes to the full walk.
    """
    if depth >= MAX_DEPTH:
        return _walk_keeps(value, depth)
    keys = tuple(value)
    if keys not in _plain_key_sets and not _plain_keys(keys):
        return _unchanged_by_key(value, depth)
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            if item not in _fixed and not _text_unchanged(item, depth + 1):
                return False
        elif kind is dict:
            if not _unchanged(item, depth + 1):
                return False
        elif kind in _PLAIN:
            continue
        elif kind is list and key in PATH_LIST_KEYS:
            # The walk takes such a list item by item, without the list rules.
            if not all(_item_unchanged(entry, depth + 2) for entry in item):
                return False
        elif not _walk_keeps(item, depth + 1):
            return False
    return True


def _item_unchanged(item: Any, depth: int) -> bool:
    kind = type(item)
    if kind is str:
        return _text_unchanged(item, depth)
    if kind is dict:
        return _unchanged(item, depth)
    return kind in _PLAIN or _walk_keeps(item, depth)


def _unchanged_by_key(value: dict[Any, Any], depth: int) -> bool:
    # A dict whose keys are not all plain: a secret key must hold the marker
    # already; masked or odd keys and neighbour rules take the full walk.
    if not NEIGHBOUR_KEYS.isdisjoint(value):
        return _walk_keeps(value, depth)
    for key, item in value.items():
        rule = key_rule(key) if type(key) is str else None
        if rule is None or rule[0] != key:
            return _walk_keeps(value, depth)
        if rule[1]:
            if item != REDACTED:
                return False
        elif not _item_unchanged(item, depth + 1):
            return False
    return True


def is_redacted(value: Any) -> bool:
    """True when redacting ``value`` again would change nothing."""
    if type(value) is dict:
        return _unchanged(value, 0)
    return bool(redact_reference(value).value == value)


_FLAT: Final = frozenset({str, int, bool, type(None)})
_STR: Final = frozenset({str})
# Bounded: a long-lived process sees ever new sessions; clearing all at once
# costs one miss per live value, far less than tracking recency per hit.
_MAX_ENTRIES: Final = 4096
_memo: dict[object, tuple[dict[str, Any], list[str]]] = {}


def redact_flat(value: Any, *, depth: int = 0) -> tuple[Any, list[str]]:
    """``redact(value, depth=depth)`` as ``(value, paths)``; memoised for flat dicts.

    The paths list may be shared between calls: read it, do not change it.
    """
    if type(value) is dict:
        types = tuple(map(type, value.values()))
        if _FLAT.issuperset(types) and _STR.issuperset(map(type, value)):
            key = (depth, tuple(value.items()), types)
            hit = _memo.get(key)
            if hit is None:
                result = redact(value, depth=depth)
                if len(_memo) >= _MAX_ENTRIES:
                    _memo.clear()
                hit = _memo[key] = (dict(result.value), result.paths)
            return dict(hit[0]), hit[1]
    result = redact(value, depth=depth)
    return result.value, result.paths


def redact_decoded(
    value: Any, data: bytes, *, depth: int = 0, engine: str | None = None
) -> Redacted:
    """``redact(value, depth=depth)`` for a value decoded from (a part of) the JSON ``data``.

    The screen reads ``data`` once; where no rule can apply anywhere in it,
    ``value`` itself comes back, unchanged and public, without a walk.
    ``engine`` (``hs`` or ``re``) overrides the screen's engine, for tests.
    """
    if not may_change(data, engine_name=engine):
        return Redacted(value, [], "public")
    return redact(value, depth=depth)


def is_redacted_encoded(value: Any, data: bytes) -> bool:
    """:func:`is_redacted` for a value whose JSON encoding ``data`` is at hand: screened first."""
    return not may_change(data) or is_redacted(value)


_CONTEXT: Final = 24
_KIND: Final = re.compile(r"\[redacted:([a-z0-9_]+)\]")


class Finding(NamedTuple):
    """One hidden part of a value: the rule, the path (Penguin style) and a masked preview."""

    rule: str
    path: str
    preview: str


def _preview(redacted: str, start: int, end: int) -> str:
    left = max(0, start - _CONTEXT)
    right = min(len(redacted), end + _CONTEXT)
    text = redacted[left:right].replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return ("…" if left else "") + text + ("…" if right < len(redacted) else "")


def _text_findings(original: str, redacted: str, path: str, out: list[Finding]) -> None:
    if redacted in (REDACTED, TOO_DEEP):
        out.append(Finding("secret_key", path, f"{REDACTED} ({len(original)} chars)"))
        return
    markers = [m for m in MARKER.finditer(redacted) if m.group() not in original]
    if not markers:
        # A JSON string re-encoded with a whole value hidden inside it.
        out.append(Finding("secret_key", path, _preview(redacted, 0, 0)))
        return
    for marker in markers:
        kind = _KIND.fullmatch(marker.group())
        rule = kind.group(1) if kind else "secret_key"
        out.append(Finding(rule, path, _preview(redacted, marker.start(), marker.end())))


def _diff(original: Any, redacted: Any, path: str, out: list[Finding]) -> None:
    if original == redacted:
        return
    if isinstance(original, dict) and isinstance(redacted, dict):
        for (key, item), (clean_key, clean_item) in zip(
            original.items(), redacted.items(), strict=False
        ):
            where = f"{path}.{clean_key}" if path else str(clean_key)
            if key != clean_key:
                out.append(Finding("secret_in_key", where, f"{clean_key}: {REDACTED}"))
                continue
            _diff(item, clean_item, where, out)
        return
    if isinstance(original, list | tuple) and isinstance(redacted, list):
        for index, (item, clean_item) in enumerate(zip(original, redacted, strict=False)):
            _diff(item, clean_item, f"{path}[{index}]", out)
        return
    if isinstance(redacted, str):
        text = original if isinstance(original, str) else str(original)
        _text_findings(text, redacted, path, out)
        return
    out.append(Finding("secret_key", path, REDACTED))


def find_secrets(value: Any, data: bytes | None = None) -> list[Finding]:
    """Every part of ``value`` the current policy hides, in walk order.

    ``data`` is the JSON ``value`` was decoded from, if at hand: the screen
    reads it first, and a clean record costs no walk.
    """
    result = redact_decoded(value, data) if data is not None else redact_reference(value)
    if not result.paths:
        return []
    out: list[Finding] = []
    _diff(value, result.value, "", out)
    return out


def find_secrets_in_text(text: str) -> list[Finding]:
    """:func:`find_secrets` for one string (search index bodies, read-model cells)."""
    return find_secrets(text)
