"""Replay shows what a reader needs: MCP connect results, images in tool output, retry errors."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(2040)).decode()


def _record(root: Path) -> str:
    ticks = [datetime(2026, 11, 3, 10, tzinfo=UTC)]

    def clock() -> datetime:
        ticks[0] += timedelta(milliseconds=500)
        return ticks[0]

    with SessionApplication(DataRoot(root), "proj", "agent", clock=clock) as application:
        handle = application.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s",
            workspace=None, tools=[{"name": "screenshot", "description": "Take one."}],
        )  # fmt: skip
        handle.begin_mcp_connect(["files", "browser"])
        handle.end_mcp_connect(
            "partial",
            [
                {"server": "files", "transport": "stdio", "status": "connected",
                 "duration_ms": 40, "tools": 3},
                {"server": "browser", "transport": "http", "status": "failed",
                 "duration_ms": 5000, "error": "connect timeout after 5 s"},
            ],
        )  # fmt: skip
        handle.record_user_input("take a screenshot")
        handle.begin_request()
        handle.end_request("failed", error_message="provider overloaded (HTTP 529)", attempt=1)
        handle.begin_request()
        handle.record_tool_call("screenshot", "{}", "call_1", stop_reason="completed")
        handle.decide_approval("call_1", "allow")
        handle.record_tool_output("call_1", "saved", images=[PNG, "https://example.org/a.png"])
        handle.record_text("done", stop_reason="completed")
        handle.end_request("completed")
        handle.close()
        return handle.session_id


def test_replay_shows_mcp_results_images_and_why_a_request_was_retried(tmp_path: Path) -> None:
    sid = _record(tmp_path)
    result = CliRunner().invoke(app, ["--data-root", str(tmp_path), "replay", sid[-8:]])
    assert result.exit_code == 0, result.output
    text = result.stdout

    assert "mcp: connecting to files, browser" in text
    assert "mcp servers connected: partial" in text
    assert "  files (stdio): connected, 3 tool(s), 40 ms" in text
    assert "  browser (http): failed, 5000 ms - connect timeout after 5 s" in text
    assert "x request failed (attempt 1): provider overloaded (HTTP 529)" in text
    assert "      [2 image(s) in the output: image/png, 2.0 KB; https://example.org/a.png]" in text
    assert "base64" not in text  # the bytes themselves are never printed
