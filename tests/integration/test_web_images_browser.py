"""Images on the Session page in real headless Chromium: a PNG and a JPEG load (naturalWidth > 0)
under the strict policy, the one over the cap shows its placeholder, an image the server refuses
after all is replaced by its reason, the raw view says why it is not available, screenshots at
1400 and 390 px, and axe-core finds nothing serious in light or dark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.browser import NEEDS_BROWSER, assert_fits
from tests.integration.sse_harness import Server
from tests.integration.web_browser import WIDTHS, axe_script, screenshot, serious_violations
from tests.integration.web_image_corpus import (
    AGENT,
    CAP_MIB,
    PROJECT,
    ImageCorpus,
    build_image_corpus,
)

pytestmark = NEEDS_BROWSER

_LOADED = """(src) => {
  const image = document.querySelector(`img[src="${src}"]`);
  return image !== null && image.complete && image.naturalWidth > 0;
}"""


def _refused_after_loading(page: Any, corpus: ImageCorpus) -> Any:
    """Scroll the cut-off PNG into view (it loads lazily) and wait for its placeholder."""
    page.evaluate(
        '(src) => document.querySelector(`img[src="${src}"]`)?.scrollIntoView()',
        corpus.url("cut"),
    )
    refused = page.locator("[data-image-refused]", has_text="do not decode")
    refused.wait_for(timeout=10_000)
    return refused


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, ImageCorpus]]:
    corpus = build_image_corpus(tmp_path_factory.mktemp("webimgb") / "data")
    server = Server(corpus.root.path, args=["--image-max-mib", str(CAP_MIB)]).start()
    yield server, corpus
    server.stop()


def _page_url(server: Server, corpus: ImageCorpus) -> str:
    return f"{server.url}/web/sessions/{PROJECT}/{AGENT}/{corpus.session_id}"


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_png_and_jpeg_load_and_the_oversize_one_shows_its_placeholder(
    served: tuple[Server, ImageCorpus], browser: Any, width: int, height: int
) -> None:
    server, corpus = served
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    blocked: list[str] = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security" in m.text else None)
    try:
        page.goto(_page_url(server, corpus))
        sizes = {}
        for name in ("png", "jpeg", "webp", "file"):
            image = page.locator(f'img[src="{corpus.url(name)}"]')
            image.scroll_into_view_if_needed()
            page.wait_for_function(_LOADED, arg=corpus.url(name), timeout=10_000)
            sizes[name] = image.evaluate("(img) => [img.naturalWidth, img.naturalHeight]")
        assert sizes == {"png": [40, 30], "jpeg": [40, 30], "webp": [40, 30], "file": [40, 30]}
        oversize = page.locator("[data-image-refused]", has_text="image too large (0.2 MB)")
        assert oversize.count() == 1
        assert oversize.is_visible()
        # The cut-off PNG looked like one from its first bytes; the server refused it, and the
        # script put the server's reason in its place.
        assert _refused_after_loading(page, corpus).is_visible()
        assert page.locator(f'img[src="{corpus.url("cut")}"]').count() == 0
        assert page.locator("[data-raw-note]").is_visible()
        page.evaluate("window.scrollTo(0, 0)")
        screenshot(page, "session-images", width)
        assert_fits(page, "the page")
    finally:
        context.close()
    assert errors == []
    assert blocked == []  # nothing on the page needed more than img-src 'self'


def test_the_raw_view_says_why_the_verbatim_record_is_not_available(
    served: tuple[Server, ImageCorpus], browser: Any
) -> None:
    server, corpus = served
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(_page_url(server, corpus))
        item = page.locator(f"#p{corpus.at['png'][0]}")
        item.locator("button[data-raw]").click()
        item.locator("pre.rawrecord button[data-raw]", has_text="verbatim record").click()
        refusal = item.locator("pre.rawrecord[data-refused='403']")
        refusal.wait_for(timeout=10_000)
        assert "needs the bearer token" in refusal.inner_text()
    finally:
        context.close()


def test_the_images_page_has_no_serious_accessibility_violations(
    served: tuple[Server, ImageCorpus], browser: Any
) -> None:
    script = axe_script()
    server, corpus = served
    found = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(bypass_csp=True, color_scheme=scheme)
        page = context.new_page()
        try:
            page.goto(_page_url(server, corpus))
            _refused_after_loading(page, corpus)
            found[scheme] = serious_violations(page, script)
        finally:
            context.close()
    assert found == {"light": [], "dark": []}
