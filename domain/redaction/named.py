"""Secrets named in free text: the value after a secret name, found from a few words.

``name=value``, ``name := value``, ``name: value``, ``--token value``,
``<password>value</password>`` and ``\\"name\\": \\"value\\"`` hide their value when
the name is a secret key (:mod:`pentrace.domain.redaction.keys`).  Every
secret name holds one of a few lowercase words, so the rules start from the
occurrences of those words and look around each for the name, the separator
and the value; a text without such a word costs one scan.
:mod:`pentrace.domain.redaction.text` merges these spans with the shape rules'.
"""

from __future__ import annotations

import re
import string
from typing import Final

from pentrace.domain.redaction.keys import is_secret_key, normalize_key
from pentrace.domain.redaction.policy import current, on_install

__all__ = ["IDENTIFIER", "NAME_WINDOW", "named_spans", "secret_words"]

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
        # ``--token abc``: a secret flag hides the word after it.
        flag = _FLAG_VALUE.match(text, name_end)
        if flag is not None:
            spans.append((*flag.span(1), "secret"))
        return name_end
    if found is None or not name or not (name[0].isalpha() or name[0] == "_"):
        return name_end
    separator, at = found
    bare_start = name_end - len(name)
    in_query = separator == "=" and bare_start > 0 and text[bare_start - 1] in "?&;"
    if is_secret_key(name) or (in_query and normalize_key(name) in _QUERY_ONLY_NAMES):
        value = _value_span(text, separator, at)
        if value is not None:
            spans.append((value[0], value[1], "secret"))
    return name_end


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


def named_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """Append the ``(start, end, "secret")`` span of every value a secret name holds."""
    if "=" in text or ":" in text or "-" in text:
        _assigned_spans(text, lowered, spans)
        if '\\"' in text:
            _escaped_pair_spans(text, spans)
    if "</" in text:
        _element_spans(text, spans)
