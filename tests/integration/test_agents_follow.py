"""Other agents' stores followed live (issue #28): a line an agent appends reaches the
ledger and a connected SSE client, through ``pentrace serve --ingest --agents`` and
``pentrace ingest --follow --agents``, real processes both.  No timing is asserted
(``benchmarks/agents_latency.py`` measures it); generous guards stop a hang.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.foreign_logs import ClaudeLog, CodexLog, claude_turn, codex_turn, jsonl
from tests.integration.ingest_harness import FollowerProcess, append, wait_until
from tests.integration.sse_harness import Frame, Server, SseClient
from tests.support import assert_clean_error, clean_env, run_pentrace

SID = "0f0f0f0f-0000-4000-8000-000000000001"


def test_a_line_claude_code_appends_reaches_an_sse_client(tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    store = claude / "projects" / "-home-u-app"
    log = ClaudeLog(SID)
    claude_turn(log, 0)
    path = log.write(store)
    root = tmp_path / "data"
    root.mkdir()
    env = {"CLAUDE_CONFIG_DIR": str(claude), "HOME": str(tmp_path / "home")}
    server = Server(root, env=env, args=["--ingest", "--agents", "claude-code"]).start()
    client = SseClient(server.url + "/api/v1/events/sse")
    try:
        before = len(log.rows)
        log.prompt("one more thing")
        log.answer([{"type": "text", "text": "appended answer"}], message_id="msg_live",
                   request_id="req_live", stop_reason="end_turn")  # fmt: skip
        frames: list[Frame] = []
        append(path, jsonl(log.rows[before:]))
        while not any("appended answer" in str(frame.data) for frame in frames):
            frames.extend(client.events(1, timeout=60))
    finally:
        client.close()
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(60)
    sessions = {frame.data["properties"]["sessionID"] for frame in frames}
    assert sessions == {SID}
    assert code == 0, server.output()


def test_ingest_follows_a_codex_rollout_as_it_grows_and_after_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    log = CodexLog("0199aaaa-0000-7000-8000-00000000f011")
    log.meta()
    log.context("gpt-5")
    codex_turn(log, 0)
    path = log.write(home)
    root, ledger = tmp_path / "data", tmp_path / "ledger.db"
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path / "home")}

    def texts() -> list[str]:
        found = run_pentrace(root, "replay", log.session_id, env=clean_env(**env))
        return [line for line in found.stdout.splitlines() if line.startswith("assistant:")]

    follower = FollowerProcess(root, ledger, "--agents", "codex", env=env)
    try:
        follower.wait_for_event("started")
        wait_until(lambda: texts() == ["assistant: done 0"], "the first turn")
        before = len(log.rows)
        codex_turn(log, 1, calls=2)
        append(path, jsonl(log.rows[before:]))
        wait_until(lambda: texts() == ["assistant: done 0", "assistant: done 1"], "turn 1")
    finally:
        follower.process.send_signal(signal.SIGKILL)
        follower.process.wait(60)

    before = len(log.rows)
    codex_turn(log, 2)
    append(path, jsonl(log.rows[before:]))
    restarted = FollowerProcess(root, ledger, "--agents", "codex", env=env)
    try:
        wait_until(lambda: len(texts()) == 3, "turn 2, after a restart")
    finally:
        restarted.process.send_signal(signal.SIGTERM)
        restarted.process.wait(60)
    assert texts() == ["assistant: done 0", "assistant: done 1", "assistant: done 2"]


def test_an_unknown_agent_to_follow_is_a_clear_error(tmp_path: Path) -> None:
    done = run_pentrace(tmp_path, "ingest", "--agents", "cursor", env=clean_env())

    assert_clean_error(done, 2, "unknown agent 'cursor'")
