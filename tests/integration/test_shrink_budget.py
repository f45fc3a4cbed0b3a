"""A failing Hypothesis property reports its example before pytest's per-test timeout.

Hypothesis caps shrinking at 300 s, as long as the suite's timeout, and a timeout that
fires while it shrinks is caught as one more failure: the run goes on and ends in an
ExceptionGroup, minutes later.  ``tests/conftest.py`` caps shrinking at a share of the
timeout (``tests.support.bound_shrinking``); this runs a real pytest on a property that
fails at once and is slow to shrink, with the suite's conftest hook and a short timeout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.slow

SLOW_TO_SHRINK = """
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import BOUNDED_PROPERTY


@settings(BOUNDED_PROPERTY, max_examples=2, derandomize=True, database=None)
@given(st.lists(st.integers(0, 10**9), min_size=30, max_size=30))
def test_slow_to_shrink(numbers):
    time.sleep(1.0)  # each example is slow, as a stateful machine over a data root is
    assert sum(numbers) < 1
"""


def test_a_failing_property_is_reported_shrunk_as_far_as_the_budget_allows(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_configure\n")
    (tmp_path / "test_slow.py").write_text(SLOW_TO_SHRINK)
    isolated = ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", "/dev/null"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *isolated, "--timeout=50", "test_slow.py"],
        capture_output=True,
        text=True,
        timeout=240,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "FAILED" in out
    assert "assert " in out  # the property's own assertion, with its (partly shrunk) example
    assert "Failing test case" in out or "Falsifying example" in out  # Hypothesis's words
    assert "@reproduce_failure" in out  # print_blob: the case can be replayed exactly
    assert "Timeout" not in out
    assert "ExceptionGroup" not in out
