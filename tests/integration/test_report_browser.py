"""pentrace report: one self-contained HTML page, rendered offline in headless Chromium.

Opt-in (``PENTRACE_BROWSER_TESTS=1``).  Every request other than the file
itself is blocked and recorded; the test asserts none was attempted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.layout import DataRoot
from tests.integration.browser import chromium, needs_browser


def _report(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    main_id, _child = record_demo_session(DataRoot(root), datetime(2026, 11, 28, 9, tzinfo=UTC))
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        app, ["--data-root", str(root), "report", main_id[-8:], "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_the_report_is_one_file_with_no_external_reference(tmp_path: Path) -> None:
    page = _report(tmp_path).read_text(encoding="utf-8")
    for reference in ("http://", "https://", "src=", "href=", "@import", "url("):
        assert reference not in page
    assert page.count("<svg") == 2
    assert 'class="compaction completed"' in page
    assert 'class="tool failures"' in page


@needs_browser
def test_the_report_renders_offline_in_headless_chromium(tmp_path: Path) -> None:
    out = _report(tmp_path)
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
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-ready]")
        rows = int(page.get_attribute("body", "data-ready") or 0)
        assert rows == 5 + 6  # the demo's main session: 5 requests, 6 tool calls
        timeline = page.locator("#timeline").bounding_box()
        assert timeline is not None
        assert timeline["width"] > 500
        assert page.locator("#timeline rect.compaction").count() == 1
        assert page.locator("#tokens rect.bar").count() == 5
        page.locator('#timeline rect[data-row="8"]').click()
        assert page.locator("tr.hit").get_attribute("id") == "row-8"
        assert errors == []
    assert attempted == []
