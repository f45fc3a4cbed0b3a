"""Every surface gives one answer per question for generated sessions (issue #13).

Sessions from the published strategies are written under several owners that
share one session id.  For each, the numbers of ``pentrace.projections
.session_numbers`` must equal a few lines counting the raw JSONL, and every
surface - the catalog row ``sessions list`` and ``show`` print, the analytics
read models ``stats`` reads (fed from the ledger), the report's timeline and
the HTTP API item - must show those same numbers.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.analytics import queries
from pentrace.infrastructure.analytics.database import AnalyticsDatabase, analytics_url
from pentrace.infrastructure.analytics.rebuild import session_events
from pentrace.infrastructure.analytics.registry import BUILTINS
from pentrace.infrastructure.analytics.runner import catch_up
from pentrace.infrastructure.catalog.listing import list_sessions
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.projections.analytics.timeline import build_timeline
from pentrace.projections.session_summary import duration_seconds, numbers_of
from pentrace.service.sessions import session_item
from pentrace.testing.files import write_shards
from pentrace.testing.render import render_shards
from pentrace.testing.strategies import session_commands

SID = "session-2026-11-29-10-00-00-0a1b2c3d"
OWNERS = (("p1", "a1"), ("p1", "a2"), ("p2", "a1"))


def oracle(lines: list[bytes]) -> dict[str, Any]:
    """Requests begun, summed request tokens, first-to-last seconds: read off the lines."""
    payloads = [json.loads(line) for line in lines]
    kinds = [p["payload"].get("type") for p in payloads]
    usages = [
        p["payload"]["request"] for p, k in zip(payloads, kinds, strict=True) if k == "token_usage"
    ]
    return {
        "requests": kinds.count("request_begin"),
        "total": sum(usage.get("total", 0) for usage in usages),
        "output": sum(usage.get("output", 0) for usage in usages),
        "duration_s": duration_seconds(payloads[0]["timestamp"], payloads[-1]["timestamp"]),
    }


def _agree(root: Path, written: dict[tuple[str, str], list[bytes]]) -> None:
    ledger = RuntimeEventLedger.open(root, LedgerSettings().with_limits_off())
    try:
        sync(ledger, root)
    finally:
        ledger.close()
    for name in ("tokens", "sessions"):
        catch_up(BUILTINS[name], data_root=root)
    db = AnalyticsDatabase(analytics_url(root, os.environ))
    try:
        tokens = {row["key"]: row for row in queries.tokens(db, by="session")}
        activity = {row["key"]: row for row in queries.sessions(db, by="session")}
        by_status = queries.requests(db)["requests"]
    finally:
        db.close()
    rows = {(row.project, row.agent): row for row in list_sessions(DataRoot(root))}
    assert set(rows) == set(written)
    refs = {ref.key: ref for ref in DataRoot(root).iter_sessions()}
    # stats requests: the ended requests by status, over every session, as show counts them.
    ended: Counter[str] = Counter()
    for row in rows.values():
        ended.update({k: v for k, v in numbers_of(row.summary).requests.items() if k != "open"})
    assert {k: v for k, v in by_status.items() if v} == dict(ended)
    for owner, lines in written.items():
        row, expected = rows[owner], oracle(lines)
        numbers = numbers_of(row.summary)
        reference = f"{owner[0]}/{owner[1]}/{SID}"
        # The definition itself, against the raw lines.
        assert numbers.request_total == expected["requests"]
        assert (numbers.tokens["total"], numbers.tokens["output"]) == (
            expected["total"],
            expected["output"],
        )
        assert numbers.duration_s == expected["duration_s"]
        # sessions list / show (the catalog row) and the HTTP API item.
        item = session_item(row)
        assert (row.summary.total_tokens, row.summary.turns) == (expected["total"], numbers.turns)
        assert (item["tokens"], item["requests"], item["turns"]) == (
            expected["total"],
            expected["requests"],
            numbers.turns,
        )
        assert (item["model_name"], item["ref"]) == (numbers.model, reference)
        # stats tokens / stats sessions, read from read models fed by the ledger.
        token_row = tokens.get(reference, {"requests": 0, "total": 0, "output": 0})
        assert (token_row["requests"], token_row["total"], token_row["output"]) == (
            expected["requests"],
            expected["total"],
            expected["output"],
        )
        sessions_row = activity[reference]
        assert (sessions_row["turns"], sessions_row["requests"]) == (
            numbers.turns,
            expected["requests"],
        )
        assert sessions_row["max_duration_s"] == expected["duration_s"]
        # The report's timeline.
        ref = refs[SessionKey(owner[0], owner[1], SID)]
        timeline = build_timeline(SID, session_events(ref))
        assert (len(timeline.requests), timeline.tokens) == (
            expected["requests"],
            expected["total"],
        )
        assert timeline.model == numbers.model


pytestmark = pytest.mark.usefixtures("own_stores")


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(session_commands(max_episodes=5), min_size=1, max_size=len(OWNERS)))
def test_every_surface_shows_the_one_definition_for_sessions_sharing_an_id(
    sessions: list[Any],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "data"
        written: dict[tuple[str, str], list[bytes]] = {}
        for owner, commands in zip(OWNERS, sessions, strict=False):
            shards = render_shards(commands, session_id=SID)
            write_shards(DataRoot(root), owner[0], owner[1], SID, shards)
            written[owner] = [line for shard in shards for line in shard]
        _agree(root, written)
