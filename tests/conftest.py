"""Fixtures every pentrace test may use (plain helpers are in ``tests/support.py``).

``own_stores``
    Unsets every variable that points pentrace at a ledger, analytics database,
    data root or redaction policy outside the test (``tests.support.STORE_ENV``),
    so the test's own data root is the only store.  A whole module asks for it
    with ``pytestmark = pytest.mark.usefixtures("own_stores")``.
``postgres_url``
    The ``PENTRACE_TEST_DATABASE_URL`` server; the test is skipped without one.
    A module that needs it throughout sets ``pytestmark = NEEDS_POSTGRES``
    (from ``tests.support``) instead.
``sample_root``
    A data root (a ``Path`` below ``tmp_path``) holding one session, the
    seven-command ``tests.support.one_turn_session()``, as session
    ``tests.support.SAMPLE_ID`` of ``default_project``/``default_agent``.

``docs/testing.md`` ("Fixtures for pentrace's own tests") lists these with the
helpers of ``tests/support.py``.

Hypothesis shrinks a failure for at most :data:`tests.support.SHRINK_SHARE` of
the per-test timeout (pytest-timeout's, ``timeout`` in ``pyproject.toml``), so a
failing property reports its example, partly shrunk if need be, before the
timeout kills the test and hides it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace import testing as pt
from tests.support import (
    NO_POSTGRES,
    POSTGRES_URL,
    SAMPLE_ID,
    bound_shrinking,
    clear_store_env,
    one_turn_session,
)


def pytest_configure(config: pytest.Config) -> None:
    bound_shrinking(config)


@pytest.fixture
def own_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_store_env(monkeypatch)


@pytest.fixture
def postgres_url() -> str:
    if POSTGRES_URL is None:
        pytest.skip(NO_POSTGRES)
    return POSTGRES_URL


@pytest.fixture
def sample_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    pt.write_trace(root, one_turn_session(), session_id=SAMPLE_ID)
    return root
