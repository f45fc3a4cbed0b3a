"""The stores the analytics tests run against, behind one fixture.

``env`` is parametrised: the environment (variables) that points the analytics
runner, ``pentrace stats`` and the viewer at

* ``sqlite``: a read-model database under the test's ``tmp_path`` (the ledger
  is the data root's own), always run;
* ``postgres``: the ledger and the read models on ``PENTRACE_TEST_DATABASE_URL``
  (skipped without it), in a fresh schema and with a table prefix of the same
  name, both dropped afterwards.

A test takes it by name (``tests/integration/conftest.py``); a module that
must run on PostgreSQL only marks itself ``postgres`` and skips without a server.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psycopg
import pytest

from tests.support import NO_POSTGRES, POSTGRES_URL

__all__ = ["env"]

_LEDGER_TABLES: Final = (
    "runtime_events",
    "runtime_event_watermarks",
    "runtime_event_tracking",
    "runtime_event_meta",
    "runtime_event_dictionaries",
    "ingest_cursors",
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    if request.param == "sqlite":
        yield {"PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'analytics.db'}"}
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    schema = f"analytics_{uuid.uuid4().hex[:10]}"
    plain = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield {
            "PENTRACE_LEDGER_URL": POSTGRES_URL,
            "PENTRACE_LEDGER_TABLE_PREFIX": f"{schema}_",
            "PENTRACE_ANALYTICS_URL": f"{POSTGRES_URL}?options=-csearch_path%3D{schema}",
        }
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
            for table in _LEDGER_TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {schema}_{table} CASCADE")
