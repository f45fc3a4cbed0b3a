"""Long tool output recorded through the application: bounded in the trace, whole in scratchpad."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pentrace.errors import UnknownToolCallError
from pentrace.infrastructure.eventstore.application import SessionApplication, SessionHandle
from pentrace.infrastructure.trace.durability import Durability
from pentrace.infrastructure.trace.tool_output import archive_file_name
from tests.integration.test_session_application import Clock


def make_app(tmp_path: Path, **options: Any) -> SessionApplication:
    return SessionApplication(
        tmp_path / "data", "proj", "agent", durability=Durability.NONE, clock=Clock(), **options
    )


@pytest.fixture
def app(tmp_path: Path) -> Iterator[SessionApplication]:
    application = make_app(tmp_path)
    yield application
    application.close()


def open_call(app: SessionApplication, call_id: str = "call_0") -> SessionHandle:
    handle = app.start_session(
        provider="deepseek",
        model_id="deepseek-v4-pro",
        model_context_window=1_000_000,
        system_prompt="be careful",
        tools=[{"name": "exec_command", "description": "run"}],
    )
    handle.record_user_input("list everything")
    handle.begin_request()
    handle.record_tool_call("exec_command", '{"cmd":"find /"}', call_id)
    return handle


def recorded_output(handle: SessionHandle) -> str:
    for line in handle.trace_path.read_bytes().splitlines():
        payload = json.loads(line)["payload"]
        if payload.get("type") == "tool_call_output":
            return str(payload["output"])
    raise AssertionError("no tool_call_output in the trace")


def archive_dir(app: SessionApplication, handle: SessionHandle) -> Path:
    return app.root.truncated_output_dir(app.project, app.agent, handle.session_id)


def test_a_long_output_is_archived_whole_and_recorded_as_its_head_and_the_path(
    app: SessionApplication,
) -> None:
    handle = open_call(app)
    output = "".join(f"line {n}\n" for n in range(5_000))  # about 39,000 chars
    handle.record_tool_output("call_0", output)
    handle.end_request("completed")

    archive = archive_dir(app, handle) / archive_file_name("exec_command", "call_0")
    assert archive.read_text(encoding="utf-8") == output
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    assert recorded_output(handle) == (
        output[:16_000]
        + "\n[output truncated: exceeded 16000 chars]"
        + f"\n[output archived: {archive}]"
    )


def test_output_within_the_cap_is_recorded_unchanged_without_an_archive(
    app: SessionApplication,
) -> None:
    handle = open_call(app)
    handle.record_tool_output("call_0", "x" * 16_000)
    handle.end_request("completed")
    assert recorded_output(handle) == "x" * 16_000
    assert not archive_dir(app, handle).exists()


def test_the_cap_is_configurable_and_the_tool_name_can_be_given(tmp_path: Path) -> None:
    app = make_app(tmp_path, max_output_chars=10)
    try:
        handle = open_call(app)
        handle.record_tool_output("call_0", "0123456789abc", tool_name="shell")
        handle.end_request("completed")
        archive = archive_dir(app, handle) / archive_file_name("shell", "call_0")
        assert archive.read_text(encoding="utf-8") == "0123456789abc"
        assert recorded_output(handle).startswith("0123456789\n[output truncated: exceeded 10 ")
    finally:
        app.close()


def test_a_refused_output_leaves_no_archive_behind(app: SessionApplication) -> None:
    handle = open_call(app)
    with pytest.raises(UnknownToolCallError, match="expected a call id awaiting output"):
        handle.record_tool_output("call_unknown", "y" * 20_000)
    assert not archive_dir(app, handle).exists()
