"""The scoped keys of ADR 0068 and the stream key of ADR 0071: SQLite's SQL stays as it was,
PostgreSQL's compares the hash (or digest) its indexes hold and the text both."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from pentrace.infrastructure.ledger.backend.dialect import ledger_tables
from pentrace.infrastructure.ledger.backend.schema import (
    key_equals,
    key_in,
    key_is_null,
    positions_match,
    stream_equals,
    stream_in,
)

EVENTS = ledger_tables().events


def _sql(condition: Any, dialect: Any) -> str:
    return str(select(EVENTS.c.notification_id).where(condition).compile(dialect=dialect))


def _where(condition: Any, dialect: Any) -> str:
    return _sql(condition, dialect).split("WHERE ", 1)[1]


def test_an_earlier_layout_reads_the_plain_comparisons() -> None:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    agent = _where(key_equals(EVENTS.c.agent_id, bindparam("agent"), hashed=False), dialect)
    assert agent == "runtime_events.agent_id = %(agent)s"
    null = _where(key_is_null(EVENTS.c.directory, hashed=False), dialect)
    assert null == "runtime_events.directory IS NULL"
    topics = _where(key_in(EVENTS.c.event_type, ["a"], hashed=False), dialect)
    assert topics == "runtime_events.event_type IN (__[POSTCOMPILE_event_type_1])"


def test_sqlite_reads_the_plain_comparisons() -> None:
    dialect = sqlite.dialect()
    assert _where(key_equals(EVENTS.c.agent_id, bindparam("agent"), hashed=True), dialect) == (
        "runtime_events.agent_id = ?"
    )
    assert (
        _where(key_is_null(EVENTS.c.directory, hashed=True), dialect)
        == "runtime_events.directory IS NULL"
    )
    assert _where(key_in(EVENTS.c.event_type, ["a", "b"], hashed=True), dialect) == (
        "runtime_events.event_type IN (?, ?)"
    )


def test_postgres_compares_the_hash_and_the_text() -> None:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    agent = _where(key_equals(EVENTS.c.agent_id, bindparam("agent"), hashed=True), dialect)
    assert agent == (
        "(runtime_events.agent_id = %(agent)s "
        "AND hashtextextended(runtime_events.agent_id, 0) = hashtextextended(%(agent)s, 0))"
    )
    assert _where(key_is_null(EVENTS.c.directory, hashed=True), dialect) == (
        "(runtime_events.directory IS NULL "
        "AND hashtextextended(runtime_events.directory, 0) IS NULL)"
    )
    topics = _where(key_in(EVENTS.c.event_type, ["a", "b"], hashed=True), dialect)
    assert topics == (
        "(runtime_events.event_type IN (%(param_1)s, %(param_2)s) "
        "AND hashtextextended(runtime_events.event_type, 0) IN "
        "(hashtextextended(%(param_1)s, 0), hashtextextended(%(param_2)s, 0)))"
    )


def test_a_plain_value_is_bound_not_inlined() -> None:
    compiled = select(EVENTS.c.notification_id).where(
        key_equals(EVENTS.c.agent_id, "x'; --", hashed=True)
    )
    params = compiled.compile(dialect=postgresql.dialect()).params  # type: ignore[no-untyped-call]
    assert list(params.values()) == ["x'; --"]


def test_the_postgres_indexes_hold_the_expression_the_queries_spell() -> None:
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    ddl = {
        str(index.name): str(CreateIndex(index).compile(dialect=dialect))
        for index in EVENTS.indexes
    }
    assert "(hashtextextended(agent_id, 0), notification_id)" in ddl["runtime_events_agent_idx"]
    assert "USING brin (inserted_at)" in ddl["runtime_events_inserted_idx"]


def test_key_in_wants_a_value() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        key_in(EVENTS.c.event_type, [], hashed=True)


def test_the_stream_key_is_spelled_by_the_digest_on_a_new_postgres_ledger() -> None:
    """ADR 0071: the digest (the first 64 bits of md5) finds the key's entries, the text
    decides; SQLite and earlier PostgreSQL ledgers read the plain comparison."""
    postgres = postgresql.dialect()  # type: ignore[no-untyped-call]
    digest = "CAST(CAST('x' || left(md5({}), 16) AS BIT(64)) AS BIGINT)"
    assert _where(stream_equals(EVENTS, bindparam("s"), digest=True), postgres) == (
        "(runtime_events.stream_id = %(s)s AND "
        f"{digest.format('runtime_events.stream_id')} = {digest.format('%(s)s')})"
    )
    assert _where(stream_equals(EVENTS, bindparam("s"), digest=False), postgres) == (
        "runtime_events.stream_id = %(s)s"
    )
    assert _where(stream_equals(EVENTS, bindparam("s"), digest=True), sqlite.dialect()) == (
        "runtime_events.stream_id = ?"
    )
    both = _where(stream_in(EVENTS, ["a", "b"], digest=True), postgres)
    assert both.startswith("(runtime_events.stream_id IN (%(param_1)s, %(param_2)s) AND ")
    assert f"IN ({digest.format('%(param_1)s')}, {digest.format('%(param_2)s')}))" in both
    with pytest.raises(ValueError, match="at least one value"):
        stream_in(EVENTS, [], digest=True)


def test_positions_match_probes_each_stream_once_and_nothing_for_none() -> None:
    dialect = sqlite.dialect()
    where = _where(positions_match(EVENTS, [("a", 1), ("b", 2), ("a", 3)], digest=False), dialect)
    term = "runtime_events.stream_id = ? AND runtime_events.sequence IN ({})"
    term = term.format("__[POSTCOMPILE_sequence_{}]")
    assert where == f"{term.format(1)} OR {term.format(2)}"
    assert _where(positions_match(EVENTS, [], digest=True), dialect) == "0 = 1"


def test_no_version_creates_the_digest_key_on_an_earlier_table() -> None:
    """The digest key is made with a new PostgreSQL table only (not one of the table's
    indexes, which ``upgrade_indexes`` adds to earlier ledgers); SQLite keeps the text
    constraint in its table."""
    assert not any("stream_sequence" in str(index.name) for index in EVENTS.indexes)
    ddl = str(CreateTable(EVENTS).compile(dialect=sqlite.dialect()))
    assert "CONSTRAINT runtime_events_stream_sequence_key UNIQUE (stream_id, sequence)" in ddl
