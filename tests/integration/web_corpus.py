"""A data root for the viewer's tests: the demo session (with its subagent child, a compaction,
a retried request and approvals) plus sessions of another project and agent, and a secret."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import start_sample_session

SECRET = "sk-proj-Abc123def456ghi789jkl012mno345"
OTHER_PROJECT, OTHER_AGENT = "web_shop", "reviewer"


def build_web_corpus(path: Path) -> tuple[DataRoot, str, str]:
    """Write the corpus; return the root, the demo session's id and the second session's id."""
    root = DataRoot(path)
    main, _child = record_demo_session(root, datetime(2026, 11, 28, 9, 0, tzinfo=UTC))
    with SessionApplication(root, OTHER_PROJECT, OTHER_AGENT) as app:
        handle = start_sample_session(app)  # its meta does not matter here, its text does
        handle.record_user_input(f"Use the key {SECRET} and **review** the `diff` zebrafish")
        handle.begin_request()
        handle.record_text(
            "Looks fine.\n\n- one\n- two <script>alert(1)</script>", stop_reason="completed"
        )
        handle.end_request("completed")
        other = handle.session_id
    return root, main, other
