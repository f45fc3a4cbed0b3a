"""Every provider credential, planted in a real trace, reaches no derived store and no output.

The provider corpus (``tests/fixtures/redaction_providers.json``) goes into
user text, tool arguments and tool output of one session; then real
``pentrace`` processes index it (ledger, search index, read models) and print
it every way an operator can (ledger tail, search, redacted export, report,
stats).  No secret may appear in any of them or in any file under the data
root but the trace itself, and benign values (token telemetry, ``secretary``)
must stay visible.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pentrace.testing import (
    AssistantText,
    BeginRequest,
    Command,
    EndRequest,
    StartSession,
    ToolCall,
    ToolOutput,
    UserInput,
    write_trace,
)
from tests.integration.cli_sessions_corpus import run_process

SID = "session-2026-07-18-11-10-22-5ec7e75a"
CORPUS = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "redaction_providers.json").read_text("utf-8")
)
SECRETS = sorted(
    {
        str(case["parts"][case["secret_part"]]) if "secret_part" in case else "".join(case["parts"])
        for case in CORPUS["cases"]
    }
)
WHOLE = ["".join(case["parts"]) for case in CORPUS["cases"]]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "PENGUIN_RUNTIME_EVENT_LEDGER_PATH",
        "PENTRACE_LEDGER_URL",
        "PENTRACE_REDACTION_RULES",
    ):
        monkeypatch.delenv(name, raising=False)


def leaky_session() -> list[Command]:
    commands: list[Command] = [StartSession()]
    for number, whole in enumerate(WHOLE):
        call = f"call_{number}"
        commands += [
            UserInput(f"please use {whole} for the deploy; the secretary approved it"),
            BeginRequest(),
            ToolCall(call, "exec_command", json.dumps({"cmd": f"deploy --verbose '{whole}'"})),
            ToolOutput(call, f"step 1 ok\n{whole}\ninput_tokens: 1200"),
            AssistantText("done"),
            EndRequest(),
        ]
    return commands


def _ok(root: Path, *args: str) -> str:
    result = run_process(root, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_no_planted_credential_reaches_a_derived_store_or_an_output(tmp_path: Path) -> None:
    (trace,) = write_trace(tmp_path, leaky_session(), session_id=SID)
    written = trace.read_text("utf-8")
    assert all(json.dumps(whole)[1:-1] in written for whole in WHOLE)
    report = tmp_path.parent / f"{tmp_path.name}-report.html"
    export = tmp_path.parent / f"{tmp_path.name}-export.jsonl"
    outputs = [
        _ok(tmp_path, "ledger", "sync"),
        _ok(tmp_path, "ledger", "tail", "-n", "2000", "--json"),
        _ok(tmp_path, "search", "deploy", "--json", "--limit", "500"),
        _ok(tmp_path, "search", "step", "--json", "--limit", "500"),
        _ok(tmp_path, "export", SID, "--redacted", "-o", str(export)),
        _ok(tmp_path, "report", SID, "-o", str(report)),
        _ok(tmp_path, "stats", "tokens", "--json"),
        _ok(tmp_path, "stats", "tools", "--json"),
    ]
    outputs += [export.read_text("utf-8"), report.read_text("utf-8")]
    stores = [
        path.read_bytes()
        for path in tmp_path.rglob("*")
        if path.is_file() and path != trace and path.suffix != ".lock"
    ]
    assert stores, "nothing was indexed"
    for secret in SECRETS:
        for text in outputs:
            assert secret not in text
        for data in stores:
            assert secret.encode() not in data
    tail = outputs[1]
    assert "secretary approved it" in tail
    assert "input_tokens: 1200" in tail
    # Nothing the current policy would still hide sits in a derived store.
    result = run_process(tmp_path, "scan", "--derived", "--json")
    assert result.returncode == 0, result.stdout
