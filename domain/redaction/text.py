"""Secrets inside free text: where they are, and their replacement by markers.

Two families of rules find the spans to hide:

* the shape rules (:mod:`pentrace.domain.redaction.shapes`), one regex per
  credential format, each gated by a literal;
* the *named* rules: ``name=value``, ``name := value``, ``name: value``,
  ``--token value``, a quoted argument list (``"--api-key", "value"``),
  ``<password>value</password>`` and ``\\"name\\": \\"value\\"`` hide their
  value when the name is a secret key (:mod:`pentrace.domain.redaction.keys`).
  Every secret name holds one of a few lowercase words, so these rules start
  from the occurrences of those words and look around each for the name, the
  separator and the value; a text without such a word costs one scan.

Every rule is scanned on its own over the original string and yields the span
to hide; overlapping spans are merged and each merged span becomes one marker
such as ``[redacted:github_token]``.  Scanning the rules separately (rather
than one alternation in one pass) means a match of one rule can never swallow
the first half of another secret and leave its tail behind.

Speed matters: this runs on every string of every ledger row.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Final

from pentrace.domain.redaction import shapes as _shapes
from pentrace.domain.redaction.keys import is_secret_key, is_secret_name_alone, normalize_key
from pentrace.domain.redaction.policy import current, on_install
from pentrace.domain.redaction.shapes import shape_spans

__all__ = [
    "IDENTIFIER",
    "MARKER",
    "NAME_WINDOW",
    "find_secret_spans",
    "is_marker",
    "named_spans",
    "redact_secrets_in_text",
    "secret_words",
]


_QUERY_ONLY_NAMES: Final = frozenset(
    {"key", "sig", "signature", "x_amz_signature", "x_amz_credential", "x_amz_security_token"}
)
# Every secret name contains one of these (lowercased); ``name=value`` rules
# start from their occurrences.  A test holds the list to the key rules: each
# secret word and segment of :mod:`pentrace.domain.redaction.keys` contains one.
_SECRET_WORDS: Final = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "cookie",
    "cred",
    "jwt",
    "dsn",
    "sig",
    "bearer",
    "session",
    "private",
    "database",
    "db_ur",
    "db-ur",
    "db.ur",
    "dbur",
    "connection",
    "conn_str",
    "conn-str",
    "conn.str",
    "connstr",
    "hook",
    "otp",
)
# One alternation over the words, shortest first: where two start at the same
# place the sorted hits of the ``str.find`` loop take the shorter one too.
# The policy's own key names add a word each (see ``secret_words``).
_WORDS: tuple[str, ...] = _SECRET_WORDS
_WORD_SEARCH = re.compile("|".join(map(re.escape, sorted(_SECRET_WORDS, key=len))))
_ALTERNATION_LENGTH: Final = 1024
# Text made only of name characters and ``:`` (ids): see ``_no_secret_part``.
IDENTIFIER: Final = re.compile(r"[A-Za-z0-9_.:-]*")
_NAME_CHARS: Final = string.ascii_letters + string.digits + "_.-"
_ASSIGNED_VALUE: Final = re.compile(r"[ \t]*(\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s&\"',;<>]+)")
_COLON_VALUE: Final = re.compile(
    r"[ \t]*(?:\"((?:[^\"\\\r\n]|\\.)*)\"|'((?:[^'\\\r\n]|\\.)*)'|(?![\"'/])(\S[^\r\n,}]*))"
)
# The value after a secret flag and blanks: quoted, or a word that is no other flag.
_FLAG_VALUE: Final = re.compile(r"[ \t]+(\"[^\"\r\n]*\"|'[^'\r\n]*'|(?!-)[^\s\"'`;|&<>()]+)")
# The value after a quoted secret flag in a quoted argument list, JSON escaped or not, at
# any depth (``"--api-key", "value"``, ``\\"--token\\", \\"value\\"``, ``\\\\\\"…``): the next
# element, no other flag.
_LISTED_VALUE: Final = re.compile(r"(\\*)([\"'])[ \t]*,[ \t]*\1\2((?!-)[^\"'\\\r\n]+)")
# The value of a quoted two-element list whose first element is a secret name
# (``"api_key", "value"]``, JSON escaped or not): the second element, then the bracket.
_PAIR_VALUE: Final = re.compile(r"(\\*)([\"'])[ \t]*,[ \t]*\1\2([^\"'\\\r\n]+)\1\2[ \t]*\]")
# ``"name": "OPENAI_API_KEY", "value": "..."`` (an env entry, a header object) quoted in
# text, JSON escaped or not, in either order: (pattern, name group, value group).
_NAMED: Final = (
    r'"(?:name|key|header|Name|Key|Header)\1"[ \t]*:[ \t]*\1"([A-Za-z_][A-Za-z0-9_.-]{0,63})\1"'
)
_VALUED: Final = r'"(?:value|Value|val)\1"[ \t]*:[ \t]*\1"([^"\\\r\n]+)\1"'
# A quoted list's opening (``["``, ``[ \\"``): where a ``["api_key", "..."]`` pair may start.
_PAIR_OPEN: Final = re.compile(r"\[[ \t]*\\*[\"']")
# A quoted ``value`` or ``val`` key, JSON escaped or not: where such an object may be.
_VALUE_KEY: Final = re.compile(r'"val(?:ue)?\\*"')
_NAME_VALUE_OBJECTS: Final = (
    (re.compile(r"(\\*)" + _NAMED + r"[ \t]*,[ \t]*\1" + _VALUED), 2, 3),
    (re.compile(r"(\\*)" + _VALUED + r"[ \t]*,[ \t]*\1" + _NAMED), 3, 2),
)
# A value that reads as a credential: 16 or more key characters, mixed case and a digit.
_KEYLIKE_VALUE: Final = re.compile(
    r"(?=[^0-9]*[0-9])(?=[^A-Z]*[A-Z])(?=[^a-z]*[a-z])[A-Za-z0-9_+/=.~-]{16,}"
)
_TYPE_WORD: Final = re.compile(
    r"(?:str|string|int|bytes|bool|boolean|float|number|None|null|undefined|Any|any"
    r"|Optional|SecretStr|SecretBytes|Union|list|dict)(?![A-Za-z0-9_])"
)
_ELEMENT: Final = re.compile(r"<([A-Za-z_][A-Za-z0-9_.:-]{0,63})>([^<]{1,1024})</\1>")
_ESCAPED_PAIR: Final = re.compile(
    r"\\\"([A-Za-z_][A-Za-z0-9_.-]{0,63})\\\"[ \t]*:[ \t]*\\\"(.*?)\\\""
)
# How far around a secret word a name may reach.
NAME_WINDOW: Final = 72


def secret_words() -> tuple[str, ...]:
    """Lowercase words one of which every secret name holds (the policy's included).

    A policy key name holds its longest ``_`` segment however it is spelt
    (``my_ssn``, ``mySsn``, ``MYSSN``), so that segment is its word.
    """
    return _WORDS


def _reload() -> None:
    global _WORDS, _WORD_SEARCH
    extra = {max(name.split("_"), key=len) for name in current().secret_keys}
    _WORDS = tuple(dict.fromkeys((*_SECRET_WORDS, *sorted(extra - {""}))))
    _WORD_SEARCH = re.compile("|".join(map(re.escape, sorted(_WORDS, key=len))))


on_install(_reload)


def _name_around(text: str, start: int, end: int) -> tuple[int, int]:
    # str.rstrip/lstrip with a character set run in C: far cheaper than a regex
    # that tries every position of a long text.
    before = text[max(0, start - NAME_WINDOW) : start]
    after = text[end : end + NAME_WINDOW]
    return (
        start - (len(before) - len(before.rstrip(_NAME_CHARS))),
        end + (len(after) - len(after.lstrip(_NAME_CHARS))),
    )


def _separator(text: str, name_end: int) -> tuple[str, int] | None:
    """The ``=``/``:=``/``:`` after a name (past a closing quote and blanks)."""
    index = name_end
    if text[index : index + 1] in ('"', "'"):
        index += 1
    while text[index : index + 1] in (" ", "\t"):
        index += 1
    two = text[index : index + 2]
    if two == ":=":
        return "=", index + 2
    if two == "==" or two == "::" or text[index : index + 3] == "://":
        return None
    if two[:1] in ("=", ":"):
        return two[:1], index + 1
    return None


def _value_span(text: str, separator: str, at: int) -> tuple[int, int] | None:
    if separator == "=":
        value = _ASSIGNED_VALUE.match(text, at)
        return None if value is None else value.span(1)
    colon = _COLON_VALUE.match(text, at)
    if colon is None:
        return None
    group = next(g for g in (1, 2, 3) if colon.group(g) is not None)
    if group == 3 and _TYPE_WORD.match(colon.group(3)) is not None:
        # ``def login(password: str)``, ``token: string;``: source code, not a secret.
        return None
    start = colon.start(group)
    return start, start + len(colon.group(group).rstrip())


def _named_span_at(
    text: str, word_start: int, word_end: int, spans: list[tuple[int, int, str]]
) -> int:
    """Judge the name around one secret word; returns where that name ends."""
    name_start, name_end = _name_around(text, word_start, word_end)
    name = text[name_start:name_end].lstrip("-")
    found = _separator(text, name_end)
    if found is None and name_end - name_start > len(name) and is_secret_key(name):
        # ``--token abc``: a secret flag hides the word after it; ``"--token", "abc"``
        # (an argument list quoted in text) the element after it.
        flag = _FLAG_VALUE.match(text, name_end)
        if flag is not None:
            spans.append((*flag.span(1), "secret"))
        elif name_start > 0 and text[name_start - 1] in "\"'":
            listed = _LISTED_VALUE.match(text, name_end)
            if listed is not None and listed.group(2) == text[name_start - 1]:
                spans.append((*listed.span(3), "secret"))
        return name_end
    if found is None and _opens_a_pair(text, name_start) and is_secret_key(name):
        # ``["api_key", "sk-..."]`` quoted in text: a secret name and its value, a pair.
        pair = _PAIR_VALUE.match(text, name_end)
        if pair is not None and pair.group(2) == text[name_start - 1]:
            value = pair.group(3)
            if not is_secret_name_alone(value) and MARKER.fullmatch(value) is None:
                spans.append((*pair.span(3), "secret"))
        return name_end
    if found is None or not name or not (name[0].isalpha() or name[0] == "_"):
        return name_end
    separator, at = found
    bare_start = name_end - len(name)
    in_query = separator == "=" and bare_start > 0 and text[bare_start - 1] in "?&;"
    if is_secret_key(name):
        value = _value_span(text, separator, at)
        if value is not None:
            spans.append((value[0], value[1], "secret"))
    elif separator == "=" and normalize_key(name) in _QUERY_ONLY_NAMES:
        # ``key=``, ``sig=``: a secret in a URL query; elsewhere only a value that reads
        # as a credential (``key=AIzaSy...`` cut short of the full Google shape).  Only
        # after ``=``: ids (``key:...``) hold no ``=``, and the id shortcut relies on it.
        value = _value_span(text, separator, at)
        if value is not None and (in_query or _credential_like(text[value[0] : value[1]])):
            spans.append((value[0], value[1], "secret"))
    return name_end


def _opens_a_pair(text: str, name_start: int) -> bool:
    """Whether the name at ``name_start`` is quoted and first in a bracketed list (``["``,
    ``[\\"``, blanks allowed after the bracket)."""
    if name_start == 0 or text[name_start - 1] not in "\"'":
        return False
    at = name_start - 2
    while at >= 0 and text[at] == "\\":  # the quote's escapes, however deeply nested
        at -= 1
    while at >= 0 and text[at] in " \t":
        at -= 1
    return at >= 0 and text[at] == "["


def _credential_like(value: str) -> bool:
    bare = value.strip("\"'")
    return _KEYLIKE_VALUE.fullmatch(bare) is not None or (
        len(bare) >= _SHORTEST_PREFIXED and bare.startswith(_KNOWN_PREFIXES + _KNOWN_PREFIXES_MORE)
    )


def _no_secret_part(text: str, lowered: str) -> bool:
    """True when no secret word of an ids-only text lies in a secret name.

    For text made of name characters and ``:`` alone (event ids, projection
    ids, ``session_id:<id>`` subjects), each name the loop below would judge
    is the whole ``:``-separated part around a secret word, as long as that
    part fits the name window; with no ``=`` only a secret name can hide a
    value.  So when no such part is a secret name (a cached
    verdict per part, and parts repeat), the loop would find nothing.
    """
    search = _WORD_SEARCH.search
    at = 0
    while (hit := search(lowered, at)) is not None:
        start = text.rfind(":", 0, hit.start()) + 1
        end = text.find(":", hit.end())
        if end == -1:
            end = len(text)
        if end - start > NAME_WINDOW or is_secret_key(text[start:end].lstrip("-")):
            return False
        at = end
    return True


def _assigned_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """``name=value``, ``name := value`` and ``name: value`` where the name is secret.

    Driven by the secret words in the text, so a long text full of ``:`` and
    ``=`` but without such words costs one scan.  A word inside a name already
    judged is skipped.  Short texts find the next word with one alternation
    (shortest word first, as the sorted hits below would take it), searched
    from the end of the last name; long ones with one ``str.find`` per word,
    which is faster there; both judge exactly the same words.
    """
    done = 0
    if len(lowered) <= _ALTERNATION_LENGTH:
        if IDENTIFIER.fullmatch(text) and _no_secret_part(text, lowered):
            return
        search = _WORD_SEARCH.search
        while (hit := search(lowered, done)) is not None:
            done = _named_span_at(text, hit.start(), hit.end(), spans)
        return
    hits: list[tuple[int, int]] = []
    for word in _WORDS:
        index = lowered.find(word)
        while index != -1:
            hits.append((index, index + len(word)))
            index = lowered.find(word, index + 1)
    hits.sort()
    for word_start, word_end in hits:
        if word_start >= done:
            done = _named_span_at(text, word_start, word_end, spans)


def _element_spans(text: str, spans: list[tuple[int, int, str]]) -> None:
    """``<password>…</password>`` in XML configuration (Maven, .NET, plists)."""
    for match in _ELEMENT.finditer(text):
        if is_secret_key(match.group(1)):
            spans.append((match.start(2), match.end(2), "secret"))


def _escaped_pair_spans(text: str, spans: list[tuple[int, int, str]]) -> None:
    for match in _ESCAPED_PAIR.finditer(text):
        if is_secret_key(match.group(1)):
            spans.append((match.start(2), match.end(2), "secret"))


def _name_value_spans(text: str, spans: list[tuple[int, int, str]]) -> None:
    """``{"name": "OPENAI_API_KEY", "value": "..."}`` quoted in text (JSON escaped or not),
    either order: the object the walk hides the value of, when it is a whole value."""
    for pattern, name_group, value_group in _NAME_VALUE_OBJECTS:
        for match in pattern.finditer(text):
            value = match.group(value_group)
            if is_secret_key(match.group(name_group)) and MARKER.fullmatch(value) is None:
                spans.append((match.start(value_group), match.end(value_group), "secret"))


def named_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """Append the ``(start, end, "secret")`` span of every value a secret name holds."""
    if "=" in text or ":" in text or "-" in text or _PAIR_OPEN.search(text) is not None:
        _assigned_spans(text, lowered, spans)
        if '\\"' in text:
            _escaped_pair_spans(text, spans)
        if ":" in text and _VALUE_KEY.search(lowered) is not None:
            _name_value_spans(text, spans)
    if "</" in text:
        _element_spans(text, spans)


MARKER: Final = re.compile(r"\[redacted(?::[a-z0-9_]+)?\]")
# Id stems known clean whatever number follows them (``_clean_with_any_number``);
# only texts of up to ``_CACHED_LENGTH`` characters, so the set stays small.
_DIGITS: Final = "0123456789"
_CLEAN_STEMS: Final = 4096
_clean_stems: set[str] = set()
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
# ``pwd=x`` is the shortest text any rule hides a value in.
_SHORTEST_SECRET: Final = 5
_CACHED_LENGTH: Final = 256
_BLOB_LENGTH: Final = 512
_BLOB: Final = re.compile(r"[A-Za-z0-9+/_=-]+")
_KNOWN_PREFIXES: Final = ("sk-", "sk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "xapp-")
_KNOWN_PREFIXES_MORE: Final = ("AIza", "hf_", "npm_", "whsec_", "eyJ", "AKIA", "ASIA")
# A known credential prefix and at least a few characters more reads as a credential.
_SHORTEST_PREFIXED: Final = 10


def _forget() -> None:
    _clean_stems.clear()
    _replace_short.cache_clear()


def is_marker(text: str) -> bool:
    """True when ``text`` holds only redaction markers, spaces and punctuation."""
    return not any(char.isalnum() for char in MARKER.sub("", text))


def _widen(start: int, end: int, markers: list[tuple[int, int]]) -> tuple[int, int]:
    # A span that cuts into a marker takes the whole marker: half a marker is
    # plain text again, and replacing must only ever shrink what is unredacted.
    for left, right in markers:
        if left < end and start < right:
            start, end = min(start, left), max(end, right)
    return start, end


def _merge(spans: list[tuple[int, int, str]], text: str) -> list[tuple[int, int, str]]:
    markers = [m.span() for m in MARKER.finditer(text)] if "[redacted" in text else []
    policy = current()
    kept = sorted(
        (*_widen(start, end, markers), kind)
        for start, end, kind in spans
        # Text that is already a marker is never a secret, even where a marker's
        # ``:`` looks like a URL userinfo or a ``name: value`` pair to some rule.
        if end > start
        and not is_marker(text[start:end])
        and not (policy.allowed_values and policy.allows(text[start:end]))
        and not any(left <= start and end <= right for left, right in markers)
    )
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in kept:
        if merged and start < merged[-1][1]:
            last_start, last_end, last_kind = merged[-1]
            merged[-1] = (last_start, max(last_end, end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged


def find_secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Merged, sorted ``(start, end, kind)`` spans of every secret found in ``text``."""
    lowered = text.lower()
    if len(lowered) != len(text):
        # Some non-ASCII letters grow when lowercased; keep offsets aligned.
        lowered = text.translate(_ASCII_LOWER)
    spans: list[tuple[int, int, str]] = []
    shape_spans(text, lowered, spans)
    named_spans(text, lowered, spans)
    return _merge(spans, text) if spans else []


def _replace(text: str) -> str:
    # Replacing one span can change what a neighbouring rule sees (a swallowed
    # quote no longer ends a header value), so repeat until nothing is found:
    # the result is a fixed point, which is what makes redaction idempotent.
    # Every round turns at least one letter or digit outside markers into a
    # marker and never cuts a marker (``_widen``), so the loop ends.
    spans = find_secret_spans(text)
    while spans:
        pieces: list[str] = []
        cursor = 0
        for start, end, kind in spans:
            pieces.append(text[cursor:start])
            pieces.append(f"[redacted:{kind}]")
            cursor = end
        pieces.append(text[cursor:])
        text = "".join(pieces)
        spans = find_secret_spans(text)
    return text


# Ids, names, paths and enum-like values repeat in every event of a session.
_replace_short: Final = lru_cache(maxsize=8192)(_replace)
on_install(_forget)


def _is_opaque_blob(text: str) -> bool:
    # Base64 image data and provider ``fidelity`` signatures are opaque bytes: a
    # random ``sk-…`` or ``AKIA…`` run inside one is chance, and rewriting it
    # would corrupt the blob in a redacted export.
    if text.startswith("data:"):
        comma = text.find(";base64,", 0, 200)
        return comma != -1 and _BLOB.fullmatch(text, comma + 8) is not None
    return _BLOB.fullmatch(text) is not None and not text.startswith(
        _KNOWN_PREFIXES + _KNOWN_PREFIXES_MORE
    )


def _clean_with_any_number(stem: str) -> bool:
    """True when ``stem + digits`` is clean for every run of ASCII digits.

    For an ids-only ``stem`` (name characters and ``:``) that ends in ``:``,
    holds no shape gate and has no part longer than the name window, the
    digits can only be a value after the last part: no shape can start in
    or reach into them (no gate holds ``:`` before a digit or only digits, and
    no token shape crosses a ``:``), and every name judged is a whole part of
    the stem (``named._no_secret_part``).  Any digits then make the same spans as
    ``0`` does, so ``stem + "0"`` stands for all of them; the verdict is
    remembered per stem (event ids ``evt:<stream>:<sequence>`` and OpenCode
    ids ``<type>:<session>:<position>`` share one per stream).
    """
    if stem in _clean_stems:
        return True
    if (
        len(stem) + 1 < _SHORTEST_SECRET
        or not stem.endswith(":")
        or IDENTIFIER.fullmatch(stem) is None
        or any(len(part) > NAME_WINDOW for part in stem.split(":"))
        or _shapes.UNGATED_CUSTOM
        or any(gate in stem for gate in _shapes.GATES)
        or any(gate in stem.lower() for gate in _shapes.LOWERED_GATES)
        or _replace(stem + "0") != stem + "0"
    ):
        return False
    if len(_clean_stems) >= _CLEAN_STEMS:
        _clean_stems.clear()
    _clean_stems.add(stem)
    return True


def redact_secrets_in_text(text: str) -> str:
    """``text`` with every secret span replaced by ``[redacted:<kind>]``."""
    if len(text) < _SHORTEST_SECRET:
        return text
    if (
        text[-1] in _DIGITS
        and len(text) <= _CACHED_LENGTH
        and _clean_with_any_number(text.rstrip(_DIGITS))
    ):
        return text
    if len(text) <= _CACHED_LENGTH:
        return _replace_short(text)
    if len(text) >= _BLOB_LENGTH and _is_opaque_blob(text):
        return text
    return _replace(text)
