"""A safe Markdown subset for message text: everything is escaped first, then a few forms are
drawn from the escaped text.

Blocks: fenced code (```), headings (``#`` to ``###``), bullet and numbered
lists, paragraphs.  Inline: ``code``, ``**bold**``, ``*emphasis*`` and links
``[text](https://...)`` whose target is ``http`` or ``https`` (anything else
stays text).  Raw HTML in the source is shown as text, never interpreted, and
no attribute but a checked ``href`` is ever written.  The tags are written by
:class:`~markupsafe.Markup` formats, which escape whatever is not marked safe; the
text is escaped once, first, and marked safe after.
"""

from __future__ import annotations

import html
import re
from typing import Final

from markupsafe import Markup

from pentrace.infrastructure.operations.stats import rendered

__all__ = ["render_markdown"]

_CODE: Final = re.compile(r"`([^`\n]+)`")
_BOLD: Final = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EM: Final = re.compile(r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![*\w])")
_LINK: Final = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s()]+)\)")
_HEADING: Final = re.compile(r"(#{1,3})\s+(.*)")
_BULLET: Final = re.compile(r"\s*[-*+]\s+(.*)")
_NUMBERED: Final = re.compile(r"\s*\d{1,9}[.)]\s+(.*)")


def _inline(escaped: str) -> str:
    """Inline forms over already-escaped text; code spans are kept out of the other rules."""
    pieces = _CODE.split(escaped)
    out: list[str] = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out.append(Markup("<code>{}</code>").format(rendered(piece)))
            continue
        piece = _LINK.sub(r'<a href="\2" rel="noreferrer noopener">\1</a>', piece)
        piece = _BOLD.sub(r"<strong>\1</strong>", piece)
        out.append(_EM.sub(r"<em>\1</em>", piece))
    return "".join(out)


def render_markdown(text: str) -> Markup:
    """``text`` as HTML (see the module docstring)."""
    out: list[Markup] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""
    code: list[str] | None = None

    def flush() -> None:
        nonlocal list_tag
        if paragraph:
            lines = Markup("<br>").join(rendered(_inline(line)) for line in paragraph)
            out.append(Markup("<p>{}</p>").format(lines))
            paragraph.clear()
        if items:
            body = Markup("").join(
                Markup("<li>{}</li>").format(rendered(_inline(item))) for item in items
            )
            out.append(Markup("<{0}>{1}</{0}>").format(list_tag, body))
            items.clear()
            list_tag = ""

    for raw in text.split("\n"):
        line = html.escape(raw, quote=True)
        if code is not None:
            if raw.strip().startswith("```"):
                out.append(_code(code))
                code = None
            else:
                code.append(line)
            continue
        if raw.strip().startswith("```"):
            flush()
            code = []
            continue
        if not raw.strip():
            flush()
            continue
        heading = _HEADING.fullmatch(line)
        bullet = _BULLET.fullmatch(line)
        numbered = _NUMBERED.fullmatch(line)
        if heading:
            flush()
            level = len(heading.group(1)) + 2  # the page owns h1 and h2
            out.append(
                Markup("<h{0}>{1}</h{0}>").format(level, rendered(_inline(heading.group(2))))
            )
        elif bullet or numbered:
            tag = "ul" if bullet else "ol"
            if paragraph or (items and list_tag != tag):
                flush()
            list_tag = tag
            items.append((bullet or numbered).group(1))  # type: ignore[union-attr]
        else:
            if items:
                flush()
            paragraph.append(line)
    if code is not None:  # an unclosed fence: still code
        out.append(_code(code))
    flush()
    return Markup("").join(out)


def _code(escaped_lines: list[str]) -> Markup:
    return Markup("<pre><code>{}</code></pre>").format(rendered("\n".join(escaped_lines)))
