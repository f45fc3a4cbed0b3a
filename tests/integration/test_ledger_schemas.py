"""PostgreSQL shared by several schemas, each holding a pentrace ledger (a schema per
environment or tenant): each ledger is opened, written and read as if it were alone.

A ledger lives in the first schema of its connection's ``search_path``, which the
URL sets with ``?options=-csearch_path%3Dname`` (docs/ledger.md); every catalog
lookup is scoped to it.  Before, opening a ledger read ``pg_indexes`` by index name
alone and failed with ``MultipleResultsFound`` once a second schema held a ledger.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from pentrace.domain.runtime import build_event
from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger import LedgerSettings, open_ledger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.testing.files import write_shards
from tests.integration.test_ledger_indexer import AGENT, PROJECT, trace_lines
from tests.support import NEEDS_POSTGRES, POSTGRES_URL, cli_json

pytestmark = NEEDS_POSTGRES


def _in_schema(schema: str) -> str:
    assert POSTGRES_URL is not None
    joiner = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{joiner}options=-csearch_path%3D{schema}"


@pytest.fixture
def schemas() -> Iterator[tuple[str, str]]:
    """Two new schemas of the test database, dropped (with every ledger in them) after."""
    assert POSTGRES_URL is not None
    names = (f"tenant_{uuid.uuid4().hex[:8]}_a", f"tenant_{uuid.uuid4().hex[:8]}_b")
    engine = create_engine(POSTGRES_URL)
    try:
        with engine.begin() as conn:
            for name in names:
                conn.execute(text(f'CREATE SCHEMA "{name}"'))
        yield names
        with engine.begin() as conn:
            for name in names:
                conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
    finally:
        engine.dispose()


def _event(n: int, stream: str) -> dict[str, object]:
    return build_event(
        event_type="message.updated", payload={"n": n}, time_ms=n, sequence=n, stream_id=stream
    ).to_builtins()


def test_two_schemas_each_hold_a_ledger_both_open_and_both_written(
    schemas: tuple[str, str], tmp_path: Path
) -> None:
    first, second = schemas
    write_shards(tmp_path, PROJECT, AGENT, "session-a", [trace_lines("session-a", 2)])
    settings = LedgerSettings().with_limits_off()
    one = open_ledger(settings.model_copy(update={"url": _in_schema(first)}), tmp_path)
    two = open_ledger(settings.model_copy(update={"url": _in_schema(second)}), tmp_path)
    try:
        # Both exist now, under the same table names: opening again reads each one's own
        # catalog (this raised MultipleResultsFound), and each layout is today's.
        again = open_ledger(settings.model_copy(update={"url": _in_schema(first)}), tmp_path)
        try:
            assert (again.db.hashed_keys, again.db.digest_streams) == (True, True)
        finally:
            again.close()
        assert one.append(_event(1, "global:one"))
        synced = sync(two, tmp_path)
        assert synced.indexed == two.count() > 0
        assert one.count() == 1
        assert [entry.envelope()["stream_id"] for entry in one.newest(10)] == ["global:one"]
        assert not two.contains(one.newest(1)[0].event_id)
        assert one.stats().rows == 1
        assert one.retention_plan().rows == 1
        assert two.stats().bytes is not None
        engine = create_engine(POSTGRES_URL or "")
        try:
            with engine.connect() as conn:
                found = {
                    str(schema): int(rows)
                    for schema, rows in conn.execute(
                        text(
                            "SELECT schemaname, count(*) FROM pg_indexes WHERE indexname = "
                            "'runtime_events_stream_sequence_key' AND schemaname IN (:a, :b) "
                            "GROUP BY schemaname"
                        ),
                        {"a": first, "b": second},
                    )
                }
        finally:
            engine.dispose()
        assert found == {first: 1, second: 1}
    finally:
        one.close()
        two.close()


def test_the_cli_reads_the_ledger_of_the_schema_its_url_names(
    schemas: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = schemas
    write_shards(tmp_path, PROJECT, AGENT, "session-a", [trace_lines("session-a", 2)])
    other = open_ledger(LedgerSettings(url=_in_schema(second)).with_limits_off(), tmp_path)
    try:
        assert other.append(_event(1, "global:other"))
    finally:
        other.close()
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS", "off")
    monkeypatch.setenv("PENTRACE_LEDGER_URL", _in_schema(first))
    synced = cli_json(tmp_path, "ledger", "sync", "--json")["indexed"]
    assert synced > 1
    assert cli_json(tmp_path, "ledger", "stats", "--json")["rows"] == synced
    monkeypatch.setenv("PENTRACE_LEDGER_URL", _in_schema(second))
    assert cli_json(tmp_path, "ledger", "stats", "--json")["rows"] == 1


def test_a_search_path_naming_no_schema_is_a_clear_error(tmp_path: Path) -> None:
    missing = f"nowhere_{uuid.uuid4().hex[:8]}"
    settings = LedgerSettings(url=_in_schema(missing))
    with pytest.raises(ConfigError, match="search_path to name an existing schema") as caught:
        open_ledger(settings, tmp_path)
    assert caught.value.hint is not None
    assert "CREATE SCHEMA" in caught.value.hint
