"""The web trace viewer of ``pentrace serve``: Traces, Session and Usage pages (ADR 0030).

Server-rendered HTML from the library's own read functions (catalog, replay,
resume report, audit, search, session files, analytics queries), a stylesheet
and one small script served from :mod:`pentrace.service.web.static`; charts
are SVG drawn on the server.  Mount with ``routes.extend(web.routes)``.
"""

from __future__ import annotations

from pentrace.service.web.routes import routes

__all__ = ["routes"]
