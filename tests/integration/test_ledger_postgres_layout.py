"""The PostgreSQL events table of ADRs 0068 and 0071, and the layouts earlier versions created.

A new ledger keys its scoped indexes (type, session, agent, directory) by a
64-bit hash of the text and its ``(stream_id, sequence)`` key by
``md5(stream_id)::uuid`` (ADR 0071), indexes ``inserted_at`` with BRIN, fills
its B-tree pages, stores the envelope uncompressed by PostgreSQL and puts the
bigints first.  A ledger created before keeps its layout (``0068``: hashed
scoped keys and the text stream key; ``earlier``: text keys throughout): the
same queries must give the same answers on each, and each scoped or stream
read must be served by its index on each (checked with ``EXPLAIN`` for a value
the ledger does not hold, sequential and bitmap scans switched off, so that a
query that cannot use the index shows the primary key with a filter).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from sqlalchemy import Select, bindparam, create_engine, func, make_url, select, text

from pentrace.domain.json_codec import escape_surrogates
from pentrace.domain.runtime import build_event
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerConflictError, LedgerError
from pentrace.infrastructure.analytics.runner import relevant_head
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.postgres import digest_available
from pentrace.infrastructure.ledger.backend.schema import (
    ids_match,
    positions_match,
    stream_equals,
    stream_in,
)
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.bulk.run import insert_values
from pentrace.infrastructure.ledger.replay import _page_statement
from pentrace.infrastructure.ledger.retention import RetentionPolicy, apply_retention
from pentrace.infrastructure.ledger.store import RuntimeEventLedger as LedgerRecorder
from pentrace.testing.files import write_shards
from tests.integration.ledger_backends import BACKENDS, LedgerBackend, newest_entries, reach
from tests.integration.test_ledger_bulk import SESSIONS, built_session, live_path_holds_2_and_3
from tests.integration.test_ledger_indexer import AGENT, PROJECT, trace_lines

pytestmark = pytest.mark.postgres

# The events table as the version before ADR 0068 created it on PostgreSQL.
_EARLIER_DDL = """
CREATE TABLE {t} (
    notification_id BIGSERIAL NOT NULL, event_id VARCHAR, stream_id VARCHAR NOT NULL,
    sequence BIGINT NOT NULL, event_type VARCHAR NOT NULL, category VARCHAR,
    event_time BIGINT NOT NULL, inserted_at BIGINT NOT NULL, session_id VARCHAR,
    conversation_id VARCHAR, agent_id VARCHAR, task_id VARCHAR, run_id VARCHAR,
    project_id VARCHAR, directory VARCHAR, privacy_classification VARCHAR,
    redacted BOOLEAN NOT NULL, event_json BYTEA NOT NULL, PRIMARY KEY (notification_id),
    CONSTRAINT {t}_stream_sequence_key UNIQUE (stream_id, sequence));
CREATE UNIQUE INDEX {t}_event_id_idx ON {t} (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX {t}_type_position_idx ON {t} (event_type, notification_id);
CREATE INDEX {t}_inserted_idx ON {t} (inserted_at);
CREATE INDEX {t}_session_position_idx ON {t} ((CASE
    WHEN (session_id IS NOT NULL) THEN nullif(session_id, '')
    WHEN (substr(stream_id, 1, 8) = 'session:') THEN regexp_replace(stream_id, '^.*/', '')
    ELSE NULL END), notification_id);
CREATE INDEX {t}_agent_idx ON {t} (agent_id, notification_id);
CREATE INDEX {t}_directory_idx ON {t} (directory, notification_id);
"""
_KEYS = [SessionKey("p1", f"agent-{n % 2}", f"session-{n}") for n in range(4)]
_TYPES = ("message.updated", "tool.called", "tool.result")
_DAY_MS = 86_400_000


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _event(key: SessionKey, sequence: int) -> dict[str, Any]:
    return build_event(
        event_type=_TYPES[sequence % 3],
        payload={"text": f"{key.session_id} {sequence}"},
        time_ms=1_700_000_000_000,
        sequence=sequence,
        stream_id=key.stream_id,
        scope={
            "session_id": key.session_id,
            "agent_id": key.agent,
            "project_id": key.project,
            "directory": f"/srv/{key.agent}",
        },
    ).to_builtins()


@pytest.fixture
def ledger_backend(tmp_path: Path) -> Iterator[LedgerBackend]:
    """The PostgreSQL backend alone: these layouts are PostgreSQL's (SQLite's DDL is unchanged)."""
    (postgres,) = (backend for backend in BACKENDS if backend.name == "postgres")
    handle = reach(postgres, tmp_path)
    if handle is None:
        pytest.skip(postgres.missing)
    yield handle
    handle.close()


# ADR 0068's table: today's but for the stream key, the text constraint (and no statistics
# of the digest).
_ADR_0068_STREAM_KEY = """
DROP STATISTICS {t}_stream_stats;
DROP INDEX {t}_stream_sequence_key;
ALTER TABLE {t} ADD CONSTRAINT {t}_stream_sequence_key UNIQUE (stream_id, sequence)
    WITH (fillfactor = 100);
