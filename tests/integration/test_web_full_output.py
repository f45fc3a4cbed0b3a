"""The Session page links a truncated tool output to its archived full text, served redacted by
default; the verbatim bytes only to a request with the token (ADR 0012), over real HTTP."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.sse_harness import Server

SECRET = "sk-proj-Qw9eRt7yUi5oPa3sDf1gHj2kLz4xCv"
TOKEN = "tok-Full8nQ2wE9rT4yU6iO1pA3sD5"


def _record(root: DataRoot) -> tuple[str, str]:
    """A session whose one tool output is longer than the cap; its tail holds a secret."""
    output = "line of build output\n" * 20 + f"export OPENAI_API_KEY={SECRET}\nTHE END\n"
    with SessionApplication(root, "proj", "agent", max_output_chars=100) as application:
        handle = application.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s"
        )
        handle.record_user_input("build it")
        handle.begin_request()
        handle.record_tool_call("exec_command", "{}", "call-1")
        handle.record_tool_output("call-1", output)
        handle.end_request("completed")
        handle.save()
        return handle.session_id, output


def test_a_truncated_output_links_to_its_full_text_redacted_unless_raw_with_the_token(
    tmp_path: Path,
) -> None:
    root = DataRoot(tmp_path / "data")
    session_id, output = _record(root)
    page_path = f"/web/sessions/proj/agent/{session_id}"
    plain = Server(root.path).start()
    try:
        page = httpx.get(plain.url + page_path, timeout=30).text
        link = re.search(
            r'<a href="([^"]+/output/exec_command-[0-9a-f]{16}\.log)">full output', page
        )
        assert link is not None, page
        full = httpx.get(plain.url + link.group(1), timeout=30)
        raw_refused = httpx.get(plain.url + link.group(1) + "?raw=1", timeout=30)
        outside = httpx.get(plain.url + page_path + "/output/..%2F..%2Fsecret.log", timeout=30)
        missing = httpx.get(plain.url + page_path + "/output/tool-0123456789abcdef.log", timeout=30)
    finally:
        plain.stop()
    assert "THE END" not in page  # the page holds the head only
    assert full.status_code == 200, full.text
    assert full.headers["x-pentrace-redacted"] == "true"
    assert full.text.startswith("line of build output\n")
    assert "THE END" in full.text  # the whole output, past the cap
    assert SECRET not in full.text
    assert "OPENAI_API_KEY=" in full.text  # the text around the secret is kept
    assert raw_refused.status_code == 403
    assert SECRET not in raw_refused.text
    assert "bearer token" in raw_refused.json()["error"]["message"]
    assert outside.status_code in (400, 404)
    assert missing.status_code == 404

    guarded = Server(root.path, env={"PENTRACE_API_TOKEN": TOKEN}).start(token=TOKEN)
    try:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        raw = httpx.get(guarded.url + link.group(1) + "?raw=1", headers=bearer, timeout=30)
        redacted = httpx.get(guarded.url + link.group(1), headers=bearer, timeout=30)
    finally:
        guarded.stop()
    assert raw.status_code == 200, raw.text
    assert raw.headers["x-pentrace-redacted"] == "false"
    assert raw.text == output
    assert SECRET not in redacted.text
