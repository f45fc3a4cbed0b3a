"""The Usage page says when its figures are incomplete: a built-in projection skipped an event
its handler failed on (ADR 0032), shown as `pentrace stats` warns, over real HTTP."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.trace.durability import Durability
from tests.integration.sse_harness import Server
from tests.integration.test_session_application import Clock
from tests.support import sync_ledger

PG_URL = os.environ.get("PENTRACE_TEST_DATABASE_URL")
pytestmark = [
    pytest.mark.postgres,  # a read model's VARCHAR(200) makes a built-in handler fail
    pytest.mark.skipif(not PG_URL, reason="PostgreSQL runs need PENTRACE_TEST_DATABASE_URL"),
]


def _record(root: Path, tool: str) -> str:
    """One session of one request that calls ``tool``; its ``project/agent/id``."""
    with SessionApplication(
        root, "proj", "agent", durability=Durability.NONE, clock=Clock()
    ) as application:
        handle = application.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s"
        )
        handle.record_user_input(f"call {tool[:20]}")
        handle.begin_request()
        handle.record_tool_call(tool, "{}", "c0")
        handle.end_request("completed")
        handle.save()
        return f"proj/agent/{handle.session_id}"


def test_the_usage_page_warns_that_its_figures_leave_out_a_skipped_event(
    tmp_path: Path, env: dict[str, str]
) -> None:
    if "PENTRACE_LEDGER_URL" not in env:
        pytest.skip("only PostgreSQL enforces the length that makes the handler fail")
    _record(tmp_path, "exec_command")
    sync_ledger(tmp_path, env)
    server = Server(tmp_path, env=env).start()
    try:
        clean = httpx.get(f"{server.url}/web/usage?range=all", timeout=30)
        ref = _record(tmp_path, "t" * 300)  # longer than tool_daily.tool holds
        sync_ledger(tmp_path, env)
        warned = httpx.get(f"{server.url}/web/usage?range=all", timeout=30)
    finally:
        server.stop()
    assert clean.status_code == 200, clean.text
    assert "incomplete" not in clean.text
    assert warned.status_code == 200, warned.text
    assert "These figures are incomplete" in warned.text
    assert "projection &#x27;tools&#x27; skipped 1 event(s)" in warned.text
    assert ref in warned.text
    assert "pentrace projections status tools --failures" in warned.text
