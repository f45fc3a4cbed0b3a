"""The README's library example runs as written, in a temporary data root, and leaves the
session it describes behind (the facade of ``pentrace/__init__.py``)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from pentrace.infrastructure.catalog.listing import list_sessions, short_id
from pentrace.infrastructure.storage.layout import DataRoot

README = Path(__file__).resolve().parents[2] / "README.md"


def _example() -> str:
    blocks: list[str] = re.findall(
        r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL
    )
    assert len(blocks) == 1, "the README has one Python example"
    return blocks[0]


def test_the_readme_example_records_resumes_and_queries_one_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.startswith(("PENTRACE_", "PENGUIN_")):
            monkeypatch.delenv(name)  # the example's own SQLite ledger, not a configured one
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(_example(), f"{README}:python", "exec"), namespace)  # noqa: S102  # our own docs
    printed = capsys.readouterr().out.splitlines()
    [data] = [path for path in tmp_path.glob("*/data")]
    [row] = list_sessions(DataRoot(data))
    assert printed[0].split() == [short_id(row.session_id), "deepseek/deepseek-v4-pro", "1", "30"]
    # The resumed session appended its input to the same shard: the replay shows it pending.
    assert row.summary.records == 8
    assert "'total': 30" in printed[2]
