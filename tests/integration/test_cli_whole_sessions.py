"""A session as a whole, from the command line: export every shard, import it back, import a
copy under a new id, redact a replay, and read a trace file that lies outside the root.

The session is the demo's (two shards: a compaction rotated the trace), recorded by
the library as a harness would, on a real data root; commands run in process.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.cli.app import main
from pentrace.cli.demo import record_demo_session
from pentrace.domain.records import TraceRecord
from pentrace.infrastructure.storage.layout import DataRoot
from tests.support import cli, cli_json, cli_ok

SECRET = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"
pytestmark = pytest.mark.usefixtures("own_stores")


@pytest.fixture
def demo(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "data"
    main_id, _ = record_demo_session(DataRoot(root), datetime(2026, 11, 3, 9, tzinfo=UTC))
    shards = [
        shard.path for shard in DataRoot(root).find_shards("demo_project", "demo_agent", main_id)
    ]
    assert len(shards) == 2
    return {"root": root, "id": main_id, "shards": shards}


def code(result: Any) -> int:
    """The exit code ``pentrace`` exits with: a library error's own (main prints it)."""
    error = result.exception
    return int(getattr(error, "exit_code", result.exit_code))


def metas(path: Path) -> list[dict[str, Any]]:
    """The session_meta payloads of a trace file, in order."""
    lines = path.read_bytes().splitlines()
    values = [TraceRecord(line, n).value() for n, line in enumerate(lines, start=1)]
    return [v["payload"] for v in values if v.get("type") == "session_meta"]


