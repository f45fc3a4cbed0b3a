"""The Usage page in real headless Chromium: "last hour" shows minute buckets and "last 24
hours" hour buckets, chosen through the form, at 1400 and 390 px (screenshots under
build/screenshots/), with break marks and hover values, and nothing wider than the window."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.browser import NEEDS_BROWSER, assert_fits
from tests.integration.sse_harness import Server
from tests.integration.usage_corpus import REVIEWER, build_recent_corpus
from tests.integration.web_browser import WIDTHS, screenshot
from tests.support import sync_ledger

pytestmark = NEEDS_BROWSER


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("usage") / "data"
    build_recent_corpus(root, datetime.now(UTC))
    sync_ledger(root, {})
    running = Server(root).start()
    yield running
    running.stop()


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_last_hour_shows_minute_buckets_and_last_24_hours_hour_buckets(
    server: Server, browser: Any, width: int, height: int
) -> None:
    context = browser.new_context(viewport={"width": width, "height": height})
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(server.url + "/web/usage")
        for preset, size, width_of_key in (("1h", "minute", 16), ("24h", "hour", 13)):
            page.select_option("select[name=range]", preset)
            page.click("form.filters button[type=submit]")
            page.wait_for_url(f"**range={preset}**")
            axis = page.locator("p.axis")
            assert axis.get_attribute("data-size") == size
            assert axis.get_attribute("data-buckets") == ("60" if size == "minute" else "24")
            buckets = page.locator("table.buckets tbody tr")
            keys = [buckets.nth(n).get_attribute("data-bucket") for n in range(buckets.count())]
            assert len(keys) >= 3
            assert all(key is not None and len(key) == width_of_key for key in keys)
            assert page.locator("figure.chart svg").count() == 5
            # Hovering a bar names its bucket, series and value; the reviewer is one series.
            titles = (
                page.locator("figure.chart")
                .first.locator("rect title")
                .evaluate_all("titles => titles.map(t => t.textContent)")
            )
            assert any(REVIEWER[1] in title for title in titles)
            if size == "minute":  # 40 minutes back and the last minutes: skipped ones between
                assert page.locator("figure.chart").first.locator("g.break").count() >= 1
            screenshot(page, f"usage-{preset}", width)
            assert_fits(page, f"usage {preset}")
    finally:
        context.close()
    assert errors == []


def test_a_custom_range_picked_to_the_minute_gets_minute_buckets(
    server: Server, browser: Any
) -> None:
    context = browser.new_context(viewport={"width": WIDTHS[0][0], "height": WIDTHS[0][1]})
    page = context.new_page()
    try:
        page.goto(server.url + "/web/usage")
        assert page.locator("input[name=since]").is_hidden()  # only for a custom range
        page.select_option("select[name=range]", "custom")
        now = datetime.now(UTC)
        start, end = now - timedelta(minutes=45), now + timedelta(minutes=1)
        page.fill("input[name=since]", f"{start:%Y-%m-%dT%H:%M}")
        page.fill("input[name=until]", f"{end:%Y-%m-%dT%H:%M}")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**range=custom**")
        axis = page.locator("p.axis")
        assert axis.get_attribute("data-size") == "minute"
        assert axis.get_attribute("data-since") == f"{start:%Y-%m-%dT%H:%M}"
        assert page.locator("table.buckets tbody tr").count() >= 3
        # An end before the start is explained, and the picked values stay in the form.
        page.fill("input[name=until]", f"{start - timedelta(minutes=5):%Y-%m-%dT%H:%M}")
        page.click("form.filters button[type=submit]")
        page.wait_for_load_state()
        assert "expected the end after the start" in page.locator("[data-refused]").inner_text()
        assert page.input_value("input[name=since]") == f"{start:%Y-%m-%dT%H:%M}"
        screenshot(page, "usage-custom-refused", WIDTHS[0][0])
    finally:
        context.close()
