"""One event a handler cannot take: skipped and recorded once, the others applied once, then
retried or rebuilt after the fix (ADR 0032).  SQLite files always; PostgreSQL when configured."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics import AnalyticsProjection
from pentrace.infrastructure.analytics.examples import dump
from pentrace.infrastructure.analytics.failures import EventFailure, read_failures
from pentrace.infrastructure.analytics.rebuild import rebuild, retry
from pentrace.infrastructure.analytics.runner import catch_up, open_ledger, open_projection
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.trace.durability import Durability
from tests.integration.fragile_projection import POISON, Fragile, FragileSql, Refused
from tests.integration.test_session_application import Clock
from tests.support import sync_ledger

OUTPUTS = (["a", "bb"], ["ccc", f"dd {POISON} dd", "e"], ["ffff"])


def record(root: Path, sessions: tuple[list[str], ...] = OUTPUTS) -> list[str]:
    """Record one session per list of tool outputs through the recording API; their refs."""
    app = SessionApplication(root, "proj", "agent", durability=Durability.NONE, clock=Clock())
    refs = []
    try:
        for outputs in sessions:
            handle = app.start_session(
                provider="p", model_id="m", model_context_window=1000, system_prompt="s"
            )
            handle.record_user_input("go")
            handle.begin_request()
            for number, output in enumerate(outputs):
                handle.record_tool_call("exec_command", "{}", f"c{number}")
                handle.record_tool_output(f"c{number}", output)
            handle.end_request("completed")
            handle.save()
            refs.append(f"proj/agent/{handle.session_id}")
    finally:
        app.close()
    return refs


def results(root: Path, env: dict[str, str]) -> list[tuple[int, int, bytes]]:
    """(notification id, sequence, envelope) of every tool output, read from the ledger."""
    ledger = open_ledger(root, env)
    events = ledger.db.tables.events
    try:
        with ledger.db.reading("find the poisoned event") as conn:
            rows = conn.execute(
                select(events.c.notification_id, events.c.sequence, events.c.event_json).where(
                    events.c.event_type == "tool.result"
                )
            ).all()
    finally:
        ledger.close()
    return sorted((int(r[0]), int(r[1]), bytes(r[2])) for r in rows)


def poisoned_row(root: Path, env: dict[str, str]) -> tuple[int, int]:
    """(notification id, sequence) of the poisoned tool output."""
    [(notification_id, sequence)] = [
        (n, q) for n, q, body in results(root, env) if POISON.encode() in body
    ]
    return notification_id, sequence


def failures(root: Path, env: dict[str, str], name: str) -> list[EventFailure]:
    projection = open_projection(Fragile if name == "fragile" else FragileSql, root, env)
    try:
        return read_failures(projection.view.db, name)
    finally:
        projection.view.db.close()


def expected_counts(refs: list[str], skip_poison: bool) -> list[tuple[Any, ...]]:
    rows = []
    for ref, outputs in zip(refs, OUTPUTS, strict=True):
        kept = [o for o in outputs if not (skip_poison and POISON in o)]
        rows.append((ref, len(kept), sum(map(len, kept))))
    return sorted(rows, key=repr)


def caught_up(root: Path, env: dict[str, str], projection: type[AnalyticsProjection]) -> list[str]:
    """Record the sessions, index them and catch ``projection`` up; the session refs."""
    refs = record(root)
    sync_ledger(root, env)
    catch_up(projection, data_root=root, env=env)
    return refs


@pytest.fixture
def fixed_later() -> Iterator[None]:
    yield
    Fragile.fixed = FragileSql.fixed = False


def test_the_event_a_handler_raises_on_is_skipped_recorded_once_and_applied_after_a_retry(
    tmp_path: Path, env: dict[str, str], fixed_later: None
) -> None:
    refs = caught_up(tmp_path, env, Fragile)
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, True)
    notification_id, sequence = poisoned_row(tmp_path, env)
    [failure] = failures(tmp_path, env, "fragile")
    assert (failure.session, failure.sequence) == (refs[1], sequence)
    assert (failure.notification_id, failure.event_type) == (notification_id, "tool.result")
    assert failure.error_type == "RuntimeError"
    assert "cannot take it" in failure.error_message
    assert "hunter2secret" not in failure.error_message  # the credential is masked
    assert failure.attempts == 1
    assert f"notification {notification_id}" in failure.describe()
    assert refs[1] in failure.describe()

    # A rerun (and one after new events) neither handles the failed event again nor doubles.
    catch_up(Fragile, data_root=tmp_path, env=env)
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, True)
    assert failures(tmp_path, env, "fragile") == [failure]

    # A retry with the handler still broken keeps the record and counts the attempt.
    report = retry(Fragile, data_root=tmp_path, env=env)
    assert (report.applied, len(report.failing), report.missing) == (0, 1, ())
    assert [f.attempts for f in failures(tmp_path, env, "fragile")] == [2]
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, True)

    Fragile.fixed = True
    report = retry(Fragile, data_root=tmp_path, env=env)
    assert (report.applied, report.failing, report.missing) == (1, (), ())
    assert failures(tmp_path, env, "fragile") == []
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, False)
    # Retried once, applied once: a second retry and a rerun change nothing.
    assert retry(Fragile, data_root=tmp_path, env=env).applied == 0
    catch_up(Fragile, data_root=tmp_path, env=env)
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, False)


def test_raw_sql_a_failed_event_ran_is_rolled_back_with_its_savepoint(
    tmp_path: Path, env: dict[str, str], fixed_later: None
) -> None:
    refs = caught_up(tmp_path, env, FragileSql)
    _, sequence = poisoned_row(tmp_path, env)
    tables = dump(FragileSql, tmp_path, env)
    logged = [(ref, seq) for ref, seq in tables["fragile_log"]]
    assert len(logged) == sum(map(len, OUTPUTS)) - 1
    assert (refs[1], sequence) not in logged
    assert dict(tables["fragile_totals"]) == {refs[0]: 2, refs[1]: 2, refs[2]: 1}
    [failure] = failures(tmp_path, env, "fragile_sql")
    assert (failure.session, failure.sequence, failure.error_type) == (
        refs[1],
        sequence,
        "KeyError",
    )

    FragileSql.fixed = True
    assert retry(FragileSql, data_root=tmp_path, env=env).applied == 1
    tables = dump(FragileSql, tmp_path, env)
    assert (refs[1], sequence) in [tuple(row) for row in tables["fragile_log"]]
    assert dict(tables["fragile_totals"]) == {refs[0]: 2, refs[1]: 3, refs[2]: 1}


def test_a_batched_write_the_database_refuses_is_traced_to_its_event(
    tmp_path: Path, env: dict[str, str]
) -> None:
    refs = caught_up(tmp_path, env, Refused)
    notification_id, sequence = poisoned_row(tmp_path, env)
    rows = dump(Refused, tmp_path, env)["refused_outputs"]
    assert sorted(body for _, _, body in rows) == sorted(
        o for outputs in OUTPUTS for o in outputs if POISON not in o
    )
    projection = open_projection(Refused, tmp_path, env)
    try:
        [failure] = read_failures(projection.view.db, "refused")
    finally:
        projection.view.db.close()
    assert (failure.session, failure.sequence) == (refs[1], sequence)
    assert failure.notification_id == notification_id
    assert failure.error_type == "IntegrityError"


def test_with_no_failure_allowed_the_projection_stops_naming_the_event_and_keeps_the_rest(
    tmp_path: Path, env: dict[str, str]
) -> None:
    refs = record(tmp_path)
    sync_ledger(tmp_path, env)
    notification_id, sequence = poisoned_row(tmp_path, env)
    strict = {**env, "PENTRACE_ANALYTICS_MAX_FAILURES": "0", "PENTRACE_ANALYTICS_BATCH_SIZE": "3"}
    with pytest.raises(AnalyticsError) as raised:
        catch_up(Fragile, data_root=tmp_path, env=strict)
    message = str(raised.value)
    assert refs[1] in message
    assert f"sequence {sequence}" in message
    assert f"notification {notification_id}" in message
    assert "hunter2secret" not in message
    assert "projections retry fragile" in (raised.value.hint or "")
    projection = open_projection(Fragile, tmp_path, env)
    try:
        # Everything before the failed event is committed; the event itself will come again.
        before = max(n for n, _, _ in results(tmp_path, env) if n < notification_id)
        assert projection.view.max_tracking_id("fragile") == before
        assert read_failures(projection.view.db, "fragile") == []
    finally:
        projection.view.db.close()
    with pytest.raises(AnalyticsError):
        catch_up(Fragile, data_root=tmp_path, env=strict)
    catch_up(Fragile, data_root=tmp_path, env=env)  # the default limit: skip and record
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, True)
    assert [f.sequence for f in failures(tmp_path, env, "fragile")] == [sequence]


def test_a_rebuild_records_the_same_failure_and_after_the_fix_applies_the_event(
    tmp_path: Path, env: dict[str, str], fixed_later: None
) -> None:
    refs = caught_up(tmp_path, env, Fragile)
    before = failures(tmp_path, env, "fragile")
    rebuild(Fragile, data_root=tmp_path, env=env)
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, True)
    assert failures(tmp_path, env, "fragile") == before  # same event, same notification id
    Fragile.fixed = True
    rebuild(Fragile, data_root=tmp_path, env=env)
    assert failures(tmp_path, env, "fragile") == []
    assert dump(Fragile, tmp_path, env)["fragile_outputs"] == expected_counts(refs, False)
