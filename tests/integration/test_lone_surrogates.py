"""Lone surrogates in a real data root: every command carries them as JSON escapes (ADR 0015)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import cast

import pytest

from pentrace.errors import UnencodableValueError
from pentrace.infrastructure.ledger import default_ledger_path
from tests.integration.cli_sessions_corpus import SID_A, SID_B, SID_C, build_corpus
from tests.integration.sse_harness import Server, SseClient
from tests.integration.test_tool_output_recording import make_app, open_call
from tests.support import cli_raising, ledger_file_sessions, run_pentrace

ESCAPE = "\\ud800"


pytestmark = pytest.mark.usefixtures("own_stores")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The three-session corpus, with session A's first user text holding ``\\ud800``."""
    data = tmp_path / "data"
    shard = build_corpus(data)[SID_A][0]
    text = shard.read_bytes()
    assert b'"list the files"' in text
    shard.write_bytes(text.replace(b'"list the files"', b'"list \\ud800 files"'))
    return data


def ok(root: Path, *args: str) -> str:
    result = cli_raising(root, *args)
    assert result.exit_code in (0, 1), result.output
    return result.output


def test_replay_and_show_print_the_surrogate_as_its_escape(root: Path) -> None:
    assert f"list {ESCAPE} files" in ok(root, "replay", SID_A, "--no-pager")
    ok(root, "show", SID_A)
    ok(root, "show", SID_A, "--json")
    assert f"list {ESCAPE} files" in ok(root, "replay", SID_A, "--json")


def test_verbatim_export_keeps_the_bytes_and_redacted_export_escapes(
    root: Path, tmp_path: Path
) -> None:
    (shard,) = root.glob(f"*/agents/*/traces/*/{SID_A}_001.jsonl")
    out = tmp_path / "verbatim.jsonl"
    ok(root, "export", SID_A, "-o", str(out))
    assert out.read_bytes() == shard.read_bytes()
    redacted = tmp_path / "redacted.jsonl"
    ok(root, "export", SID_A, "--redacted", "-o", str(redacted))
    lines = redacted.read_bytes().splitlines()
    assert b'"list \\ud800 files"' in redacted.read_bytes()
    assert json.loads(lines[2])["payload"]["text"] == "list \ud800 files"


def test_search_indexes_and_finds_the_text_around_a_surrogate(root: Path) -> None:
    out = ok(root, "search", "files", "--json")
    hits = json.loads(out)["hits"]
    assert any(ESCAPE in hit["snippet"] for hit in hits)
    # A query that itself holds a lone surrogate (argv of invalid UTF-8) is bound too.
    ok(root, "search", '"list \ud800"')


def ledger_rows(root: Path) -> list[tuple[str, bytes]]:
    return [(str(sid), data) for sid, data in ledger_file_sessions(default_ledger_path(root))]


def test_ledger_sync_and_rebuild_index_every_session(root: Path) -> None:
    ok(root, "ledger", "sync")
    synced = ledger_rows(root)
    assert {SID_A, SID_B, SID_C} == {sid for sid, _ in synced}
    assert any(ESCAPE.encode() in event for _, event in synced)
    ok(root, "ledger", "rebuild")
    assert sorted(ledger_rows(root)) == sorted(synced)


def test_stats_audit_and_report_run_over_the_whole_root(root: Path, tmp_path: Path) -> None:
    ok(root, "stats", "tokens", "--sync")
    ok(root, "stats", "sessions", "--sync")
    ok(root, "audit")
    ok(root, "sessions", "list", "--json")
    page = tmp_path / "report.html"
    ok(root, "report", SID_A, "-o", str(page))
    assert page.read_text(encoding="utf-8")


def test_a_real_process_prints_the_escape_to_a_pipe(root: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = run_pentrace(root, "replay", SID_A, "--no-pager", env=env)
    assert result.returncode == 0, result.stderr
    assert f"list {ESCAPE} files" in result.stdout
    assert "Traceback" not in result.stderr


def test_the_recording_api_records_an_fsdecoded_path_faithfully(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    try:
        handle = open_call(app)
        name = os.fsdecode(b"/tmp/out-\xff.log")
        handle.record_tool_output("call_0", f"wrote {name}")
        handle.end_request("completed")
        handle.close()
        lines = handle.trace_path.read_bytes().splitlines()
    finally:
        app.close()
    assert b'"output":"wrote /tmp/out-\\udcff.log"' in lines[-2]
    assert json.loads(lines[-2])["payload"]["output"] == f"wrote {name}"
    assert json.loads(lines[-1])["payload"] == {"type": "request_end", "status": "completed"}


def test_the_recording_api_refuses_a_value_without_json_form_before_writing(
    tmp_path: Path,
) -> None:
    app = make_app(tmp_path)
    try:
        handle = open_call(app)
        pending, version = handle.pending, handle.session.version
        with pytest.raises(UnencodableValueError, match="text at sequence"):
            handle.record_text(cast(str, {"not": object()}))
        assert (handle.pending, handle.session.version) == (pending, version)
        handle.record_tool_output("call_0", "fine")
        handle.end_request("completed")
        handle.close()
        outputs = [
            json.loads(line)["payload"]
            for line in handle.trace_path.read_bytes().splitlines()
            if b"tool_call_output" in line
        ]
    finally:
        app.close()
    assert [payload["output"] for payload in outputs] == ["fine"]


def test_sse_frames_carry_the_surrogate_as_an_escape(root: Path) -> None:
    ok(root, "ledger", "sync")
    server = Server(root).start()
    first = f"evt:session:p1/a1/{SID_A}:00000001"  # ids name the owner (#13)
    params = {"session_id": SID_A, "last_event_id": first}
    client = SseClient(server.url + "/api/v1/events/sse", params)
    try:
        assert client.next().type == "server.connected"
        frames = client.events(4)
    finally:
        client.close()
        server.stop()
    assert client.status == 200
    assert [frame.id for frame in frames] == [
        f"evt:session:p1/a1/{SID_A}:{n:08d}" for n in range(2, 6)
    ]
    assert "list \ud800 files" in json.dumps(frames[1].data, ensure_ascii=False)
