"""docs/projections.md is a tutorial whose ```python blocks run, in order, in an empty folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "projections.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

pytestmark = pytest.mark.slow


def test_the_projections_tutorial_runs_from_start_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = _BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 6, "write, run, kill/restart, rebuild and test steps"
    monkeypatch.chdir(tmp_path)
    for name in (
        "PENTRACE_ANALYTICS_URL",
        "PENTRACE_LEDGER_URL",
        "PENGUIN_RUNTIME_EVENT_LEDGER_URL",
        "PENGUIN_RUNTIME_EVENT_LEDGER_PATH",
        "PENTRACE_PRICES",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PENGUIN_HOME", str(tmp_path / "data"))
    namespace: dict[str, object] = {"__name__": "docs_projections"}
    for number, block in enumerate(blocks, start=1):
        code = compile(block, f"{DOC.name} block {number}", "exec")
        exec(code, namespace)  # noqa: S102 - the documentation's own examples
    assert (tmp_path / "data" / "analytics" / "analytics.db").exists()
    assert os.path.exists(tmp_path / "data" / "runtime_events" / "runtime_events.db")