"""


@pytest.fixture(params=["new", "0068", "earlier"])
def layout(request: pytest.FixtureRequest, ledger_backend: LedgerBackend) -> str:
    if request.param != "new":
        first = ledger_backend.database()
        table = first.tables.events.name
        with first.writing("replace the events table by an earlier one") as conn:
            if request.param == "earlier":
                conn.execute(text(f"DROP TABLE {table}"))
                conn.execute(text(_EARLIER_DDL.format(t=table)))
            else:
                conn.execute(text(_ADR_0068_STREAM_KEY.format(t=table)))
        first.close()
    return str(request.param)


def _open(backend: LedgerBackend, clock: _Clock) -> RuntimeEventLedger:
    return RuntimeEventLedger(backend.database(), LedgerSettings().with_limits_off(), clock=clock)


def _index_definitions(db: LedgerDatabase) -> dict[str, str]:
    table = db.tables.events.name
    with db.reading("read the index definitions") as conn:
        rows = conn.execute(
            text("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :t"), {"t": table}
        ).all()
    return {str(name).removeprefix(table + "_"): str(definition) for name, definition in rows}


def _plan(
    db: LedgerDatabase, statement: Select[Any], values: dict[str, Any], *, bitmaps: bool = False
) -> str:
    compiled = statement.compile(
        dialect=db.engine.dialect, compile_kwargs={"render_postcompile": True}
    )
    with db.writing("analyze the events table") as conn:
        conn.execute(text(f"ANALYZE {db.tables.events.name}"))
    with db.reading("explain a ledger query") as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        if not bitmaps:
            conn.execute(text("SET LOCAL enable_bitmapscan = off"))
        rows = conn.exec_driver_sql(f"EXPLAIN {compiled}", {**compiled.params, **values}).all()
    return "\n".join(str(row[0]) for row in rows)


def _constraints(db: LedgerDatabase) -> list[str]:
    table = db.tables.events.name
    with db.reading("read the table's constraints") as conn:
        names = conn.execute(
            text("SELECT conname FROM pg_constraint WHERE conrelid = CAST(:t AS regclass)"),
            {"t": table},
        ).scalars()
        return sorted(str(name).removeprefix(table + "_") for name in names)


def test_a_new_ledger_has_the_layout_of_adr_0068_and_0071(ledger_backend: LedgerBackend) -> None:
    db = _open(ledger_backend, _Clock()).db
    indexes = _index_definitions(db)
    # ADR 0071: the stream key is a unique index on the 16-byte digest, no text constraint.
    assert indexes["stream_sequence_key"].startswith("CREATE UNIQUE INDEX"), indexes
    digest = "((('x'::text || \"left\"(md5((stream_id)::text), 16)))::bit(64))::bigint"
    assert f"(({digest}), sequence)" in indexes["stream_sequence_key"], indexes
    assert "fillfactor='100'" in indexes["stream_sequence_key"]
    assert _constraints(db) == ["pkey"]
    assert db.digest_streams is True
    for name in ("type_position_idx", "session_position_idx", "agent_idx", "directory_idx"):
        assert "hashtextextended(" in indexes[name], indexes[name]
        assert "fillfactor='100'" in indexes[name], indexes[name]
    assert "USING brin (inserted_at)" in indexes["inserted_idx"]
    table = db.tables.events.name
    with db.reading("read the table's options") as conn:
        options = conn.execute(
            text(
                "SELECT c.reloptions, i.reloptions FROM pg_class c, pg_class i "
                "WHERE c.relname = :t AND i.relname = :t || '_pkey'"
            ),
            {"t": table},
        ).one()
        storage = conn.execute(
            text(
                "SELECT attstorage FROM pg_attribute "
                "WHERE attrelid = CAST(:t AS regclass) AND attname = 'event_json'"
            ),
            {"t": table},
        ).scalar_one()
        columns = conn.execute(
            text(
                "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
                "AND attnum > 0 ORDER BY attnum"
            ),
            {"t": table},
        ).scalars()
        order = list(columns)
    assert options == (["toast_tuple_target=8160"], ["fillfactor=100"])
    assert storage == "e"  # EXTERNAL: never compressed by PostgreSQL
    assert order[:5] == ["notification_id", "sequence", "event_time", "inserted_at", "redacted"]
    assert order[-1] == "event_json"
    with db.reading("read the statistics objects") as conn:
        statistics = conn.execute(
            text("SELECT stxname FROM pg_statistic_ext WHERE stxrelid = CAST(:t AS regclass)"),
            {"t": table},
        ).scalars()
        names = sorted(str(name).removeprefix(table + "_") for name in statistics)
    assert names == [
        "agent_stats",
        "directory_stats",
        "session_stats",
        "stream_stats",
        "type_stats",
    ]


def test_an_earlier_ledger_keeps_its_layout_when_opened(
    ledger_backend: LedgerBackend, layout: str
) -> None:
    ledger = _open(ledger_backend, _Clock())
    ledger.extend([_event(_KEYS[0], 1)])
    indexes = _index_definitions(ledger.db)
    hashed = "hashtextextended(" in indexes["type_position_idx"]
    assert hashed is (layout != "earlier")
    assert ledger.db.hashed_keys is (layout != "earlier")
    assert ("USING brin" in indexes["inserted_idx"]) is (layout != "earlier")
    assert ("md5(" in indexes["stream_sequence_key"]) is (layout == "new")
    assert ledger.db.digest_streams is (layout == "new")
    assert ("stream_sequence_key" in _constraints(ledger.db)) is (layout != "new")
    # Opened again (as every later command does): nothing was created or changed.
    again = _open(ledger_backend, _Clock())
    assert _index_definitions(again.db) == indexes
    assert again.db.digest_streams is (layout == "new")


def _answers(ledger: RuntimeEventLedger) -> dict[str, Any]:
    """Every scoped read of the ledger, as event ids (or notification ids)."""
    recorder = LedgerRecorder(ledger.db)

    def page(**scope: str) -> list[str]:
        return [entry.event_id for entry in ledger.replay_after(None, 1000, **scope).events]

    def topics(*names: str) -> list[int]:
        return [n.id for n in recorder.select_notifications(1, 1000, topics=names)]

    return {
        "all": page(),
        "session": page(session_id="session-2"),
        "agent": page(agent_id="agent-1"),
        "directory": page(directory="/srv/agent-0"),
        "session and agent": page(session_id="session-1", agent_id="agent-1"),
        "one topic": topics("tool.called"),
        "two topics": topics("tool.called", "tool.result"),
        "relevant head": relevant_head(ledger, ("tool.result",), 10_000),
        "tail of a session": [e.event_id for e in newest_entries(ledger, 2, session="session-3")],
    }


def test_every_scoped_read_answers_from_the_rows_on_either_layout(
    ledger_backend: LedgerBackend, layout: str
) -> None:
    clock = _Clock()
    ledger = _open(ledger_backend, clock)
    written = []
    for key in _KEYS:
        written += [(key, _event(key, n)) for n in range(1, 7)]
        ledger.extend([event for _, event in written[-6:]])
    clock.now += 10 * 86_400  # the first rows are ten days old now
    written += [(key, _event(key, 7)) for key in _KEYS]
    ledger.extend([event for _, event in written[-4:]])
    before = _answers(ledger)
    # What the rows say, independently of any index.
    assert before["all"] == [event["id"] for _, event in written]

    def where(test: Any) -> list[str]:
        return [event["id"] for key, event in written if test(key, event)]

    assert before["session"] == where(lambda key, _: key.session_id == "session-2")
    assert before["agent"] == where(lambda key, _: key.agent == "agent-1")
    assert len(before["agent"]) == 14
    assert before["directory"] == where(lambda key, _: key.agent == "agent-0")
    assert before["session and agent"] == where(lambda key, _: key.session_id == "session-1")
    # Types by sequence: tool.called at 1, 4, 7; tool.result at 2, 5 (notification 23 last).
    assert len(before["one topic"]) == 12
    assert len(before["two topics"]) == 20
    assert before["relevant head"] == 23
    assert (
        before["tail of a session"]
        == [event["id"] for key, event in written if key.session_id == "session-3"][-2:]
    )
    # Retention by age (inserted_at): the ten-day-old rows go, the newest stay.
    report = apply_retention(ledger.db, RetentionPolicy(None, 5.0, None), int(clock.now * 1000))
    assert report.by_age == 24
    assert _answers(ledger)["all"] == [event["id"] for _, event in written[-4:]]


@pytest.mark.parametrize(
    ("lead", "branch", "values", "index"),
    [
        ("session_id", "own", {"session_id": "session-9"}, "session_position_idx"),
        ("session_id", "unscoped", {}, "session_position_idx"),
        ("agent_id", "own", {"agent_id": "agent-9"}, "agent_idx"),
        ("directory", "own", {"directory": "/srv/agent-9"}, "directory_idx"),
    ],
)
def test_each_scoped_page_is_read_through_its_index_on_both_layouts(
    ledger_backend: LedgerBackend, layout: str, lead: str, branch: str, values: dict[str, Any],
    index: str,
) -> None:  # fmt: skip
    ledger = _open(ledger_backend, _Clock())
    ledger.extend([_event(key, n) for key in _KEYS for n in range(1, 51)])
    db = ledger.db
    statement = _page_statement(db, lead, branch, True, True, False, False, False, True, False)
    plan = _plan(db, statement, {"after": 0, "through": 100, "limit": 10, **values})
    assert f"{db.tables.events.name}_{index}" in plan, plan


def test_a_topic_read_is_read_through_the_type_index_on_both_layouts(
    ledger_backend: LedgerBackend, layout: str
) -> None:
    ledger = _open(ledger_backend, _Clock())
    ledger.extend([_event(key, n) for key in _KEYS for n in range(1, 51)])
    db = ledger.db
    statement = LedgerRecorder(db)._notifications_statement(True, True, True, True, False)
    plan = _plan(db, statement, {"after": 0, "through": 100, "topic": "run.error", "limit": 5})
    assert f"{db.tables.events.name}_type_position_idx" in plan, plan


def _stream_reads(db: LedgerDatabase) -> dict[str, tuple[Select[Any], bool]]:
    """Each way the ledger's code selects by stream (helpers of ``backend/schema.py``), and
    whether the plan may combine indexes (an OR of two keys needs a bitmap scan)."""
    events = db.tables.events
    c, digest = events.c, db.digest_streams
    stream = stream_equals(events, bindparam("stream"), digest=digest)
    absent = [SessionKey("p1", "agent-9", f"absent-{n}").stream_id for n in range(2)]
    return {
        "a stream in order": (select(c.sequence).where(stream).order_by(c.sequence), False),
        "its newest position": (select(func.max(c.sequence)).where(stream), False),
        "one position": (select(c.notification_id).where(stream, c.sequence == 3), False),
        "positions of two streams": (
            select(c.notification_id).where(
                positions_match(events, [(absent[0], 1), (absent[1], 2)], digest=digest)
            ),
            True,
        ),
        "ids": (
            select(c.notification_id).where(
                ids_match(events, [f"evt:{absent[0]}:00000001"], digest=digest)
            ),
            True,
        ),
        "two streams": (
            select(c.notification_id).where(stream_in(events, absent, digest=digest)),
            True,
        ),
    }


@pytest.mark.parametrize(
    "read",
    [
        "a stream in order",
        "its newest position",
        "one position",
        "positions of two streams",
        "ids",
        "two streams",
    ],
)
def test_every_stream_read_is_served_by_the_stream_key_on_each_layout(
    ledger_backend: LedgerBackend, layout: str, read: str
) -> None:
    ledger = _open(ledger_backend, _Clock())
    ledger.extend([_event(key, n) for key in _KEYS for n in range(1, 51)])
    db = ledger.db
    statement, bitmaps = _stream_reads(db)[read]
    stream = SessionKey("p1", "agent-9", "absent-0").stream_id
    plan = _plan(db, statement, {"stream": stream}, bitmaps=bitmaps)
    assert "Seq Scan" not in plan, plan
    lines = plan.splitlines()
    probes = [n for n, line in enumerate(lines) if "_stream_sequence_key" in line]
    assert probes, plan
    # The key's leading column finds the entries: the digest on a new ledger (the text
    # decides, as a filter), the text itself on earlier ones.
    for n in probes:
        condition = lines[n + 1]
        assert "Index Cond" in condition, plan
        assert "stream_id" in condition, plan
        assert ('left"(md5((stream_id)::text), 16)' in condition) is (layout == "new"), plan


# Two different texts of one md5 digest (made with Marc Stevens' TextColl, as published):
# a stream key on md5 cannot hold both at one sequence, and must say so.
_COLLIDING = (
    "TEXTCOLLBYfGiJUETHQ4hAcKSMd5zYpgqf1YRDhkmxHkhPWptrkoyz28wnI9V0aHeAuaKnak",
    "TEXTCOLLBYfGiJUETHQ4hEcKSMd5zYpgqf1YRDhkmxHkhPWptrkoyz28wnI9V0aHeAuaKnak",
)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _foreign(stream: str, sequence: int) -> dict[str, Any]:
    return build_event(
        event_type="tool.called",
        payload={"text": f"{stream[:20]} {sequence}"},
        time_ms=1_700_000_000_000,
        sequence=sequence,
        stream_id=stream,
        scope={},
    ).to_builtins()


def test_two_streams_of_one_md5_are_refused_naming_both_and_nothing_is_lost(
    ledger_backend: LedgerBackend, layout: str
) -> None:
    first, second = _COLLIDING
    assert first != second
    assert _md5(first) == _md5(second)
    ledger = _open(ledger_backend, _Clock())
    assert ledger.extend([_foreign(first, 1), _foreign(first, 2)]) == 2
    if layout != "new":  # the text key holds both
        assert ledger.extend([_foreign(second, 1)]) == 1
        assert ledger.held_sequences(second) == ({1}, 0)
        return
    # Position 3 is free on both: stored; position 1 is the other stream's.
    assert ledger.extend([_foreign(second, 3)]) == 1
    for write in (
        lambda: ledger.extend([_foreign(second, 4), _foreign(second, 1)]),
        lambda: LedgerRecorder(ledger.db).insert_events(
            [StoredEvent(second, 2, "tool.called", b"{}")]
        ),
    ):
        with pytest.raises(LedgerConflictError) as caught:
            write()
        message = str(caught.value)
        assert repr(first) in message, message
        assert repr(second) in message, message
        assert _md5(first)[:16] in message
        assert "another id" in (caught.value.hint or "")
    # Nothing of the refused batches was stored, nothing held was changed.
    assert ledger.held_sequences(first) == ({1, 2}, 0)
    assert ledger.held_sequences(second) == ({3}, 0)
    assert [e.event_id for e in ledger.replay_after(None, 10).events] == [
        _foreign(first, 1)["id"], _foreign(first, 2)["id"], _foreign(second, 3)["id"]
    ]  # fmt: skip
    # A plain held position is still the plain conflict (no collision named).
    with pytest.raises(LedgerConflictError) as caught:
        LedgerRecorder(ledger.db).insert_events([StoredEvent(first, 1, "tool.called", b"{}")])
    assert "md5" not in str(caught.value)


_HOSTILE = {
    "backslashes": r"session:p1/agent-0/a\\x00\'b\\",
    "bytea escapes": r"global\001\\x41\x",
    "quotes": 'session:p1/agent-0/it\'s "quoted"; --',
    "lone surrogate": "session:p1/agent-0/x\ud800y",
    "surrogate escape text": r"session:p1/agent-0/x\\ud800y",
    "non-ASCII": "session:p1/agent-0/s\u00e9ance-\u6f22\u5b57-\U0001f600",
    # 40 KB that do not compress (an index entry's text is compressed first).
    "very long": "foreign:\u00e9" + "".join(_md5(str(n)) for n in range(1250)),
}


@pytest.mark.parametrize("name", sorted(_HOSTILE))
def test_hostile_stream_ids_are_stored_found_and_kept_apart(
    ledger_backend: LedgerBackend, layout: str, name: str
) -> None:
    stream = _HOSTILE[name]
    ledger = _open(ledger_backend, _Clock())
    events = [_foreign(stream, n) for n in (1, 2)]
    if name == "very long" and layout != "new":
        # A text key holds at most a third of a page; the digest key any stream id.
        with pytest.raises(LedgerError, match="index row"):
            ledger.extend(events)
        assert ledger.count() == 0
        return
    neighbour = _foreign(stream + "x", 1)
    assert ledger.extend([*events, neighbour]) == 3
    assert ledger.extend(events) == 0  # a second pass: held, identical
    held = escape_surrogates(stream)  # what the row holds (ADR 0015)
    recorder = LedgerRecorder(ledger.db)
    # Asked for by the id as given or as the row holds it: the same rows.
    for asked in (stream, held):
        assert ledger.held_sequences(asked) == ({1, 2}, 0)
        assert [e.originator_version for e in recorder.select_events(asked)] == [1, 2]
    assert all(ledger.contains(event["id"]) for event in events)
    assert ledger.forget_stream(stream) == 2
    assert ledger.held_sequences(held) == (set(), 0)
    assert ledger.contains(neighbour["id"])


def test_a_server_without_md5_gets_the_text_stream_key_and_works(
    ledger_backend: LedgerBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """A server in FIPS mode refuses md5().  Simulated on the real server: a schema ahead of
    pg_catalog in the search path whose md5(text) raises as such a server's does, so that
    the ledger's own probe (the same unqualified call as the index's) is refused."""
    schema = f"nomd5_{uuid.uuid4().hex[:8]}"
    admin = create_engine(ledger_backend.url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
        conn.execute(
            text(
                f"CREATE FUNCTION {schema}.md5(text) RETURNS text LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'could not compute MD5 hash: unsupported'; END $$"
            )
        )
    url = make_url(ledger_backend.url).update_query_dict(
        {"options": f"-csearch_path={schema},pg_catalog,public"}
    )
    try:
        with caplog.at_level(logging.WARNING):
            db = LedgerDatabase(url.render_as_string(hide_password=False), table_prefix="fips_")
        try:
            assert db.digest_streams is False
            assert "could not compute MD5 hash" in caplog.text
            assert "stream_sequence_key" in _constraints(db)
            indexes = _index_definitions(db)
            assert "(stream_id, sequence)" in indexes["stream_sequence_key"]
            assert "hashtextextended(" in indexes["type_position_idx"]  # the rest is today's
            ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off(), clock=_Clock())
            first, second = _COLLIDING  # the text key tells them apart
            assert ledger.extend([_foreign(first, 1), _foreign(second, 1)]) == 2
            assert ledger.extend([_foreign(first, 1)]) == 0
            assert ledger.held_sequences(second) == ({1}, 0)
            with db.engine.connect() as conn:
                assert digest_available(conn) is False
        finally:
            db.drop_all()
            db.close()
        with admin.connect() as conn:  # the same server, md5() not shadowed
            assert digest_available(conn) is True
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_a_sync_meets_rows_the_live_path_held_and_a_second_sync_adds_nothing(
    tmp_path: Path, ledger_backend: LedgerBackend, layout: str
) -> None:
    """The bulk insert finds held keys by the stream key's unique violation, on each layout."""
    ledger, lines, build = built_session(tmp_path, ledger_backend)
    live_path_holds_2_and_3(ledger, lines)
    assert insert_values(ledger, build.rows) == len(lines) - 2
    for name in SESSIONS[1:3]:
        write_shards(tmp_path, PROJECT, AGENT, name, [trace_lines(name, 3)])
    first = sync(ledger, tmp_path)
    assert (first.indexed, first.already_held) == (20, len(lines))
    again = sync(ledger, tmp_path)
    assert (again.indexed, again.already_held) == (0, len(lines) + 20)
    assert ledger.count() == len(lines) + 20
    key = SessionKey(PROJECT, AGENT, SESSIONS[0])
    assert ledger.held_sequences(key.stream_id) == (set(range(1, len(lines) + 1)), 0)
