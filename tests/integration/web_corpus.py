"""A data root for the viewer's tests: the demo session (with its subagent child, a compaction,
a retried request and approvals) plus sessions of another project and agent, and a secret."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.sessions.handle import SessionHandle
from pentrace.infrastructure.storage.layout import DataRoot

SECRET = "sk-proj-Abc123def456ghi789jkl012mno345"
OTHER_PROJECT, OTHER_AGENT = "web_shop", "reviewer"


def start_reviewer_session(app: SessionApplication) -> SessionHandle:
    """A session of the code reviewer: ``anthropic/claude-opus-5`` with one tool."""
    return app.start_session(
        provider="anthropic",
        model_id="claude-opus-5",
        model_context_window=200_000,
        system_prompt="You review code.",
        workspace=None,
        tools=[{"name": "exec_command", "description": "Run a command."}],
    )


def build_web_corpus(path: Path) -> tuple[DataRoot, str, str]:
    """Write the corpus; return the root, the demo session's id and the second session's id."""
    root = DataRoot(path)
    main, _child = record_demo_session(root, datetime(2026, 11, 28, 9, 0, tzinfo=UTC))
    with SessionApplication(root, OTHER_PROJECT, OTHER_AGENT) as app:
        handle = start_reviewer_session(app)
        handle.record_user_input(f"Use the key {SECRET} and **review** the `diff` zebrafish")
        handle.begin_request()
        handle.record_text(
            "Looks fine.\n\n- one\n- two <script>alert(1)</script>", stop_reason="completed"
        )
        handle.end_request("completed")
        other = handle.session_id
    return root, main, other
