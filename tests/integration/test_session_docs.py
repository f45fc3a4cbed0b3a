"""The Python examples in docs/sessions.md and docs/testing.md run as written."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = ("sessions.md", "testing.md")
BLOCKS = {
    page: re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.DOTALL)
    for page in PAGES
}


@pytest.mark.parametrize("page", PAGES)
def test_the_page_has_examples(page: str) -> None:
    assert len(BLOCKS[page]) >= 2


@pytest.mark.parametrize(
    ("page", "index"), [(page, index) for page in PAGES for index in range(len(BLOCKS[page]))]
)
def test_each_example_on_the_page_runs(
    page: str,
    index: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' temp folders
    code = compile(BLOCKS[page][index], f"{DOCS / page}:block{index}", "exec")
    exec(code, {"__name__": "docs"})  # noqa: S102  # running our own docs is the test
    capsys.readouterr()
