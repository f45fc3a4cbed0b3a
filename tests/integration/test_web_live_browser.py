"""The Session page's live panel in real Chromium: it follows the session over SSE, and
across a server SIGKILL and restart it shows every event once (EventSource resends
Last-Event-ID by itself; the page never builds a cursor)."""

from __future__ import annotations

from pathlib import Path

from tests.integration.browser import NEEDS_BROWSER, chromium
from tests.integration.sse_harness import (
    AGENT,
    PROJECT,
    Server,
    event_ids,
    session_id,
    write_session,
)

pytestmark = NEEDS_BROWSER


def test_the_live_panel_shows_every_event_once_across_a_server_kill(tmp_path: Path) -> None:
    sid = session_id(0xE17)
    write_session(tmp_path, sid, 2)  # positions 1..10, there before the page opens
    server = Server(tmp_path).start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"{server.url}/web/sessions/{PROJECT}/{AGENT}/{sid}")
            page.wait_for_function("() => window.pentraceLive && window.pentraceLive.opens >= 1")
            write_session(tmp_path, sid, 5)  # positions 11..30, live
            page.wait_for_function("() => window.pentraceLive.ids.length >= 20", timeout=30_000)
            server.kill()
            page.wait_for_function("() => window.pentraceLive.errors >= 1", timeout=20_000)
            write_session(tmp_path, sid, 5)  # positions 31..50, while the server is down
            server.start()
            page.wait_for_function("() => window.pentraceLive.ids.length >= 40", timeout=30_000)
            write_session(tmp_path, sid, 2)  # positions 51..58, after the reconnect
            page.wait_for_function("() => window.pentraceLive.ids.length >= 48", timeout=30_000)
            page.wait_for_timeout(500)
            live = page.evaluate("window.pentraceLive")
            shown = page.locator("[data-live-events] li").count()
    finally:
        server.stop()
    assert live["ids"] == event_ids(sid, 11, 58)
    assert shown == len(live["ids"])
    assert live["opens"] >= 2
