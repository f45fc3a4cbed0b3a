"""A real browser: headless Chromium's own EventSource survives a server SIGKILL and restart.

Opt-in (``PENTRACE_BROWSER_TESTS=1``, which ``.ci/run`` sets when Debian's
chromium is installed); playwright only drives ``/usr/bin/chromium`` and never
downloads a browser.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.browser import NEEDS_BROWSER, chromium
from tests.integration.sse_harness import Server, event_ids, session_id, write_session

pytestmark = NEEDS_BROWSER


def test_the_browser_reconnects_with_last_event_id_and_sees_every_event_exactly_once(
    tmp_path: Path,
) -> None:
    sid = session_id(0xB0)
    server = Server(tmp_path, args=["--test-page"]).start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            # No cursor in the URL: the query would win over Last-Event-ID on every reconnect.
            page.goto(f"{server.url}/_test/sse.html?session_id={sid}")
            page.wait_for_function("() => window.pentrace.control.length >= 1", timeout=20_000)
            write_session(
                tmp_path, sid, 10
            )  # positions 1..42, live (another process than the server)
            page.wait_for_function("() => window.pentrace.events.length >= 42", timeout=30_000)
            server.kill()
            page.wait_for_function("() => window.pentrace.errors >= 1", timeout=20_000)
            # Written while the server is down: only the ledger has them.
            write_session(tmp_path, sid, 10)  # positions 43..82
            server.start()
            page.wait_for_function("() => window.pentrace.events.length >= 82", timeout=30_000)
            # One more live batch after the reconnect, then look for duplicates.
            write_session(tmp_path, sid, 2)  # positions 83..90
            page.wait_for_function("() => window.pentrace.events.length >= 90", timeout=30_000)
            page.wait_for_timeout(500)
            state = page.evaluate("window.pentrace")
    finally:
        server.stop()
    assert state["events"] == event_ids(sid, 1, 90)
    assert state["opens"] >= 2
    connected = [frame for frame in state["control"] if frame["type"] == "server.connected"]
    assert len(connected) == state["opens"]
    # The browser itself sent Last-Event-ID on the reconnect: the server echoes the cursor it got.
    assert connected[0]["properties"]["lastEventID"] is None
    assert connected[1]["properties"]["lastEventID"] == event_ids(sid, 42, 42)[0]
    assert "GET /api/v1/events/sse?session_id=" in server.output()
