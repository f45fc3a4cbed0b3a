"""open_recording: saving a session indexes it into the ledger at once and publishes it live."""

from __future__ import annotations

import json
import logging
import queue
import re
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.eventstore.recording import open_recording
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.infrastructure.ledger.settings import ENV_TABLE_PREFIX
from tests.integration.ledger_backends import LedgerBackend
from tests.support import record_answered_turn, start_sample_session


def _record_one_request(
    recording_root: Path, settings: LedgerSettings | None
) -> tuple[str, list[str]]:
    workspace = recording_root / "work"
    workspace.mkdir(exist_ok=True)
    with open_recording(recording_root / "data", "proj", "agent", ledger_settings=settings) as rec:
        live = rec.subscribe_live()
        handle = start_sample_session(rec.application, workspace=workspace)
        record_answered_turn(handle, "say hi; my key is sk-proj-Ab3dEfGh1jKlMn0pQrStUvWx9z", "hi")
        handle.close()
        seen = []
        while True:
            try:
                seen.append(live.get_nowait().event_id)
            except queue.Empty:  # everything published has been read
                break
        return handle.session_id, seen


def test_a_saved_request_is_in_the_ledger_and_published_live(tmp_path: Path) -> None:
    settings = LedgerSettings(path=tmp_path / "ledger.db")
    session_id, live_ids = _record_one_request(tmp_path, settings)

    expected = [SessionKey("proj", "agent", session_id).event_id(n) for n in range(1, 7)]
    assert live_ids == expected
    ledger = RuntimeEventLedger.open(tmp_path / "data", settings)
    try:
        assert [entry.event_id for entry in ledger.newest(10)] == expected
        stored = b"".join(
            entry.event_json.encode() if isinstance(entry.event_json, str) else entry.event_json
            for entry in ledger.newest(10)
        )
        assert b"sk-proj-Ab3dEfGh1jKlMn0pQrStUvWx9z" not in stored
    finally:
        ledger.close()


def test_a_table_prefix_from_the_environment_is_where_the_cli_reads_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger_backend: LedgerBackend
) -> None:
    # open_recording once ignored PENTRACE_LEDGER_TABLE_PREFIX: the harness wrote
    # unprefixed tables that `pentrace ledger` (which honours it) never read.
    prefix = f"{ledger_backend.prefix}rec_"
    for name, value in {**ledger_backend.env(), ENV_TABLE_PREFIX: prefix}.items():
        monkeypatch.setenv(name, value)
    session_id, _ = _record_one_request(tmp_path, None)
    ledger_backend.database(prefix=prefix)  # so that a shared server's tables are dropped
    expected = [SessionKey("proj", "agent", session_id).event_id(n) for n in range(1, 7)]

    def cli(*args: str) -> str:
        result = CliRunner().invoke(
            app, ["--data-root", str(tmp_path / "data"), "ledger", *args], catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        return result.output

    tailed = [json.loads(line) for line in cli("tail", "-n", "10", "--json").splitlines()]
    assert [line["event"]["id"] for line in tailed] == expected
    stats = json.loads(cli("stats", "--json"))
    assert stats["rows"] == 6
    # Nothing went to the unprefixed tables.
    bare = ledger_backend.database(prefix="")
    assert RuntimeEventLedger(bare, LedgerSettings().with_limits_off()).count() == 0


def test_recording_goes_on_when_the_ledger_cannot_be_opened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the ledger's folder should be")
    broken = LedgerSettings(path=blocker / "ledger.db")

    with caplog.at_level(logging.WARNING):
        session_id, live_ids = _record_one_request(tmp_path, broken)

    assert len(live_ids) == 6  # live delivery does not depend on the ledger
    assert "recording without the ledger" in caplog.text
    # The trace is the source of truth: a sync indexes what the ledger missed.
    settings = LedgerSettings(path=tmp_path / "ledger.db")
    ledger = RuntimeEventLedger.open(tmp_path / "data", settings)
    try:
        sync(ledger, tmp_path / "data")
        assert ledger.contains(SessionKey("proj", "agent", session_id).event_id(6))
    finally:
        ledger.close()


def test_the_recording_example_in_docs_ledger_md_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "ledger.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    examples = [block for block in blocks if "open_recording" in block]
    assert len(examples) == 1
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for name in (
        "PENTRACE_LEDGER_URL",
        "PENGUIN_RUNTIME_EVENT_LEDGER_URL",
        "PENGUIN_RUNTIME_EVENT_LEDGER_PATH",
    ):
        monkeypatch.delenv(name, raising=False)
    exec(compile(examples[0], f"{page}:open_recording", "exec"), {"__name__": "docs"})  # noqa: S102  # our own docs
