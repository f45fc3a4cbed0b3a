"""What every viewer page shares: the templates, the page response, URLs, the token rule and
how a cost's flags read.

Pages are Jinja templates (``templates/``) with autoescaping: every value is
HTML-escaped (quotes too) unless it is markup already (a chart, rendered
Markdown); see :func:`~pentrace.infrastructure.analytics.charts.template_environment`.
No page holds inline script or style: the service's Content-Security-Policy
allows scripts and styles from this origin only (``service/edge/headers.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse

from pentrace.infrastructure.operations.stats import number, render_chart, template_environment
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.edge.errors import Forbidden

__all__ = [
    "PREFIX",
    "TEMPLATES",
    "cost_note",
    "need_token",
    "number",
    "page",
    "query_url",
    "raw_asked",
    "session_url",
]

PREFIX: Final = "/web"
TEMPLATES: Final = template_environment(Path(__file__).with_name("templates"))
# How to get the token (not a token).
LOGIN_HINT: Final = (
    "start the server with PENTRACE_API_TOKEN (or --token-file) and log in at /web/login "
    "(a script sends the header)"
)


def session_url(project: str, agent: str, session_id: str, suffix: str = "") -> str:
    """The Session page of ``project/agent/session_id`` (each part URL-quoted)."""
    parts = "/".join(quote(part, safe="") for part in (project, agent, session_id))
    return f"{PREFIX}/sessions/{parts}{suffix}"


def query_url(path: str, values: Mapping[str, object]) -> str:
    """``path`` with the non-empty ``values`` as its query string."""
    kept = {k: str(v) for k, v in values.items() if v not in (None, "", False)}
    return path + ("?" + urlencode(kept) if kept else "")


def cost_note(flags: Mapping[str, Any]) -> str:
    """Which models a cost priced by a fallback rate or left out (unpriced), in words; the
    flags are a session document's (``cost_fallback``, ``cost_unpriced``) or a ``stats cost``
    row's (``fallback``, ``unpriced``)."""
    parts = []
    for label, keys in (("fallback rate", ("cost_fallback", "fallback")),
                        ("unpriced", ("cost_unpriced", "unpriced"))):  # fmt: skip
        models = [model for key in keys for model in flags.get(key) or ()]
        if models:
            parts.append(f"{label}: {', '.join(models)}")
    return "; ".join(parts)


TEMPLATES.globals.update(
    prefix=PREFIX,
    session_url=session_url,
    query_url=query_url,
    chart=render_chart,
    cost_note=cost_note,
)


def page(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    title: str,
    active: str = "",
    status: int = 200,
) -> HTMLResponse:
    """A whole HTML document: ``template`` (which extends ``base.html``) with ``context``."""
    document = TEMPLATES.get_template(template).render(
        **context,
        title=title,
        active=active,
        logged_in=authenticated(request.scope),
    )
    # same-origin, not the service's no-referrer: under no-referrer a browser sends
    # "Origin: null" with the page's own form posts, which the Origin guard refuses (ADR 0031).
    return HTMLResponse(document, status_code=status, headers={"Referrer-Policy": "same-origin"})


def need_token(request: Request, what: str, instead: str) -> None:
    """Refuse (403) a request that did not carry the bearer token: ``what`` needs it;
    ``instead`` opens the hint with what the caller can have without it."""
    if not authenticated(request.scope):
        raise Forbidden(
            f"{what} needs the bearer token: expected a request with "
            "`Authorization: Bearer <token>`, found none",
            hint=f"{instead}, or {LOGIN_HINT}",
        )


def raw_asked(request: Request, what: str, instead: str) -> bool:
    """Whether ``?raw=1`` was given; refused (403, :func:`need_token`) without the token."""
    raw = bool(params.flag(request, "raw"))
    if raw:
        need_token(request, what, instead)
    return raw
