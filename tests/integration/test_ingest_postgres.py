"""The ingest follower on a PostgreSQL ledger, beside a foreign writer process.

Skipped without ``PENTRACE_TEST_DATABASE_URL``; each test uses its own table
prefix, dropped at the end.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import select

from pentrace.infrastructure.ingest import Follower
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.ingest_harness import SESSION, WRITER, FollowerProcess, shard, wait_until
from tests.support import NEEDS_POSTGRES, POSTGRES_URL, postgres_tables

URL = POSTGRES_URL

pytestmark = NEEDS_POSTGRES


@pytest.fixture
def prefix() -> Iterator[str]:
    with postgres_tables("ingest") as name:
        yield name


def open_pg(prefix: str) -> RuntimeEventLedger:
    assert URL is not None
    return RuntimeEventLedger(
        LedgerDatabase(URL, table_prefix=prefix), LedgerSettings().with_limits_off()
    )


def positions(ledger: RuntimeEventLedger) -> list[int]:
    events = ledger.db.tables.events
    with ledger.db.reading("test read") as conn:
        rows = conn.execute(
            select(events.c.sequence)
            .where(ledger.db.session_column() == SESSION)
            .order_by(events.c.notification_id)
        ).all()
    return [row[0] for row in rows]


def test_a_foreign_writers_records_land_in_postgres_once_across_a_restart(
    tmp_path: Path, prefix: str
) -> None:
    root = tmp_path / "data"
    path = shard(root)
    first = subprocess.run(
        [sys.executable, str(WRITER), str(path), "1", "40"], check=True, capture_output=True
    )
    assert first.returncode == 0
    with closing(open_pg(prefix)) as ledger:
        assert Follower(ledger, DataRoot(root)).scan() == 40
    subprocess.run(
        [sys.executable, str(WRITER), str(path), "41", "10"], check=True, capture_output=True
    )
    with closing(open_pg(prefix)) as again:
        follower = Follower(again, DataRoot(root))
        assert follower.scan() == 10
        assert follower.stats.already_held == 0
        assert positions(again) == list(range(1, 51))
        assert len(follower.cursors.load()) == 1


def test_a_follower_process_killed_mid_stream_resumes_from_its_cursor_exactly_once(
    tmp_path: Path, prefix: str
) -> None:
    assert URL is not None
    root = tmp_path / "data"
    total = 1500
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(shard(root)), "1", str(total), "0.001"],
        stdout=subprocess.DEVNULL,
    )
    env = {"PENTRACE_LEDGER_URL": URL, "PENTRACE_LEDGER_TABLE_PREFIX": prefix}
    reader = open_pg(prefix)
    follower = FollowerProcess(root, tmp_path / "unused.db", env=env)
    try:
        wait_until(lambda: len(positions(reader)) >= 50, "the first records")
        assert follower.kill() == -signal.SIGKILL
        follower = FollowerProcess(root, tmp_path / "unused.db", env=env)
        assert child.wait(timeout=120) == 0
        wait_until(lambda: len(positions(reader)) >= total, "every record after the restart")
        code, err = follower.stop()
        assert code == 0, err
        assert positions(reader) == list(range(1, total + 1))
    finally:
        child.kill()
        child.wait()
        follower.close()
        reader.close()
    assert not (tmp_path / "unused.db").exists()
