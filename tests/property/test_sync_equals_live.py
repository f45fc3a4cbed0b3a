"""``ledger sync`` (the bulk path) stores what the live path stores, row for row.

Hypothesis draws data roots of one to three sessions: legal sessions cut
anywhere (a torn tail), with hostile records planted among their lines
(secrets in texts, keys and names, lone surrogates, payloads the mapping reads
oddly), under odd owner names.  The bulk sync (:mod:`pentrace.infrastructure.
ledger.bulk`: worker builds, packed rows on SQLite, the scoped indexes made
after the rows) writes them into one ledger; the live path's rows
(``encoded_row``, what ``LedgerHook`` hands its writer) go into another through
``append_rows``, one save per record.  Some drawn records the mapping cannot take
(the failure a lone surrogate in a tool call's arguments was): both paths leave
each of them out and go on with the session, its position a gap (ADR 0102).
Both ledgers must hold the same rows (ids, every column, the envelope's bytes),
each session's rows in position order; the sync must report exactly the records
the live path refused, one finding each (session, position, file and line), and
end with the indexes a new ledger has.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from pentrace.domain.runtime import SessionEvents
from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import build as bulk_build
from pentrace.infrastructure.ledger.bulk import run as bulk_run
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.indexer import session_directory
from pentrace.infrastructure.ledger.rows import MAPPING_ERRORS, encoded_row
from pentrace.infrastructure.storage.layout import iter_sessions, name_problem
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing.files import write_shards
from pentrace.testing.strategies import trace_records
from tests.integration.ledger_backends import index_names, mapping_fails_for
from tests.integration.test_ledger_bulk import stored
from tests.property.test_event_mapping_header import SECRETS, records

_OWNERS = [("acme", "coder"), ("password", "ghp_x"), ("acme", "séance")]
_NAMES = ["session-a", "séance", *(f"s-{s}" for s in SECRETS if name_problem(f"s-{s}") is None)]
_HOSTILE_TEXTS = [*SECRETS[:6], "\ud800", "a\udcffb", "café \ud83d"]


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode() + b"\n"


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    """One record line the mapping finds hard: a drawn odd record, a tool call whose
    arguments hold a lone surrogate or a secret, or a text with one."""
    text = draw(st.sampled_from(_HOSTILE_TEXTS))
    stamp = "2026-07-18T03:10:22.531Z"
    arguments = json.dumps({"cmd": f"echo {text}", "api_key": draw(st.sampled_from(SECRETS))})
    choice = draw(st.integers(0, 2))
    if choice == 0:
        raw = draw(records()).raw
        return raw if raw.endswith(b"\n") else raw + b"\n"
    if choice == 1:
        payload = {"type": "tool_call", "role": "assistant", "name": "exec_command",
                   "arguments": arguments, "tool_call_id": "call_x"}  # fmt: skip
    else:
        payload = {"type": "text", "role": "assistant", "text": f"see {text}", "sender": text}
    return _line({"timestamp": stamp, "type": "model_msg", "payload": payload})


@st.composite
def sessions(draw: st.DrawFn) -> list[tuple[tuple[str, str], str, list[bytes]]]:
    """One to three sessions: (owner, session id, lines), hostile lines planted."""
    drawn = []
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=3, unique=True))
    for name in names:
        lines = draw(trace_records(crashed=True, max_episodes=3))
        for _ in range(draw(st.integers(0, 3))):
            # Never before the first line: it names the session's directory.
            lines.insert(draw(st.integers(1, max(1, len(lines)))), draw(hostile_lines()))
        drawn.append((draw(st.sampled_from(_OWNERS)), name, lines))
    return drawn


def _live(root: Path, ledger: RuntimeEventLedger) -> set[tuple[str, int, int]]:
    """Each record through the live path's rows, one save each, a refused record left out
    and the others saved (as ``LedgerHook`` does); the refused (session, position, line)."""
    refused = set()
    for ref in iter_sessions(root):
        mapper = SessionEvents(ref.key, session_directory(ref.shards))
        for position, record in enumerate(read_session(ref.shards), start=1):
            try:
                row = encoded_row(mapper.encoded(position, record), ledger.now_ms())
            except (LedgerError, *MAPPING_ERRORS):
                refused.add((ref.session_id, position, record.line))
                continue
            ledger.append_rows([row])
    return refused


@settings(max_examples=40, deadline=None)
@given(
    sessions(),
    st.sampled_from([1, 2]),
    st.sets(st.tuples(st.integers(0, 2), st.integers(1, 12)), max_size=4),
    st.sampled_from([None, 1, 3]),
)
def test_a_sync_stores_the_rows_the_live_path_stores(
    drawn: list[tuple[tuple[str, str], str, list[bytes]]],
    workers: int,
    failing: set[tuple[int, int]],
    piece: int | None,
) -> None:
    places: set[tuple[str | None, int]] = {
        (drawn[index][1], position) for index, position in failing if index < len(drawn)
    }
    # ``piece``: every session counts as large and is built in pieces of that many rows by
    # the writer (as a session of more than STREAM_LINES lines is), else whole.
    lines_limit = bulk_build.STREAM_LINES if piece is None else 0
    with (
        tempfile.TemporaryDirectory() as folder,
        patch.object(SessionEvents, "screened", mapping_fails_for(places)),
        patch.object(bulk_build, "STREAM_LINES", lines_limit),
        patch.object(bulk_run, "_PIECE", piece or bulk_run._PIECE),
    ):
        root = Path(folder) / "data"
        for (project, agent), name, lines in drawn:
            write_shards(root, project, agent, name, [lines])
        no_limits = LedgerSettings().with_limits_off()
        bulk = RuntimeEventLedger(LedgerDatabase.for_path(Path(folder) / "bulk.db"), no_limits)
        live = RuntimeEventLedger(LedgerDatabase.for_path(Path(folder) / "live.db"), no_limits)
        fresh = LedgerDatabase.for_path(Path(folder) / "fresh.db")
        try:
            report = sync(bulk, root, workers=workers)
            refused = _live(root, live)
            assert {
                (failure.session_id, failure.position, failure.line) for failure in report.failures
            } == refused
            assert len(report.failures) == len(refused)
            assert all(failure.path is not None for failure in report.failures)
            assert stored(Path(folder) / "bulk.db") == stored(Path(folder) / "live.db")
            for ledger in (bulk, live):  # each session's rows in its order
                events = ledger.db.tables.events
                with ledger.db.reading("read the order") as conn:
                    order = conn.execute(
                        select(events.c.stream_id, events.c.sequence).order_by(
                            events.c.notification_id
                        )
                    ).all()
                for stream in {row[0] for row in order}:
                    sequences = [row[1] for row in order if row[0] == stream]
                    assert sequences == sorted(sequences)
            with bulk.db.reading("indexes") as conn, fresh.reading("indexes") as other:
                # The scoped indexes the sync made after its rows are a new ledger's.
                assert index_names(conn, "runtime_events") == index_names(other, "runtime_events")
        finally:
            bulk.close()
            live.close()
            fresh.close()
