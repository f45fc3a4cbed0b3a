"""`pentrace scan` on real data roots: findings, masked previews, exit codes, --derived --fix.

Every run is a real ``python -m pentrace`` process, so the policy each one
installs from the root's ``redaction.toml`` is its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.infrastructure.ledger import default_ledger_path
from tests.support import ledger_file_rows, run_pentrace

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
CLEAN = "session-2026-07-19-08-00-00-0badcafe"
# Built from pieces so that no whole token sits in the repository.
GITHUB = "gh" + "p_" + "R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3sXy"
STRIPE = "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
ACME = "acme" + "_" + "0123456789abcdef0123456789abcdef"


pytestmark = pytest.mark.usefixtures("own_stores")


def leaky() -> list[pt.Command]:
    return [
        pt.StartSession(),
        pt.UserInput(f"deploy with {GITHUB} please"),
        pt.BeginRequest(),
        pt.ToolCall("call_1", "exec_command", json.dumps({"cmd": f"stripe --api-key {STRIPE} ls"})),
        pt.ToolOutput("call_1", f"vendor token {ACME} accepted"),
        pt.AssistantText("done"),
        pt.EndRequest(),
    ]


def clean() -> list[pt.Command]:
    return [pt.StartSession(), pt.UserInput("list the files"), pt.AssistantText("a.txt")]


def scan(root: Path, *args: str) -> tuple[int, Any, str]:
    result = run_pentrace(root, "scan", *args, "--json")
    assert GITHUB not in result.stdout + result.stderr
    assert STRIPE not in result.stdout + result.stderr
    document = json.loads(result.stdout) if result.stdout.strip() else None
    return result.returncode, document, result.stderr


def test_a_clean_root_scans_clean_with_exit_code_0(tmp_path: Path) -> None:
    pt.write_trace(tmp_path, clean(), session_id=CLEAN)
    code, document, _ = scan(tmp_path)
    assert code == 0
    assert document["clean"] is True
    assert document["findings"] == []


def test_findings_name_rule_session_file_and_line_and_never_show_the_secret(
    tmp_path: Path,
) -> None:
    paths = pt.write_trace(tmp_path, leaky(), session_id=SID)
    pt.write_trace(tmp_path, clean(), session_id=CLEAN)
    code, document, _ = scan(tmp_path)
    assert code == 1
    findings = document["findings"]
    assert {f["session_id"] for f in findings} == {SID}
    by_rule = {f["rule"]: f for f in findings}
    assert {"github_token", "secret"} <= set(by_rule)
    github = by_rule["github_token"]
    assert github["file"] == str(paths[0])
    line = Path(github["file"]).read_text("utf-8").splitlines()[github["line"] - 1]
    assert GITHUB in line  # the line named is the one that holds it
    assert "[redacted:github_token]" in github["preview"]
    # One session by id: the other one is not read.
    code, only, _ = scan(tmp_path, CLEAN)
    assert (code, only["findings"]) == (0, [])


def test_a_rule_added_later_finds_what_derived_stores_hold_and_fix_rebuilds_them(
    tmp_path: Path,
) -> None:
    pt.write_trace(tmp_path, leaky(), session_id=SID)
    assert run_pentrace(tmp_path, "ledger", "sync").returncode == 0
    assert run_pentrace(tmp_path, "search", "vendor").returncode == 0
    assert ACME.encode() in _ledger_bytes(tmp_path)  # no rule knew the format yet
    code, document, _ = scan(tmp_path, "--derived")
    assert (code, document["findings"]) == (0, [])

    (tmp_path / "redaction.toml").write_text(
        '[[rules]]\nid = "acme_token"\nregex = \'acme_[0-9a-f]{32}\'\nkeywords = ["acme_"]\n'
    )
    code, document, _ = scan(tmp_path, "--derived")
    assert code == 1
    stores = {f["store"] for f in document["findings"]}
    assert {"ledger", "search"} <= stores
    assert {f["rule"] for f in document["findings"]} == {"acme_token"}
    assert all(ACME not in f["preview"] for f in document["findings"])

    code, document, _ = scan(tmp_path, "--derived", "--fix")
    assert code == 0
    assert {"ledger", "search"} <= set(document["fixed"])
    assert document["remaining"] == 0
    assert ACME.encode() not in _ledger_bytes(tmp_path)
    code, document, _ = scan(tmp_path, "--derived")
    assert (code, document["findings"]) == (0, [])
    # The trace itself is the source of truth and keeps its text.
    code, document, _ = scan(tmp_path)
    assert "acme_token" in {f["rule"] for f in document["findings"]}


def test_a_rule_that_cannot_compile_names_the_rule_and_the_file_and_exits_2(
    tmp_path: Path,
) -> None:
    pt.write_trace(tmp_path, clean(), session_id=CLEAN)
    rules = tmp_path / "redaction.toml"
    rules.write_text('[[rules]]\nid = "broken"\nregex = "acme_[0-9"\n')
    result = run_pentrace(tmp_path, "scan")
    assert result.returncode == 2
    assert str(rules) in result.stderr
    assert "rule 'broken'" in result.stderr
    assert "Traceback" not in result.stderr


def test_fix_without_derived_is_a_usage_error(tmp_path: Path) -> None:
    result = run_pentrace(tmp_path, "scan", "--fix")
    assert result.returncode == 2
    assert "--fix needs --derived" in result.stderr


def _ledger_bytes(root: Path) -> bytes:
    return b"\n".join(data for _, _, data in ledger_file_rows(default_ledger_path(root)))


def test_redaction_rules_given_on_the_command_line_apply_and_a_missing_file_is_an_error(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    pt.write_trace(root, leaky(), session_id=SID)
    rules = tmp_path / "elsewhere.toml"
    rules.write_text("[[rules]]\nid = \"acme_token\"\nregex = 'acme_[0-9a-f]{32}'\n")
    result = run_pentrace(root, "--redaction-rules", str(rules), "scan", "--json")
    assert result.returncode == 1
    assert "acme_token" in {f["rule"] for f in json.loads(result.stdout)["findings"]}
    # The ledger opened after the option was read indexes with the same rules.
    assert run_pentrace(root, "--redaction-rules", str(rules), "ledger", "sync").returncode == 0
    assert ACME.encode() not in _ledger_bytes(root)
    missing = run_pentrace(root, "--redaction-rules", str(tmp_path / "nope.toml"), "scan")
    assert missing.returncode == 2
    assert "nope.toml: the redaction rules file does not exist" in missing.stderr
