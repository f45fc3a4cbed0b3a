"""A read model built by an older version of its projection (ADR 0054) is found, refused by a
runner with the command that fixes it, and rebuilt from the traces by `pentrace stats`; on a
real SQLite file and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from pentrace.cli.demo import record_demo_session
from pentrace.errors import AnalyticsError
from pentrace.infrastructure.analytics.builtin.sessions import SessionActivity
from pentrace.infrastructure.analytics.database import AnalyticsDatabase, scheme_of
from pentrace.infrastructure.analytics.runner import AnalyticsRunner
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import cli_json, sync_ledger

# What version 1 of the built-ins lacked: the per-minute tables and two columns ...
_VERSION_1 = (
    "DROP TABLE act_minutes",
    "DROP TABLE tok_minutes",
    "DROP TABLE tool_minutes",
    "ALTER TABLE tool_open DROP COLUMN minute",
    # ... and version 2 of `tools` the calls per model.
    "DROP TABLE tool_sessions",
    "ALTER TABLE tool_open DROP COLUMN provider",
    "ALTER TABLE tool_open DROP COLUMN model",
    "ALTER TABLE act_sessions DROP COLUMN current_provider",
    # Version 1 recorded the key scheme alone.
    "UPDATE analytics_identity SET scheme = '2'",
)


def _needs_rebuild(root: Path) -> dict[str, bool]:
    rows = cli_json(root, "projections", "status")["projections"]
    return {row["name"]: row["needs_rebuild"] for row in rows}


def test_read_models_of_an_older_projection_version_are_rebuilt_before_stats_reads_them(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "data"
    record_demo_session(DataRoot(root), datetime(2026, 11, 28, 23, 59, 50, tzinfo=UTC))
    sync_ledger(root, env)
    wanted = {
        kind: cli_json(root, "stats", kind, "--by", "minute")
        for kind in ("requests", "tokens", "tools")
    }
    assert len(wanted["requests"]["rows"]) >= 2  # the session runs across midnight
    assert {row["key"][:10] for row in wanted["requests"]["rows"]} == {
        "2026-11-28",
        "2026-11-29",
    }
    assert _needs_rebuild(root) == {"tokens": False, "tools": False, "sessions": False}

    db = AnalyticsDatabase(env["PENTRACE_ANALYTICS_URL"])
    try:
        with db.writing("make the read models what version 1 left") as conn:
            for statement in _VERSION_1:
                conn.execute(text(statement))
    finally:
        db.close()
    assert _needs_rebuild(root) == {"tokens": True, "tools": True, "sessions": True}
    with pytest.raises(AnalyticsError, match="another version of its projection") as refused:
        AnalyticsRunner(SessionActivity, data_root=root)
    assert f"expected {scheme_of(SessionActivity.version)!r}" in str(refused.value)
    assert refused.value.hint == (
        "rebuild it from the traces: `pentrace projections rebuild sessions`"
    )

    for kind, document in wanted.items():
        assert cli_json(root, "stats", kind, "--by", "minute") == document, kind
    assert _needs_rebuild(root) == {"tokens": False, "tools": False, "sessions": False}