def test_export_of_a_rotated_session_names_the_shard_written_and_how_to_get_the_rest(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "latest.jsonl"
    result = cli(demo["root"], "export", demo["id"], "-o", str(out))

    assert result.exit_code == 0, result.output
    assert out.read_bytes() == demo["shards"][1].read_bytes()
    note, hint = result.stderr.splitlines()
    assert note.startswith("exported shard 002 of 2, the latest: the context since the last ")
    assert f"of {demo['id']} (verbatim)" in note
    assert hint.startswith("hint: the rest of the session: --shard all")


def test_export_shard_all_then_import_brings_back_every_shard(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "whole.jsonl"
    result = cli(demo["root"], "export", demo["id"], "--shard", "all", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"exported shards 001-002 (all 2) of {demo['id']}")
    assert out.read_bytes() == b"".join(path.read_bytes() for path in demo["shards"])

    imported = cli_json(demo["root"], "import", str(out), "-p", "elsewhere", "-a", "copy")

    assert imported["session_id"] == demo["id"]
    assert imported["source_session_id"] is None
    copies = [Path(path) for path in imported["paths"]]
    assert [p.name for p in copies] == [p.name for p in demo["shards"]]
    assert [p.read_bytes() for p in copies] == [p.read_bytes() for p in demo["shards"]]
    # Resume reads the same context from the copy as from the original.
    original = cli_ok(
        demo["root"], "resume-check", f"demo_project/demo_agent/{demo['id']}", "--json"
    )
    copy = cli_ok(demo["root"], "resume-check", f"elsewhere/copy/{demo['id']}", "--json")
    assert json.loads(copy.stdout) == json.loads(original.stdout)


def test_import_new_id_takes_a_copy_of_an_id_the_agent_has_and_records_its_origin(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "whole.jsonl"
    cli_ok(demo["root"], "export", demo["id"], "--shard", "all", "-o", str(out))
    refused = cli(demo["root"], "import", str(out), "-p", "demo_project", "-a", "demo_agent")
    assert code(refused) == 2

    copy = cli_json(
        demo["root"], "import", str(out), "-p", "demo_project", "-a", "demo_agent", "--new-id"
    )

    assert copy["session_id"] != demo["id"]
    assert copy["source_session_id"] == demo["id"]
    origin = {"session_id": demo["id"], "file": str(out.absolute())}
    paths = [Path(path) for path in copy["paths"]]
    for path, source in zip(paths, demo["shards"], strict=True):
        assert [m["session_id"] for m in metas(path)] == [copy["session_id"]]
        assert [m["imported_from"] for m in metas(path)] == [origin]
        # Only the session_meta line changed.
        assert path.read_bytes().splitlines()[1:] == source.read_bytes().splitlines()[1:]
    shown = cli_json(demo["root"], "show", copy["session_id"])
    assert shown["summary"]["imported_from"] == origin
    text = cli_ok(demo["root"], "show", copy["session_id"]).stdout
    assert f"imported     from session {demo['id']} in {out.absolute()}" in text
    listed = cli_json(demo["root"], "list")["sessions"]
    assert {row["session_id"] for row in listed} >= {demo["id"], copy["session_id"]}


def test_one_file_holds_one_session(demo: dict[str, Any], tmp_path: Path) -> None:
    first, second = demo["shards"]
    mixed = tmp_path / "mixed.jsonl"
    other = second.read_bytes().replace(
        demo["id"].encode(), b"session-2026-01-01-00-00-00-00000000"
    )
    mixed.write_bytes(first.read_bytes() + other)

    result = cli(demo["root"], "import", str(mixed), "-p", "p", "-a", "a")

    assert code(result) == 1
    assert "expected every session_meta to name session" in str(result.exception)
    assert not (demo["root"] / "p").exists()


def test_new_id_refuses_an_archive_which_keeps_its_ids(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle.tar.gz"
    cli_ok(demo["root"], "export", demo["id"], "--archive", "-o", str(bundle))

    result = cli(demo["root"], "import", str(bundle), "--new-id")

    assert code(result) == 2
    assert "--new-id takes a .jsonl trace" in str(result.exception)


def _leaky(root: Path) -> str:
    """A session whose user input holds a key; its id."""
    sid = "session-2026-07-18-11-10-22-5ec2e700"
    commands: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput(f"my key is {SECRET}"),
        pt.BeginRequest(),
        pt.EndRequest(),
    ]
    shards = pt.render_shards(commands, session_id=sid)
    pt.write_shards(DataRoot(root), "p", "a", sid, shards)
    return sid


def test_replay_piped_is_as_written_and_redacted_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "data"
    sid = _leaky(root)

    assert SECRET in cli_ok(root, "replay", sid).stdout  # scripts see what they always saw
    for args in (["--redacted"], ["--redacted", "--raw"], ["--redacted", "--jsonl"]):
        shown = cli_ok(root, "replay", sid, *args)
        assert SECRET not in shown.stdout
        assert "[redacted" in shown.stdout
    document = json.loads(cli_ok(root, "replay", sid, "--redacted", "--json").stdout)
    assert SECRET not in json.dumps(document)


def test_replay_on_a_terminal_is_redacted_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    sid = _leaky(root)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)

    def replay(*args: str) -> tuple[str, str]:
        with pytest.raises(SystemExit) as done:
            main(["--data-root", str(root), "replay", sid, "--no-pager", *args])
        assert done.value.code == 0
        captured = capsys.readouterr()
        return captured.out, captured.err

    out, err = replay()
    assert SECRET not in out
    assert "my key is [redacted" in out
    assert err == "replay: 1 value(s) redacted; --no-redacted shows them\n"
    out, err = replay("--no-redacted")
    assert SECRET in out
    assert err == ""


def test_show_and_audit_read_a_trace_file_outside_any_root(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    loose = tmp_path / "loose.jsonl"
    loose.write_bytes(demo["shards"][1].read_bytes())
    nowhere = tmp_path / "no-root"

    shown = cli_json(nowhere, "show", str(loose))
    assert shown["session_id"] == demo["id"]
    assert shown["shards"][0]["path"] == str(loose)
    text = cli_ok(nowhere, "show", str(loose)).stdout
    assert text.startswith(f"session      {demo['id']}  (a trace file, read on its own)")
    audited = cli_json(nowhere, "audit", str(loose))
    assert (audited["sessions"], audited["exit_code"], audited["ledger"]) == (1, 0, None)
    assert not nowhere.exists()

    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(loose.read_bytes() + b'{"type": "event_msg", "pay\n')
    report = cli(nowhere, "audit", str(broken), "--json")
    problems = json.loads(report.stdout)["problems"]
    assert [(p["path"], p["line"]) for p in problems] == [(str(broken), 15)]
    refused = cli(nowhere, "audit", str(broken), "--fix")
    assert code(refused) == 2
    assert "--fix repairs sessions of the data root" in str(refused.exception)


def test_a_model_change_inside_a_shard_stays_in_its_shard_through_export_and_import(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    # An imported agent session records a model change as a session_meta inside its shard
    # (ADR 0094); only a session_meta right after a completed compaction starts a shard.
    first, second = demo["shards"]
    lines = first.read_bytes().splitlines(keepends=True)
    switched = lines[0].replace(b'"model_id":"', b'"model_id":"switched-')
    assert switched != lines[0]
    first.write_bytes(b"".join([*lines[:3], switched, *lines[3:]]))
    out = tmp_path / "whole.jsonl"
    cli_ok(demo["root"], "export", demo["id"], "--shard", "all", "-o", str(out))

    back = cli_json(demo["root"], "import", str(out), "-p", "elsewhere", "-a", "copy")
    copy = cli_json(
        demo["root"], "import", str(out), "-p", "demo_project", "-a", "demo_agent", "--new-id"
    )

    assert [Path(p).read_bytes() for p in back["paths"]] == [
        first.read_bytes(),
        second.read_bytes(),
    ]
    copies = [Path(p) for p in copy["paths"]]
    assert len(copies) == 2
    assert [len(metas(path)) for path in copies] == [2, 1]
    assert {m["session_id"] for path in copies for m in metas(path)} == {copy["session_id"]}
