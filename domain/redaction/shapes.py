"""Secret shapes: well-known credential formats, each a regex with literal gates.

Regexes start with a literal so the regex engine skips to candidates with a
fast substring search (a leading ``\\b`` would defeat that, so word
boundaries are checked in Python on the few hits).  Each shape runs only when
one of its gate literals is in the text; case-insensitive ones check their
gates on the lowercased text.  The generic rules live here, the providers'
in :mod:`pentrace.domain.redaction.providers`, the user's in the policy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from pentrace.domain.redaction.gates import GateIndex
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


# The shapes as plain tuples, found through one index of their gates: one
# loop with tuple unpacking costs far less than attribute reads on every
# shape of every string.  Rebuilt when a policy with other rules is installed.
_Row = tuple[
    Callable[[str], Iterator[re.Match[str]]],
    int,
    bool,
    str,
    Callable[[str], bool] | None,
]
_ROWS: tuple[_Row, ...] = ()
_ALWAYS: tuple[_Row, ...] = ()
_INDEX = GateIndex((), (), fast=False)
# Every gate, by the text it is looked for in: a text holding none of them
# has no gated shape in it at all.
GATES: frozenset[str] = frozenset()
LOWERED_GATES: frozenset[str] = frozenset()
# True when a user rule without keywords may match anywhere (no shortcut holds).
UNGATED_CUSTOM = False
# ``PENTRACE_REDACTION_SCREEN=re`` keeps Hyperscan out of redaction altogether.
_FAST: Final = os.environ.get("PENTRACE_REDACTION_SCREEN", "") not in ("re", "off")


def _row(shape: Shape) -> _Row:
    return (shape.regex.finditer, shape.group, shape.boundary, shape.kind, shape.check)


def _rebuild() -> None:
    global _ROWS, _ALWAYS, _INDEX, GATES, LOWERED_GATES, UNGATED_CUSTOM
    every = shapes()
    indexed = [shape for shape in every if shape.gates or shape.screen]
    _ROWS = tuple(map(_row, indexed))
    _ALWAYS = tuple(_row(shape) for shape in every if not (shape.gates or shape.screen))
    exact = [(g, i) for i, shape in enumerate(indexed) if not shape.lowered for g in shape.gates]
    lowered = [(g, i) for i, shape in enumerate(indexed) if shape.lowered for g in shape.gates]
    regexes = [(shape.screen, i) for i, shape in enumerate(indexed) if shape.screen]
    _INDEX = GateIndex(exact, lowered, regexes, fast=_FAST)
    GATES = frozenset(gate for gate, _ in exact)
    LOWERED_GATES = frozenset(gate for gate, _ in lowered)
    UNGATED_CUSTOM = any(not rule.keywords for rule in current().rules)


_rebuild()
on_install(_rebuild)


def _find(text: str, rows: Iterable[_Row], spans: list[tuple[int, int, str]]) -> None:
    for finditer, group, boundary, kind, check in rows:
        for match in finditer(text):
            if boundary and _continues_word(text, match.start()):
                continue
            if check is not None and not check(match.group(group)):
                continue
            start, end = match.span(group)
            spans.append((start, end, kind))


def shape_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """Append ``(start, end, kind)`` for every shape found; ``lowered`` is ``text`` lowercased."""
    present = _INDEX.rows(text, lowered)
    if present:
        _find(text, [_ROWS[index] for index in sorted(present)], spans)
    if _ALWAYS:
        _find(text, _ALWAYS, spans)
