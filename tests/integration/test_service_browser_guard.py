"""DNS rebinding in a real browser: Chromium resolves ``attacker.example`` to 127.0.0.1
(``--host-resolver-rules``, the same thing a rebinding DNS server does) and loads the
service under that name; the service refuses it.  Opt-in like every browser test."""

from __future__ import annotations

from pathlib import Path

from tests.integration.browser import NEEDS_BROWSER, chromium
from tests.integration.sse_harness import Server, session_id, write_session

pytestmark = NEEDS_BROWSER


def test_a_rebound_name_gets_421_and_the_loopback_name_still_works(tmp_path: Path) -> None:
    sid = session_id(0xE1)
    write_session(tmp_path, sid, 1)
    server = Server(tmp_path, args=["--test-page"]).start()
    rules = "--host-resolver-rules=MAP attacker.example 127.0.0.1"
    trace = f"/api/v1/sessions/{sid}/trace"
    try:
        with chromium([rules]) as browser:
            page = browser.new_page()
            rebound = page.goto(f"http://attacker.example:{server.port}{trace}")
            assert rebound is not None
            assert rebound.status == 421
            assert "session_meta" not in page.content()
            assert "attacker.example" in page.content()  # the body names the refused Host
            own = page.goto(f"http://localhost:{server.port}/_test/sse.html?session_id={sid}")
            assert own is not None
            assert own.status == 200
            # The page's script is a same-origin asset, so it runs under the page's CSP.
            page.wait_for_function("() => window.pentrace.control.length >= 1", timeout=20_000)
    finally:
        server.stop()
    assert f'"GET {trace} HTTP/1.1" 421' in server.output()  # it reached this server
