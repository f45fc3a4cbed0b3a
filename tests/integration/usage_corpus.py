"""A data root whose activity lies in the last hour and the last day of a given moment, for the
Usage page's minute and hour buckets: the demo session (a failed request and a failed tool
call) 40 minutes before, a reviewer session under another agent and model whose requests are
a minute and a half apart (one failed), and two more reviewer sessions three and five hours
before (so the last 24 hours have at least three active hours whatever the minute)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from pentrace.cli.demo import record_demo_session, stepping_clock
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.web_corpus import OTHER_AGENT, OTHER_PROJECT, start_reviewer_session

REVIEWER = (OTHER_PROJECT, OTHER_AGENT)
REVIEWER_MODEL = "anthropic/claude-opus-5"


def _reviewer(root: DataRoot, start: datetime, rounds: int) -> None:
    with SessionApplication(
        root, *REVIEWER, clock=stepping_clock(start, timedelta(seconds=15))
    ) as app:
        handle = start_reviewer_session(app)
        for number in range(rounds):
            handle.record_user_input(f"review change {number}")
            handle.begin_request()
            handle.record_tool_call("exec_command", '{"cmd":"git diff"}', f"c{number}")
            handle.record_tool_output(f"c{number}", "diff --git a b", stop_reason="completed")
            handle.record_token_usage(
                {"total": 900 * (number + 1), "output": 100 * (number + 1)},
                {"total": 900, "output": 100, "cache_read": 300},
            )
            failed = number == 1
            handle.record_text("Looks fine.", stop_reason="error" if failed else "completed")
            handle.end_request("failed" if failed else "completed")


def build_recent_corpus(path: Path, now: datetime) -> DataRoot:
    """Write the corpus with its activity placed before ``now`` (see the module docstring)."""
    root = DataRoot(path)
    record_demo_session(root, now - timedelta(minutes=40))
    _reviewer(root, now - timedelta(minutes=12), 4)
    _reviewer(root, now - timedelta(hours=3), 2)
    _reviewer(root, now - timedelta(hours=5), 2)
    return root
