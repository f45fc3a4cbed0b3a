"""A tiny page whose EventSource records every frame; served only with ``test_page=True``.

The browser test opens ``/_test/sse.html?<filters>``; the page loads
``/_test/sse.js`` (no inline script: the service's Content-Security-Policy
allows scripts from its own origin only), which connects to the SSE endpoint
with the same query and keeps, in ``window.pentrace``, each event's
``lastEventId`` and type, the control frames, and how many times the
connection (re)opened.  EventSource reconnects by itself and sends
``Last-Event-ID``; the page never does.
"""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

__all__ = ["test_page_routes"]

_PAGE: Final = """<!doctype html>
<html><head><meta charset="utf-8"><title>pentrace SSE test page</title>
<script src="/_test/sse.js"></script></head>
<body><pre id="log"></pre></body></html>
"""

_SCRIPT: Final = """"use strict";
window.pentrace = {events: [], control: [], opens: 0, errors: 0};
const source = new EventSource("/api/v1/events/sse" + window.location.search);
source.onopen = () => { window.pentrace.opens += 1; };
source.onerror = () => { window.pentrace.errors += 1; };
source.onmessage = (message) => {
  const data = JSON.parse(message.data);
  if (message.lastEventId && data.id === message.lastEventId) {
    window.pentrace.events.push(message.lastEventId);
  } else {
    window.pentrace.control.push(
      {type: data.type, lastEventId: message.lastEventId, properties: data.properties});
  }
  const log = document.getElementById("log");
  if (log) { log.textContent += data.type + "\\n"; }
};
"""


async def _page(request: Request) -> Response:
    """``GET /_test/sse.html``."""
    return HTMLResponse(_PAGE)


async def _script(request: Request) -> Response:
    """``GET /_test/sse.js``."""
    return Response(_SCRIPT, media_type="text/javascript")


test_page_routes: Final = [
    Route("/_test/sse.html", _page, methods=["GET"]),
    Route("/_test/sse.js", _script, methods=["GET"]),
]
