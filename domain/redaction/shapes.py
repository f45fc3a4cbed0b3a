"""Secret shapes: well-known credential formats, each a regex with a literal gate.

Regexes start with a literal so the regex engine skips to candidates with a
fast substring search (a leading ``\\b`` would defeat that, so word
boundaries are checked in Python on the few hits).  Each shape runs only when
its gate literal is in the text; case-insensitive ones check the gate on the
lowercased text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final, NamedTuple

__all__ = ["GATES", "LOWERED_GATES", "shape_spans"]

_B64URL: Final = r"[A-Za-z0-9_-]"


class _Shape(NamedTuple):
    kind: str
    regex: re.Pattern[str]
    # A literal the text must contain before the regex runs at all.
    gate: str
    group: int = 0
    # Case-insensitive rules check their gate on the lowercased text.
    lowered: bool = False
    # The match must not continue a word (what a leading ``\\b`` would say).
    boundary: bool = True


_PEM: Final = (
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_SK: Final = r"sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
_SHAPES: Final = (
    _Shape("private_key", re.compile(_PEM, re.DOTALL), "-----BEGIN", boundary=False),
    _Shape(
        "authorization",
        re.compile(r"(?i)(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?([^\r\n\"']+)"),
        "authorization",
        1,
        lowered=True,
    ),
    _Shape(
        "cookie",
        re.compile(r"(?i)(?:set-)?cookie[\"']?[ \t]*:[ \t]*[\"']?([^\r\n\"']+)"),
        "cookie",
        1,
        lowered=True,
    ),
    _Shape(
        "bearer_token",
        re.compile(r"(?i)bearer[ \t]+([A-Za-z0-9._~+/=-]{8,})"),
        "bearer",
        1,
        lowered=True,
    ),
    _Shape("api_key", re.compile(_SK + r"[A-Za-z0-9_-]{20,}"), "sk-"),
    _Shape("stripe_key", re.compile(r"sk_(?:live|test)_[A-Za-z0-9]{16,}"), "sk_"),
    _Shape("stripe_key", re.compile(r"rk_(?:live|test)_[A-Za-z0-9]{16,}"), "rk_"),
    _Shape(
        "aws_access_key",
        re.compile(r"A(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA)[A-Z0-9]{16}"),
        "A",
    ),
    _Shape("jwt", re.compile(rf"eyJ{_B64URL}{{8,}}\.{_B64URL}{{8,}}\.{_B64URL}*"), "eyJ"),
    _Shape("github_token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,}"), "_"),
    _Shape("github_token", re.compile(r"github_pat_[A-Za-z0-9_]{30,}"), "github_pat_"),
    _Shape("gitlab_token", re.compile(r"glpat-[A-Za-z0-9_-]{20,}"), "glpat-"),
    _Shape("slack_token", re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}"), "xox"),
    _Shape("slack_token", re.compile(r"xapp-[A-Za-z0-9-]{10,}"), "xapp-"),
    _Shape(
        "slack_webhook",
        re.compile(r"hooks\.slack\.com/services/([A-Za-z0-9/_-]+)"),
        "hooks.slack.com",
        1,
    ),
    _Shape(
        "discord_webhook",
        re.compile(r"discord(?:app)?\.com/api/webhooks/([0-9]+/[A-Za-z0-9_-]+)"),
        "/api/webhooks/",
        1,
        boundary=False,
    ),
    _Shape(
        "user_password",
        re.compile(r"(?<![^\s\"'])(?:-u|--user)[ =][\"']?[^\s:\"']+:([^\s\"']+)"),
        "-u",
        1,
        boundary=False,
    ),
    _Shape("google_api_key", re.compile(rf"AIza{_B64URL}{{35}}"), "AIza"),
    _Shape("huggingface_token", re.compile(r"hf_[A-Za-z0-9]{30,}"), "hf_"),
    _Shape("npm_token", re.compile(r"npm_[A-Za-z0-9]{36}"), "npm_"),
    _Shape("webhook_secret", re.compile(r"whsec_[A-Za-z0-9+/=]{16,}"), "whsec_"),
    _Shape(
        "url_password",
        # Greedy up to the last ``@`` of the authority: a raw ``@`` may sit in the password.
        re.compile(r"://[^/\s:@\"'<>]*:([^/\s\"'<>]+)@"),
        "://",
        1,
        boundary=False,
    ),
    _Shape(
        "url_token",
        re.compile(r"://([A-Za-z0-9_.~-]{20,})@"),
        "://",
        1,
        boundary=False,
    ),
)


def _continues_word(text: str, start: int) -> bool:
    if start == 0:
        return False
    before = text[start - 1]
    return before.isalnum() or before == "_"


# The shapes as plain tuples in two tables, by the text their gate is looked
# for in: one loop with tuple unpacking costs far less than attribute reads
# on every shape of every string.
_Row = tuple[str, Callable[[str], Iterator[re.Match[str]]], int, bool, str]
_BY_TEXT: Final[tuple[_Row, ...]] = tuple(
    (shape.gate, shape.regex.finditer, shape.group, shape.boundary, shape.kind)
    for shape in _SHAPES
    if not shape.lowered
)
_BY_LOWERED: Final[tuple[_Row, ...]] = tuple(
    (shape.gate, shape.regex.finditer, shape.group, shape.boundary, shape.kind)
    for shape in _SHAPES
    if shape.lowered
)


# Every gate, by the text it is looked for in: a text holding none of them
# has no shape in it at all.
GATES: Final = frozenset(row[0] for row in _BY_TEXT)
LOWERED_GATES: Final = frozenset(row[0] for row in _BY_LOWERED)


def shape_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """Append ``(start, end, kind)`` for every shape found; ``lowered`` is ``text`` lowercased."""
    for table, haystack in ((_BY_TEXT, text), (_BY_LOWERED, lowered)):
        for gate, finditer, group, boundary, kind in table:
            if gate not in haystack:
                continue
            for match in finditer(text):
                if boundary and _continues_word(text, match.start()):
                    continue
                start, end = match.span(group)
                spans.append((start, end, kind))
