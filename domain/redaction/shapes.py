"""Secret shapes: well-known credential formats, each a regex with literal gates.

Regexes start with a literal so the regex engine skips to candidates with a
fast substring search (a leading ``\\b`` would defeat that, so word
boundaries are checked in Python on the few hits).  Each shape runs only when
one of its gate literals is in the text; case-insensitive ones check their
gates on the lowercased text.  The generic rules live here, the providers'
in :mod:`pentrace.domain.redaction.providers`, the user's in the policy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final

from pentrace.domain.redaction.policy import CustomRule, current, on_install
from pentrace.domain.redaction.providers import PROVIDER_SHAPES
from pentrace.domain.redaction.shape import Shape

__all__ = ["GATES", "LOWERED_GATES", "UNGATED_CUSTOM", "shape_spans", "shapes"]

_B64URL: Final = r"[A-Za-z0-9_-]"


_PEM: Final = (
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_SK: Final = r"sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
# The generic rules: headers, bearer values, URLs and command lines.
_GENERIC: Final = (
    Shape("private_key", re.compile(_PEM, re.DOTALL), ("-----BEGIN",), boundary=False),
    Shape(
        "authorization",
        re.compile(r"(?i)(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?([^\r\n\"']+)"),
        ("authorization",),
        1,
        lowered=True,
    ),
    Shape(
        "cookie",
        re.compile(r"(?i)(?:set-)?cookie[\"']?[ \t]*:[ \t]*[\"']?([^\r\n\"']+)"),
        ("cookie",),
        1,
        lowered=True,
    ),
    Shape(
        "bearer_token",
        re.compile(r"(?i)bearer[ \t]+([A-Za-z0-9._~+/=-]{8,})"),
        ("bearer",),
        1,
        lowered=True,
    ),
    Shape("api_key", re.compile(_SK + r"[A-Za-z0-9_-]{20,}"), ("sk-",)),
    Shape("jwt", re.compile(rf"eyJ{_B64URL}{{8,}}\.{_B64URL}{{8,}}\.{_B64URL}*"), ("eyJ",)),
    Shape(
        "user_password",
        re.compile(r"(?<![^\s\"'])(?:-u|--user)[ =][\"']?[^\s:\"']+:([^\s\"']+)"),
        ("-u ", "-u=", "--user ", "--user="),
        1,
        boundary=False,
    ),
    Shape(
        "url_password",
        # Greedy up to the last ``@`` of the authority: a raw ``@`` may sit in the password.
        re.compile(r"://[^/\s:@\"'<>]*:([^/\s\"'<>]+)@"),
        ("@",),
        1,
        boundary=False,
    ),
    Shape("url_token", re.compile(r"://([A-Za-z0-9_.~-]{20,})@"), ("@",), 1, boundary=False),
)


def _custom(rule: CustomRule) -> Shape:
    keywords = tuple(keyword.lower() for keyword in rule.keywords)
    return Shape(rule.id, rule.regex, keywords, rule.group, lowered=True, boundary=False)


def shapes() -> tuple[Shape, ...]:
    """Every shape in force: the generic rules, the providers', then the policy's."""
    return (*_GENERIC, *PROVIDER_SHAPES, *map(_custom, current().rules))


def _continues_word(text: str, start: int) -> bool:
    if start == 0:
        return False
    before = text[start - 1]
    return before.isalnum() or before == "_"


# The shapes as plain tuples in three tables, by the text their gates are
# looked for in (none: every text): one loop with tuple unpacking costs far
# less than attribute reads on every shape of every string.  Rebuilt when a
# policy with other rules is installed.
_Row = tuple[
    tuple[str, ...],
    Callable[[str], Iterator[re.Match[str]]],
    int,
    bool,
    str,
    Callable[[str], bool] | None,
]
_BY_TEXT: tuple[_Row, ...] = ()
_BY_LOWERED: tuple[_Row, ...] = ()
_ALWAYS: tuple[_Row, ...] = ()
# Every gate, by the text it is looked for in: a text holding none of them
# has no gated shape in it at all.
GATES: frozenset[str] = frozenset()
LOWERED_GATES: frozenset[str] = frozenset()
# True when a user rule without keywords may match anywhere (no shortcut holds).
UNGATED_CUSTOM = False


def _row(shape: Shape) -> _Row:
    finditer = shape.regex.finditer
    return (shape.gates, finditer, shape.group, shape.boundary, shape.kind, shape.check)


def _rebuild() -> None:
    global _BY_TEXT, _BY_LOWERED, _ALWAYS, GATES, LOWERED_GATES, UNGATED_CUSTOM
    every = shapes()
    _BY_TEXT = tuple(_row(shape) for shape in every if shape.gates and not shape.lowered)
    _BY_LOWERED = tuple(_row(shape) for shape in every if shape.gates and shape.lowered)
    _ALWAYS = tuple(_row(shape) for shape in every if not shape.gates)
    GATES = frozenset(gate for row in _BY_TEXT for gate in row[0])
    LOWERED_GATES = frozenset(gate for row in _BY_LOWERED for gate in row[0])
    UNGATED_CUSTOM = any(not rule.keywords for rule in current().rules)


_rebuild()
on_install(_rebuild)


def _find(
    text: str, rows: tuple[_Row, ...], spans: list[tuple[int, int, str]], haystack: str | None
) -> None:
    for gates, finditer, group, boundary, kind, check in rows:
        if haystack is not None and not any(gate in haystack for gate in gates):
            continue
        for match in finditer(text):
            if boundary and _continues_word(text, match.start()):
                continue
            if check is not None and not check(match.group(group)):
                continue
            start, end = match.span(group)
            spans.append((start, end, kind))


def shape_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """Append ``(start, end, kind)`` for every shape found; ``lowered`` is ``text`` lowercased."""
    _find(text, _BY_TEXT, spans, text)
    _find(text, _BY_LOWERED, spans, lowered)
    _find(text, _ALWAYS, spans, None)
