"""The page shell every viewer page shares: head, navigation, escaping, small formatters.

Every value that reaches HTML goes through :func:`esc`; pages are built as
lists of strings and joined once.  No page holds inline script or style: the
service's Content-Security-Policy allows scripts and styles from this origin
only (``service/edge/headers.py``).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import quote, urlencode

from starlette.responses import HTMLResponse

__all__ = ["PREFIX", "esc", "number", "page", "query_url", "session_url"]

PREFIX: Final = "/web"
_NAV: Final = (("traces", "Traces"), ("usage", "Usage"))


def esc(value: object) -> str:
    """``value`` as HTML text (quotes escaped too, so it is safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def number(value: object) -> str:
    """A count with thin grouping (``1 234 567``), or ``-`` when there is none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    if isinstance(value, float):
        return f"{value:,.4f}".replace(",", " ")
    return f"{value:,}".replace(",", " ")


def session_url(project: str, agent: str, session_id: str, suffix: str = "") -> str:
    """The Session page of ``project/agent/session_id`` (each part URL-quoted)."""
    parts = "/".join(quote(part, safe="") for part in (project, agent, session_id))
    return f"{PREFIX}/sessions/{parts}{suffix}"


def query_url(path: str, values: Mapping[str, object]) -> str:
    """``path`` with the non-empty ``values`` as its query string."""
    kept = {k: str(v) for k, v in values.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def page(title: str, active: str, body: Iterable[str], *, status: int = 200) -> HTMLResponse:
    """A whole HTML document around ``body``."""
    nav = "".join(
        f'<a href="{PREFIX}/{name}"'
        + (' aria-current="page"' if name == active else "")
        + f">{label}</a>"
        for name, label in _NAV
    )
    document = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)} - pentrace</title>",
        f'<link rel="stylesheet" href="{PREFIX}/static/web.css">',
        f'<link rel="icon" href="{PREFIX}/static/favicon.svg" type="image/svg+xml">',
        f'<script src="{PREFIX}/static/web.js" defer></script></head><body>',
        '<a class="skip" href="#main">Skip to content</a>',
        f'<header><span class="brand">pentrace</span><nav aria-label="pages">{nav}</nav>',
        f'<a class="login" href="{PREFIX}/login">token login</a>'
        '<span class="keys">keys: <kbd>/</kbd> search, <kbd>j</kbd>/<kbd>k</kbd> move, '
        "<kbd>Enter</kbd> open</span></header>",
        f'<main id="main"><h1>{esc(title)}</h1>',
        *body,
        "</main></body></html>",
    ]
    # same-origin, not the service's no-referrer: under no-referrer a browser sends
    # "Origin: null" with the page's own form posts, which the Origin guard refuses (ADR 0031).
    return HTMLResponse(
        "".join(document), status_code=status, headers={"Referrer-Policy": "same-origin"}
    )
