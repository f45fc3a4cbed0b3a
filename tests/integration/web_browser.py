"""What the viewer's browser tests share: a served corpus, screenshots, and axe-core.

axe-core (MPL-2.0) is not vendored: :func:`axe_script` installs the pinned npm package
into ``build/axe`` once (``npm install``), and the accessibility test is skipped with the
reason when npm cannot fetch it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest

from tests.integration.sse_harness import REPO

AXE_VERSION: Final = "4.14.1"
AXE_DIR: Final = REPO / "build" / "axe"
SCREENSHOTS: Final = REPO / "build" / "screenshots"
WIDTHS: Final = ((1400, 900), (390, 844))


def axe_script() -> Path:
    """The path of ``axe.min.js``, installing the pinned package into ``build/axe`` first."""
    script = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if script.exists():
        return script
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("the accessibility check needs npm to fetch axe-core")
    AXE_DIR.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-save", "--no-audit", "--no-fund", f"axe-core@{AXE_VERSION}"],
        cwd=AXE_DIR,
        capture_output=True,
        timeout=180,
        check=False,
    )
    if done.returncode != 0 or not script.exists():
        pytest.skip(
            f"npm could not install axe-core: {done.stderr.decode(errors='replace')[-300:]}"
        )
    return script


def serious_violations(page: Any, script: Path) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on ``page`` (a context with CSP bypassed)."""
    page.add_script_tag(path=str(script))
    result = page.evaluate("async () => await axe.run(document)")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def logged_in(browser: Any, url: str, token: str, **options: Any) -> Any:
    """A new browser context that logged in at ``url/web/login`` with ``token`` (the cookie)."""
    context = browser.new_context(**options)
    page = context.new_page()
    page.goto(url + "/web/traces")  # a viewer page sends a browser without the cookie to log in
    page.wait_for_url("**/web/login")
    page.fill("input[name=token]", token)
    page.click("form button[type=submit]")
    page.wait_for_url("**/web/traces")
    page.close()
    return context


def screenshot(page: Any, name: str, width: int) -> Path:
    """Save a full-page screenshot as ``build/screenshots/<name>-<width>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
