"""The Python examples in docs/sessions.md run as written."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "sessions.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_sessions_page_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_each_example_on_the_sessions_page_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' temp folders
    exec(compile(BLOCKS[index], f"{DOC}:block{index}", "exec"), {"__name__": "docs"})  # noqa: S102  # running our own docs is the test
    capsys.readouterr()
