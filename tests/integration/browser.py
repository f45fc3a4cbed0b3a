"""Headless Debian Chromium for the browser tests, driven by playwright (never downloaded).

Browser tests are opt-in (``PENTRACE_BROWSER_TESTS=1``, which ``.ci/run``
sets once it has installed Debian's chromium); ``NEEDS_BROWSER`` (a module's
``pytestmark``) or ``@needs_browser`` skips them, with the reason, elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

_T = TypeVar("_T", bound=Callable[..., Any])

CHROMIUM = Path("/usr/bin/chromium")
# The flags this machine's Chromium needs to run headless, offline and quietly.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

NEEDS_BROWSER = [
    pytest.mark.browser,
    pytest.mark.skipif(
        os.environ.get("PENTRACE_BROWSER_TESTS") != "1",
        reason="browser tests are opt-in: set PENTRACE_BROWSER_TESTS=1 (.ci/run does)",
    ),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


def needs_browser(test: _T) -> _T:
    """Mark one test as a browser test (the marks of ``NEEDS_BROWSER``)."""
    for mark in reversed(NEEDS_BROWSER):
        test = mark(test)
    return test


@contextmanager
def chromium(extra_args: list[str] | None = None) -> Iterator[Any]:
    """A launched headless Chromium (a playwright ``Browser``), closed afterwards;
    ``extra_args`` are more command-line flags (``--host-resolver-rules=...``)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
    with sync_api.sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=[*ARGS, *(extra_args or [])]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (taken by name: ``tests/integration/conftest.py``)."""
    with chromium() as launched:
        yield launched


# Every element whose box ends right of the window, unless a box around it scrolls or clips
# (a long line of output in its <pre>): what sticks out of the page.
_STICKING_OUT = """() => {
  const width = document.documentElement.clientWidth;
  const found = [];
  for (const element of document.body.querySelectorAll("*")) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) { continue; }
    let held = false;
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== "visible") { held = true; break; }
    }
    if (!held) {
      const name = element.tagName.toLowerCase() + (element.id ? "#" + element.id : "");
      found.push(`${name} ends at ${Math.round(box.right)}px`);
    }
  }
  return found.slice(0, 8);
}"""


def assert_fits(page: Any, what: str) -> None:
    """Nothing on ``page`` is wider than its window (the viewer is usable at 390 px): the
    document does not scroll sideways and no element sticks out of it; only a box that
    scrolls by itself (a ``<pre>`` of long output) may hold something wider."""
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    width = page.evaluate("window.innerWidth")
    assert overflow <= 0, f"{what} is {overflow}px wider than {width}px"
    assert page.evaluate(_STICKING_OUT) == [], f"{what} has elements past {width}px"
