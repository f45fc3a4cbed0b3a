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

from pentrace import testing as pt
from tests.support import run_pentrace

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


pytestmark = pytest.mark.usefixtures("own_stores")


def leaky_session() -> list[pt.Command]:
    commands: list[pt.Command] = [pt.StartSession()]
    for number, whole in enumerate(WHOLE):
        call = f"call_{number}"
        commands += [
            pt.UserInput(f"please use {whole} for the deploy; the secretary approved it"),
            pt.BeginRequest(),
            pt.ToolCall(call, "exec_command", json.dumps({"cmd": f"deploy --verbose '{whole}'"})),
            pt.ToolOutput(call, f"step 1 ok\n{whole}\ninput_tokens: 1200"),
            pt.AssistantText("done"),
            pt.EndRequest(),
        ]
    return commands


def _ok(root: Path, *args: str) -> str:
    result = run_pentrace(root, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_no_planted_credential_reaches_a_derived_store_or_an_output(tmp_path: Path) -> None:
    (trace,) = pt.write_trace(tmp_path, leaky_session(), session_id=SID)
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
    result = run_pentrace(tmp_path, "scan", "--derived", "--json")
    assert result.returncode == 0, result.stdout
