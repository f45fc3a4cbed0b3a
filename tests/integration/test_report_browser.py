"""pentrace report: one self-contained HTML page, rendered offline in headless Chromium.

Opt-in (``PENTRACE_BROWSER_TESTS=1``).  Every request other than the file
itself is blocked and recorded; the test asserts none was attempted.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from tests.integration.browser import chromium, needs_browser
from tests.support import demo_report


def test_the_report_is_one_file_with_no_external_reference(tmp_path: Path) -> None:
    page = demo_report(tmp_path).read_text(encoding="utf-8")
    for reference in ("http://", "https://", "src=", "@import", "url("):
        assert reference not in page
    # The only links are to rows of the page itself (a click on a bar jumps to its row).
    links = re.findall(r'href="([^"]*)"', page)
    assert links
    assert all(re.fullmatch(r"#row-\d+", link) for link in links)
    assert page.count("<svg") == 2
    assert 'class="compaction completed"' in page
    assert 'class="tool failures"' in page


def test_the_report_runs_no_script_and_its_csp_allows_only_its_own_style(tmp_path: Path) -> None:
    page = demo_report(tmp_path).read_text(encoding="utf-8")
    assert "<script" not in page
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert "unsafe-inline" not in policy.group(1)
    assert "script-src" not in policy.group(1)  # default-src 'none' forbids scripts
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert style is not None
    digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in policy.group(1)


def test_the_timeline_has_a_time_axis_and_a_legend(tmp_path: Path) -> None:
    page = demo_report(tmp_path).read_text(encoding="utf-8")
    timeline = page[page.index('<svg id="timeline"') : page.index("</svg>")]
    # The demo starts at 09:00:00.35 UTC and runs ~20 s: ticks every 5 s, the day named.
    ticks = re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', timeline)
    assert ticks[:3] == ["09:00:05", "09:00:10", "09:00:15"]
    assert "UTC, 2026-11-28" in timeline
    for label in ("request or tool call completed", "failed, timed out or malformed",
                  "compaction", "approval: allow", "approval: deny"):  # fmt: skip
        assert f">{label}</text>" in timeline


@needs_browser
def test_the_report_renders_offline_in_headless_chromium(tmp_path: Path) -> None:
    out = demo_report(tmp_path)
    attempted: list[str] = []

    def block(route: object) -> None:
        request = route.request  # type: ignore[attr-defined]
        if request.url == out.as_uri():
            route.continue_()  # type: ignore[attr-defined]
        else:
            attempted.append(request.url)
            route.abort()  # type: ignore[attr-defined]

    with chromium() as browser:
        page = browser.new_page()
        page.route("**/*", block)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        console: list[str] = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(out.as_uri())
        page.wait_for_selector("#spans")
        rows = page.locator("#spans tbody tr").count()
        assert rows == 5 + 6  # the demo's main session: 5 requests, 6 tool calls
        timeline = page.locator("#timeline").bounding_box()
        assert timeline is not None
        assert timeline["width"] > 500
        assert page.locator("#timeline rect.compaction").count() == 1
        assert page.locator("#tokens rect.bar").count() == 5
        page.locator('#timeline rect[data-row="8"]').click()
        assert page.locator("tr:target").get_attribute("id") == "row-8"
        assert page.evaluate(
            "getComputedStyle(document.querySelector('tr:target')).backgroundColor"
        )
        assert page.locator("#timeline line.axis").count() > 3  # the styled axis is drawn
        assert errors == []
        assert not [m for m in console if "Content Security Policy" in m]
    assert attempted == []
