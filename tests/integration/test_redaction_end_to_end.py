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
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pentrace import testing as pt
from pentrace.infrastructure.ledger import default_ledger_path
from tests.property.test_redaction_planted import planted
from tests.support import cli_ok, ledger_file_rows, run_pentrace

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


# The leaks of issue #32: an argument list with the secret flag first, the same list quoted
# inside free text and inside a tool call's JSON ``arguments``, and ``key=`` in text.
ARGV_SECRET = "sk-argv-secret-789"
QUOTED_SECRET = "M0ODq8zLx7Pv2RtWn4"
KEY_SECRET = "AIzaSyFAKE0planted0value"
PLANTED = [ARGV_SECRET, QUOTED_SECRET, KEY_SECRET]


def planted_session() -> list[pt.Command]:
    argv = ["--api-key", ARGV_SECRET, "--verbose"]
    quoted = f'run ["deploy", "--api-key", "{QUOTED_SECRET}"]'
    return [
        pt.StartSession(),
        pt.UserInput(f"{quoted} and key={KEY_SECRET} please"),
        pt.BeginRequest(),
        pt.ToolCall("call_1", "exec_command", json.dumps({"argv": argv})),
        pt.ToolOutput("call_1", f"ran: {quoted}"),
        pt.ToolCall("call_2", "exec_command", json.dumps({"cmd": quoted})),
        pt.ToolOutput("call_2", "deployed"),
        pt.AssistantText("deployed"),
        pt.EndRequest(),
    ]


def test_planted_argv_and_key_values_reach_no_ledger_row_search_index_or_redacted_export(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    (trace,) = pt.write_trace(root, planted_session(), session_id=SID)
    assert all(secret in trace.read_text("utf-8") for secret in PLANTED)
    cli_ok(root, "ledger", "sync")
    rows = ledger_file_rows(default_ledger_path(root))
    assert len(rows) == 10  # session_meta, tool_list_ready and the eight above
    export = tmp_path / "export.jsonl"
    cli_ok(root, "export", SID, "--redacted", "-o", str(export))
    found = cli_ok(root, "search", "deploy", "--json", "--limit", "50").stdout
    assert json.loads(found)["hits"], "the search index holds the session"
    stores = [p for p in root.rglob("*") if p.is_file() and p != trace and p.suffix != ".lock"]
    assert any("search" in p.name for p in stores), stores
    for secret in PLANTED:
        assert all(secret.encode() not in event for _, _, event in rows), secret
        assert secret not in export.read_text("utf-8")
        assert secret not in found
        for path in stores:
            assert secret.encode() not in path.read_bytes(), (secret, path)
    assert b"[redacted" in b"".join(event for _, _, event in rows)


def _generated_session(cases: list[tuple[Any, str]]) -> list[pt.Command]:
    """Each generated record (a planted credential in one position and encoding) as user
    text, a tool call's JSON ``arguments``, its output and the assistant's text."""
    commands: list[pt.Command] = [pt.StartSession()]
    for number, (record, _) in enumerate(cases):
        text = json.dumps(record, ensure_ascii=False)
        commands += [
            pt.UserInput(text),
            pt.BeginRequest(),
            pt.ToolCall(f"call_{number}", "exec_command", text),
            pt.ToolOutput(f"call_{number}", f"ran {text}"),
            pt.AssistantText(text),
            pt.EndRequest(),
        ]
    return commands


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(planted(), min_size=4, max_size=12))
def test_no_generated_planted_credential_reaches_the_ledger_the_search_index_or_an_export(
    tmp_path_factory: pytest.TempPathFactory, cases: list[tuple[Any, str]]
) -> None:
    """The generated records of ``test_redaction_planted`` (credentials in every position and
    encoding, ``["api_key", "sk-..."]`` pairs among them) through the real stores: no planted
    value survives in a ledger row, the search index, the read models or a redacted export."""
    base = tmp_path_factory.mktemp("planted")
    root = base / "data"
    (trace,) = pt.write_trace(root, _generated_session(cases), session_id=SID)
    cli_ok(root, "ledger", "sync")
    rows = ledger_file_rows(default_ledger_path(root))
    assert len(rows) >= 6 * len(cases)
    export = base / "export.jsonl"
    cli_ok(root, "export", SID, "--redacted", "-o", str(export))
    found = cli_ok(root, "search", "ran", "--json", "--limit", "500").stdout
    cli_ok(root, "stats", "tools", "--json")
    stores = [p.read_bytes() for p in root.rglob("*") if p.is_file() and p != trace]
    outputs = [export.read_text("utf-8"), found, *(event.decode() for _, _, event in rows)]
    # Every planted value starts with a prefix nothing else holds (``_distinct``); the search
    # index keeps words lowercased and cut at punctuation, so the prefix is what is looked for.
    assert all(value.startswith("Zq9") for _, value in cases)
    for text in outputs:
        assert "zq9" not in text.lower()
    for data in stores:
        assert b"zq9" not in data.lower()
