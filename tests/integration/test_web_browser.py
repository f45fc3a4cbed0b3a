"""The viewer in real headless Chromium: every page's key elements at 1400 and 390 px (with
screenshots under build/screenshots/), filters and search, export downloads, import through
the form, keyboard navigation and an axe-core accessibility check."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.browser import NEEDS_BROWSER, assert_fits
from tests.integration.sse_harness import Server
from tests.integration.web_browser import (
    WIDTHS,
    axe_script,
    logged_in,
    screenshot,
    serious_violations,
)
from tests.integration.web_corpus import OTHER_PROJECT, build_web_corpus
from tests.support import cli_ok

pytestmark = NEEDS_BROWSER

TOKEN = "tok-Brw7nQ2wE9rT4yU6iO1pA3sD5"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, str, str]]:
    data = tmp_path_factory.mktemp("webb") / "data"
    _root, main, other = build_web_corpus(data)
    cli_ok(data, "ledger", "sync")
    server = Server(data, env={"PENTRACE_API_TOKEN": TOKEN}).start(token=TOKEN)
    yield server, data, main, other
    server.stop()


def _pages(main: str) -> dict[str, str]:
    return {
        "traces": "/web/traces",
        "session": f"/web/sessions/demo_project/demo_agent/{main}",
        "usage": "/web/usage?range=all",
    }


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_each_page_renders_its_key_elements_and_is_screenshotted(
    served: tuple[Server, Path, str, str], browser: Any, width: int, height: int
) -> None:
    server, _data, main, _other = served
    context = logged_in(browser, server.url, TOKEN, viewport={"width": width, "height": height})
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        urls = _pages(main)
        page.goto(server.url + urls["traces"])
        assert page.locator("table.sessions tbody tr").count() == 3
        screenshot(page, "traces", width)
        page.goto(server.url + urls["session"])
        assert page.locator("h3.round.dropped").count() >= 1
        assert page.locator("#tokens svg rect").count() >= 1
        page.wait_for_function("() => window.pentraceLive && window.pentraceLive.opens >= 1")
        screenshot(page, "session", width)
        page.goto(server.url + urls["usage"])
        assert page.locator("section.card").count() == 3
        assert page.locator("figure.chart svg").count() == 5
        screenshot(page, "usage", width)
        # Nothing is wider than the window (usable at 390 px): tables scroll in their box.
        for name, url in urls.items():
            page.goto(server.url + url)
            assert_fits(page, name)
    finally:
        context.close()
    assert errors == []


def test_filters_and_search_change_the_results(
    served: tuple[Server, Path, str, str], browser: Any
) -> None:
    server, _data, _main, other = served
    context = logged_in(browser, server.url, TOKEN)
    page = context.new_page()
    try:
        page.goto(server.url + "/web/traces")
        page.select_option("select[name=project]", OTHER_PROJECT)
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**project=web_shop**")
        rows = page.locator("table.sessions tbody tr")
        assert rows.count() == 1
        assert rows.first.get_attribute("data-session", timeout=5000).endswith(other)
        page.goto(server.url + "/web/traces")
        page.keyboard.press("/")
        page.keyboard.type("zebrafish")
        page.keyboard.press("Enter")
        page.wait_for_url("**q=zebrafish**")
        assert page.locator("ol.hits mark").first.inner_text() == "zebrafish"
        page.click("ol.hits a")
        page.wait_for_url(f"**{other}**")
        assert page.locator("div.item:target").count() == 1
        # Keyboard: j moves the focus along the records.
        page.keyboard.press("j")
        page.keyboard.press("j")
        focused = page.evaluate("document.activeElement.dataset.nav !== undefined")
        assert focused
    finally:
        context.close()


def test_export_downloads_byte_identical_jsonl_and_import_refuses_an_existing_id(
    served: tuple[Server, Path, str, str], browser: Any, tmp_path: Path
) -> None:
    server, data, main, _other = served
    shard = DataRoot(data).find_shards("demo_project", "demo_agent", main)[-1].path
    context = logged_in(browser, server.url, TOKEN, accept_downloads=True)
    page = context.new_page()
    try:
        page.goto(server.url + "/web/traces?agent=demo_agent")
        row = page.locator(f'tr[data-session="demo_project/demo_agent/{main}"]')
        with page.expect_download() as download:
            row.locator("a", has_text="jsonl").click()
        saved = tmp_path / "download.jsonl"
        download.value.save_as(saved)
        assert saved.read_bytes() == shard.read_bytes()
        upload = tmp_path / "trace.jsonl"
        upload.write_bytes(shard.read_bytes())
        outcomes = []
        for _ in range(2):
            page.goto(server.url + "/web/traces")
            page.click("details.import summary")
            page.fill("form[data-import] input[name=project]", "uploaded")
            page.fill("form[data-import] input[name=agent]", "browser")
            page.set_input_files("form[data-import] input[name=file]", str(upload))
            page.click("form[data-import] button")
            page.wait_for_selector("[data-import-result][data-status]")
            result = page.locator("[data-import-result]")
            outcomes.append((result.get_attribute("data-status"), result.inner_text()))
    finally:
        context.close()
    assert outcomes[0] == ("201", f"imported uploaded/browser/{main}")
    assert outcomes[1][0] == "400"
    assert outcomes[1][1].startswith(
        f"refused: cannot import trace.jsonl: session {main} already exists under uploaded/browser"
    )
    assert DataRoot(data).find_shards("uploaded", "browser", main)[0].path.read_bytes() == (
        shard.read_bytes()
    )


def test_no_page_has_serious_accessibility_violations(
    served: tuple[Server, Path, str, str], browser: Any
) -> None:
    script = axe_script()
    server, _data, main, _other = served
    found = {}
    for scheme in ("light", "dark"):
        context = logged_in(browser, server.url, TOKEN, bypass_csp=True, color_scheme=scheme)
        page = context.new_page()
        try:
            for name, url in _pages(main).items():
                page.goto(server.url + url)
                found[f"{name} ({scheme})"] = serious_violations(page, script)
                if scheme == "dark":
                    screenshot(page, f"{name}-dark", 1280)
        finally:
            context.close()
    assert found == {name: [] for name in found}
