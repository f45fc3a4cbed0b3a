"""Every page of the viewer, and the report, at 390 and 1400 px in real Chromium: none is wider
than the window (no element sticks out; #31), every chart fits its box with its newest bucket
on screen, tables read as cards on a phone, rounds of a session fold and unfold, and the
controls a browser without the token cannot use show disabled.  Screenshots go to
build/screenshots/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.eventstore.application import SessionApplication
from tests.integration.browser import NEEDS_BROWSER, assert_fits
from tests.integration.sse_harness import Server
from tests.integration.web_browser import WIDTHS, logged_in, screenshot
from tests.integration.web_corpus import build_web_corpus
from tests.support import cli_ok, demo_report

pytestmark = NEEDS_BROWSER

TOKEN = "tok-Wid7nQ2wE9rT4yU6iO1pA3sD5"

# Each chart's SVG inside its figure, and the text under its last column inside the window.
_CHARTS_FIT = """() => Array.from(document.querySelectorAll("figure.chart")).flatMap((figure) => {
  const svg = figure.querySelector("svg");
  if (!svg) { return []; }
  const box = svg.getBoundingClientRect(), outer = figure.getBoundingClientRect();
  const ticks = Array.from(svg.querySelectorAll("text.tick[text-anchor=middle]"))
    .filter((t) => getComputedStyle(t).display !== "none");
  const last = ticks.length ? ticks[ticks.length - 1].getBoundingClientRect() : box;
  const wrong = [];
  if (box.right > outer.right + 1 || box.left < outer.left - 1) { wrong.push("svg past figure"); }
  if (last.right > window.innerWidth + 1) { wrong.push("newest bucket off screen"); }
  if (box.width < 200) { wrong.push("svg only " + box.width + "px"); }
  return wrong.map((w) => figure.querySelector("figcaption").textContent + ": " + w);
})"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server, str, Path]]:
    data = tmp_path_factory.mktemp("widths") / "data"
    root, main, _other = build_web_corpus(data)
    # Long names must wrap in their cells, never push the export column off the page.
    with SessionApplication(root, "p" * 60, "agent-" + "x" * 90) as application:
        handle = application.start_session(
            provider="a-provider-with-a-long-name",
            model_id="m" * 80,
            model_context_window=1000,
            system_prompt="s",
        )
        handle.record_user_input("hi")
        handle.save()
    cli_ok(data, "ledger", "sync")
    report = data.parent / "report.html"
    cli_ok(data, "report", main, "-o", str(report))
    guarded = Server(data, env={"PENTRACE_API_TOKEN": TOKEN}).start(token=TOKEN)
    plain = Server(data).start()
    yield guarded, plain, main, report
    guarded.stop()
    plain.stop()


def _paths(main: str) -> dict[str, str]:
    session = f"/web/sessions/demo_project/demo_agent/{main}"
    return {
        "traces": "/web/traces",
        "traces search": "/web/traces?q=zebrafish",
        "traces past the last page": "/web/traces?page=9",
        "session": session,
        "session from 30": session + "?from=30",
        "usage all time": "/web/usage?range=all",
        "usage 30 days": "/web/usage?range=30d",
        "usage 24 hours": "/web/usage?range=24h",
        "usage refused range": "/web/usage?range=custom&since=2026-11-02&until=2026-11-01",
        "login": "/web/login",
    }


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_no_page_is_wider_than_the_window_and_every_chart_fits(
    served: tuple[Server, Server, str, Path], browser: Any, width: int, height: int
) -> None:
    guarded, plain, main, report = served
    viewport = {"width": width, "height": height}
    context = logged_in(browser, guarded.url, TOKEN, viewport=viewport)
    page = context.new_page()
    try:
        for name, path in _paths(main).items():
            page.goto(guarded.url + path)
            assert_fits(page, name)
            assert page.evaluate(_CHARTS_FIT) == [], name
        page.goto(guarded.url + "/web/usage?range=all")
        if width < 700:  # the bucket table reads as cards, each figure named
            page.click("details.buckets summary")
            cell = page.locator("table.buckets tbody td").first
            label = cell.evaluate("(td) => getComputedStyle(td, '::before').content")
            assert label == '"requests"'
        page.goto(f"{guarded.url}/web/sessions/demo_project/demo_agent/{main}")
        screenshot(page, "session-chart", width)
    finally:
        context.close()
    anonymous = browser.new_context(viewport=viewport)
    page = anonymous.new_page()
    try:
        page.goto(plain.url + "/web/traces")
        assert_fits(page, "traces without the token")
        assert page.locator("table.sessions .exports span.disabled").count() == 2 * 4
        exports = page.locator("table.sessions td.exports").first.bounding_box()
        assert exports is not None
        assert exports["x"] + exports["width"] <= width  # beside long names, still on screen
        assert page.locator("details.import button[type=submit]").is_disabled()
        screenshot(page, "traces-no-token", width)
        page.goto(report.as_uri())
        assert_fits(page, "the report")
        assert page.evaluate(_CHARTS_FIT) == []
        timeline = page.locator("#timeline").bounding_box()
        assert timeline is not None
        assert timeline["x"] + timeline["width"] <= width
        screenshot(page, "report", width)
    finally:
        anonymous.close()


def test_the_rounds_of_a_session_fold_and_unfold(
    served: tuple[Server, Server, str, Path], browser: Any
) -> None:
    guarded, _plain, main, _report = served
    context = logged_in(browser, guarded.url, TOKEN)
    page = context.new_page()
    try:
        page.goto(f"{guarded.url}/web/sessions/demo_project/demo_agent/{main}")
        in_rounds = page.locator("#records div.item[data-in-round]")
        outside = page.locator("#records div.item:not([data-in-round])")
        total = in_rounds.count()
        assert total > 5
        page.click("[data-collapse-all]")
        assert page.locator("#records div.item[data-in-round]:visible").count() == 0
        assert outside.first.is_visible()  # records outside any round stay
        assert page.locator("#records h3.round:visible").count() == 5  # the outline remains
        page.locator('#records h3.round[data-round="3"] button').click()
        shown = page.locator("#records div.item[data-in-round]:visible")
        assert shown.count() == page.locator('#records div.item[data-in-round="3"]').count()
        toggle = page.locator('#records h3.round[data-round="3"] button')
        assert toggle.get_attribute("aria-expanded") == "true"
        # j moves only over what is shown.
        page.locator('#records div.item[data-in-round="3"]').first.focus()
        page.keyboard.press("j")
        focused = page.evaluate("document.activeElement.offsetParent !== null")
        assert focused
        page.click("[data-expand-all]")
        assert page.locator("#records div.item[data-in-round]:visible").count() == total
    finally:
        context.close()


def test_the_report_of_a_long_run_fits_a_phone(tmp_path: Path, browser: Any) -> None:
    """The demo at 390 px: the timeline, the tokens chart and the table of spans fit."""
    out = demo_report(tmp_path)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(out.as_uri())
        assert_fits(page, "the report")
        rows = page.locator("#spans tbody tr")
        assert rows.count() == 11
        status = rows.nth(0).locator("td").nth(3)
        assert status.evaluate("(td) => getComputedStyle(td, '::before').content") == '"status"'
        assert "aborts" not in page.locator("#spans").inner_text()
    finally:
        context.close()
