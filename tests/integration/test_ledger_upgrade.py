"""A ledger written before ADR 0023 (session-id-only event ids) is upgraded when opened.

The fixture writes the rows the earlier code wrote: the very envelopes of
today's mapping with the earlier id and stream (``evt:session:<sid>:<%08d>``,
``session:<sid>``), inserted the earlier way, into a ledger without the
``runtime_event_meta`` table.  Two sessions share an id, so - as before - the
second one's first positions were skipped as "already held" and only its extra
positions went in, under the shared stream.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sqlalchemy import delete, select, text

from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.audit.run import audit_sessions
from pentrace.infrastructure.ledger import (
    LedgerDatabase,
    LedgerSettings,
    RuntimeEventLedger,
)
from pentrace.infrastructure.ledger.backend import upgrade
from pentrace.infrastructure.ledger.backend.codec import ROW_FORM, ROW_FORM_KEY
from pentrace.infrastructure.ledger.backend.schema import event_id_of, ids_match
from pentrace.infrastructure.ledger.backend.upgrade import EVENT_IDS_KEY, EVENT_IDS_VERSION
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.indexer import build_events, session_directory
from pentrace.infrastructure.storage.layout import DataRoot, iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing import BeginRequest, EndRequest, StartSession, UserInput, write_trace
from pentrace.testing.commands import Command
from tests.integration.ledger_backends import LedgerBackend

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
LONE = "session-2026-07-18-11-10-22-0badcafe"
A, B, C = SessionKey("p1", "a1", SID), SessionKey("p1", "a2", SID), SessionKey("p2", "a3", LONE)


def _turns(count: int) -> list[Command]:
    commands: list[Command] = [StartSession()]
    for number in range(count):
        commands += [UserInput(f"turn {number}"), BeginRequest(), EndRequest("completed")]
    return commands


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    data = DataRoot(tmp_path / "data")
    write_trace(data, _turns(1), project=A.project, agent=A.agent, session_id=SID)
    write_trace(data, _turns(3), project=B.project, agent=B.agent, session_id=SID)  # longer
    write_trace(data, _turns(2), project=C.project, agent=C.agent, session_id=LONE)
    return data


@pytest.fixture
def open_db(ledger_backend: LedgerBackend) -> Callable[[], LedgerDatabase]:
    """Open the ledger on each backend in turn (closed, and dropped, afterwards)."""
    return ledger_backend.database


def _events(root: DataRoot, key: SessionKey) -> list[Any]:
    [ref] = [r for r in iter_sessions(root) if r.key == key]
    records = [(n, record.raw) for n, record in enumerate(read_session(ref.shards), start=1)]
    # The directory as sync takes it, so these are the very envelopes sync builds.
    directory = session_directory(ref.shards)
    return build_events(
        key.session_id, records, project=key.project, agent=key.agent, directory=directory
    )


def _legacy(event: Any) -> Any:
    sid = event.scope["session_id"]
    return msgspec.structs.replace(
        event, id=f"evt:session:{sid}:{event.sequence:08d}", stream_id=f"session:{sid}"
    )


def write_earlier_ledger(db: LedgerDatabase, root: DataRoot) -> None:
    """The ledger the earlier code left: A whole, B's positions past A's, C with 2 pruned."""
    ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
    a, b, c = (_events(root, key) for key in (A, B, C))
    ledger.extend([_legacy(event) for event in a])
    ledger.extend([_legacy(event) for event in b[len(a) :]])
    ledger.extend([_legacy(event) for event in c])
    tables = db.tables
    with db.writing("make the fixture an earlier ledger") as conn:
        conn.execute(delete(tables.events).where(ids_match(tables.events,
            [f"evt:session:{LONE}:{n:08d}" for n in (1, 2)], digest=db.digest_streams
        )))  # fmt: skip
        conn.execute(
            tables.watermarks.insert().values(
                stream_id=f"session:{LONE}",
                id_prefix=f"evt:session:{LONE}",
                max_sequence=2,
                max_notification_id=0,
                pruned_rows=2,
            )
        )
        conn.execute(text(f"DROP TABLE {tables.meta.name}"))


def test_an_earlier_ledger_is_upgraded_on_open_and_sync_completes_it(
    root: DataRoot, open_db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_earlier_ledger(open_db(), root)
    monkeypatch.setattr(upgrade, "_BATCH", 4)  # several pages, as on a large ledger
    db = open_db()  # opening runs the upgrade
    ledger = RuntimeEventLedger(db, LedgerSettings().with_limits_off())
    with db.reading("read the upgraded ledger") as conn:
        stored = conn.execute(
            select(event_id_of(db.tables.events), db.tables.events.c.event_json)
        ).all()
        scheme = conn.execute(select(db.tables.meta.c.value)).scalars().all()
        marks = conn.execute(select(db.tables.watermarks.c.stream_id)).scalars().all()
    assert scheme == [EVENT_IDS_VERSION]
    assert not any(row[0].startswith(f"evt:session:{SID}:") for row in stored)
    # Each upgraded row is byte for byte what today's code builds for its position.
    fresh = {
        event.id: msgspec.json.encode(event) for key in (A, B, C) for event in _events(root, key)
    }
    assert all(bytes(row[1]) == fresh[row[0]] for row in stored)
    assert {row[0] for row in stored} == (
        {e.id for e in _events(root, A)}
        | {e.id for e in _events(root, B)[len(_events(root, A)) :]}
        | {e.id for e in _events(root, C)[2:]}
    )
    assert marks == [C.stream_id]  # one owner of LONE: its watermark moved

    report = sync(ledger, root)
    assert report.indexed == len(_events(root, A))  # B's first positions, skipped before
    assert ledger.session_streams() == {
        A: len(_events(root, A)),
        B: len(_events(root, B)),
        C: len(_events(root, C)) - 2,  # what retention pruned stays pruned
    }
    assert sync(ledger, root).indexed == 0
    audit = audit_sessions(iter_sessions(root), ledger)
    assert [problem for session in audit.sessions for problem in session.problems] == []
    ledger.close()


def test_cursors_of_the_earlier_form_still_resume_when_they_name_one_session(
    root: DataRoot, open_db: Any
) -> None:
    write_earlier_ledger(open_db(), root)
    ledger = RuntimeEventLedger(open_db(), LedgerSettings().with_limits_off())
    sync(ledger, root)
    resumed = ledger.replay_after(f"evt:session:{LONE}:00000003", session_id=LONE)
    assert resumed.found
    assert [entry.event_id for entry in resumed.events] == [
        C.event_id(n) for n in range(4, len(_events(root, C)) + 1)
    ]
    evicted = ledger.replay_after(f"evt:session:{LONE}:00000001", session_id=LONE)
    assert (evicted.found, evicted.gap and evicted.gap.reason) == (False, "evicted")
    # Two owners hold SID: the earlier cursor is ambiguous unless the filter names one.
    shared = ledger.replay_after(f"evt:session:{SID}:00000002")
    assert (shared.found, shared.gap and shared.gap.reason) == (False, "unknown_event_id")
    owned = ledger.replay_after(
        f"evt:session:{SID}:00000002", session_id=SID, agent_id="a2", project_id="p1"
    )
    assert owned.found
    assert owned.events[0].event_id == B.event_id(3)
    ledger.close()


def test_a_new_ledger_records_the_scheme_and_is_never_upgraded_again(open_db: Any) -> None:
    db = open_db()
    with db.reading("read the scheme") as conn:
        meta = conn.execute(select(db.tables.meta.c.key, db.tables.meta.c.value)).all()
    assert dict(meta) == {EVENT_IDS_KEY: EVENT_IDS_VERSION, ROW_FORM_KEY: ROW_FORM}
