"""The read model's transaction: merged upserts, reads of its own writes, one commit with the
tracking position, rollback of everything, and refusing a second runner's position."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventsourcing.persistence import Tracking
from sqlalchemy import text

from pentrace.errors import AnalyticsError, ConfigError
from pentrace.infrastructure.analytics.database import AnalyticsDatabase
from pentrace.infrastructure.analytics.readmodel import ReadModel

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS t "
    "(k VARCHAR(10) PRIMARY KEY, n BIGINT, s TEXT, lo BIGINT, hi BIGINT)"
)


@pytest.fixture
def model(tmp_path: Path) -> ReadModel:
    db = AnalyticsDatabase(f"sqlite:///{tmp_path / 'a.db'}")
    with db.writing("schema") as conn:
        conn.exec_driver_sql(SCHEMA)
    return ReadModel(db, "p")


def rows(model: ReadModel) -> list[tuple[object, ...]]:
    with model.db.reading("rows") as conn:
        return [tuple(r) for r in conn.execute(text("SELECT k, n, s, lo, hi FROM t ORDER BY k"))]


def test_upserts_merge_and_commit_with_the_tracking_position(model: ReadModel) -> None:
    tx = model.transaction()
    tx.add("t", {"k": "a"}, n=2)
    tx.add("t", {"k": "a"}, n=3)
    tx.put("t", {"k": "a"}, s="x")
    tx.least("t", {"k": "a"}, lo=5)
    tx.least("t", {"k": "a"}, lo=4, hi=None)
    tx.greatest("t", {"k": "a"}, hi=1)
    model.advance(Tracking("ledger", 7))
    assert rows(model) == []  # nothing visible before the commit
    assert model.commit() == 1
    assert rows(model) == [("a", 5, "x", 4, 1)]
    assert model.max_tracking_id("anything") == 7
    tx = model.transaction()
    tx.add("t", {"k": "a"}, n=1)
    tx.least("t", {"k": "a"}, lo=9)
    tx.greatest("t", {"k": "a"}, hi=3)
    assert tx.get("t", {"k": "a"}) == {"k": "a", "n": 6, "s": "x", "lo": 4, "hi": 3}
    model.advance(Tracking("ledger", 9))
    model.commit()
    assert rows(model) == [("a", 6, "x", 4, 3)]


def test_a_rollback_drops_the_writes_and_keeps_the_position(model: ReadModel) -> None:
    model.transaction().add("t", {"k": "b"}, n=1)
    model.advance(Tracking("ledger", 3))
    model.commit()
    tx = model.transaction()
    tx.add("t", {"k": "b"}, n=100)
    tx.execute("INSERT INTO t (k, n) VALUES (:k, :n)", {"k": "c", "n": 1})
    model.advance(Tracking("ledger", 4))
    model.rollback()
    assert rows(model) == [("b", 1, None, None, None)]
    assert model.max_tracking_id("ledger") == 3


def test_a_second_writer_that_moved_the_position_makes_the_commit_fail(model: ReadModel) -> None:
    model.transaction().add("t", {"k": "a"}, n=1)
    model.advance(Tracking("ledger", 2))
    other = ReadModel(model.db, "p")
    other.insert_tracking(Tracking("ledger", 5))
    with pytest.raises(AnalyticsError, match=r"expected tracking position 0, found 5"):
        model.commit()
    model.rollback()
    assert rows(model) == []
    with pytest.raises(AnalyticsError, match=r"expected a position above 5, found 4"):
        other.insert_tracking(Tracking("ledger", 4))


def test_an_in_memory_sqlite_url_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs a file path"):
        AnalyticsDatabase("sqlite:///:memory:")
