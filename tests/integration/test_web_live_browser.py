"""The Session page live in real Chromium: the live panel follows the session over SSE, and
across a server SIGKILL and restart it shows every event once (EventSource resends
Last-Event-ID by itself; the page never builds a cursor); records written after the page
loaded are appended to the list once, as a fresh load shows them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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

_ITEMS = "() => Array.from(document.querySelectorAll('#records div.item')).map((e) => e.id)"


@contextmanager
def _live_page(root: Path, sid: str) -> Iterator[tuple[Server, Any]]:
    """A server over a session of 10 records and a page following it live."""
    write_session(root, sid, 2)  # positions 1..10, there before the page opens
    server = Server(root).start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            page.goto(f"{server.url}/web/sessions/{PROJECT}/{AGENT}/{sid}")
            page.wait_for_function("() => window.pentraceLive && window.pentraceLive.opens >= 1")
            yield server, page
    finally:
        server.stop()


def test_the_live_panel_shows_every_event_once_across_a_server_kill(tmp_path: Path) -> None:
    sid = session_id(0xE17)
    with _live_page(tmp_path, sid) as (server, page):
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
    assert live["ids"] == event_ids(sid, 11, 58)
    assert shown == len(live["ids"])
    assert live["opens"] >= 2


def test_a_record_written_after_the_page_loaded_is_appended_once(tmp_path: Path) -> None:
    sid = session_id(0xE18)
    with _live_page(tmp_path, sid) as (_server, page):
        before = page.evaluate(_ITEMS)
        write_session(tmp_path, sid, 3)  # positions 11..22, by a separate writer
        page.wait_for_function("() => window.pentraceLive.ids.length >= 12", timeout=30_000)
        page.wait_for_function(
            "() => !window.pentraceLive.tail.busy"
            " && document.querySelector('#records').dataset.next === '23'",
            timeout=30_000,
        )
        page.wait_for_timeout(500)  # a late duplicate fetch would have landed by now
        live = page.evaluate(_ITEMS)
        appended = page.evaluate("window.pentraceLive.tail.appended")
        page.reload()
        fresh = page.evaluate(_ITEMS)
    assert "p9" in before  # even positions show inside others (outputs, usage)
    assert "p11" not in before
    assert "p21" in live
    assert len(live) == len(set(live))  # none twice
    assert live == fresh  # the same records, in the same order, as a reload shows
    assert appended == len(live) - len(before)
