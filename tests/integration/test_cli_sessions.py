"""Session read commands on a real data root: list, show, short ids, replay, resume-check."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pentrace.cli.app import main
from pentrace.infrastructure.trace.reader import ParseReport, resume_trace_file
from pentrace.projections.resume import encode_resume_report
from tests.integration.cli_sessions_corpus import SID_A, SID_B, SID_C, build_corpus
from tests.support import cli, cli_json, run_pentrace

LIST_FIELDS = {
    "project", "agent", "session_id", "short_id", "start", "last", "provider", "model_id",
    "source", "turns", "tokens", "status", "records", "shards", "bytes", "has_errors", "problem",
    "ref", "model", "requests",
    # The session document's own names (ADR 0036); the ones above stay as aliases.
    "first_timestamp", "last_timestamp", "duration_s", "model_name", "last_request_status",
    "shard_count",
    # The session's cost and its flags (ADR 0099).
    "cost", "currency", "cost_unpriced", "cost_fallback",
}  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    build_corpus(data)
    return data


def fails(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str]:
    """Run the console entry point in process and return its exit code and stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(root), *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    code = exit_info.value.code
    assert isinstance(code, int)
    return code, captured.err


def listed(root: Path, *args: str) -> list[dict[str, object]]:
    result = cli(root, "sessions", "list", "--json", *args)
    assert result.exit_code == 0, result.output
    sessions = json.loads(result.stdout)["sessions"]
    assert isinstance(sessions, list)
    return sessions


def ids(root: Path, *args: str) -> list[object]:
    return [row["session_id"] for row in listed(root, *args)]


def test_list_prints_a_plain_table_with_a_header_when_piped(root: Path) -> None:
    result = cli(root, "sessions", "list")

    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == [
        "session", "project/agent", "start", "model", "turns", "tokens", "cost", "status",
        "errors",
    ]  # fmt: skip
    # Piped cells keep their machine form: no thousands separators, the cost bare; the
    # cost is the one `stats cost --by session` works out for the session.
    by_session = cli_json(root, "stats", "cost", "--by", "session")["rows"]
    [cost] = [row["cost"] for row in by_session if row["key"] == f"p1/a1/{SID_A}"]
    assert lines[1].split("\t") == [
        SID_A, "p1/a1", "2026-07-18T03:00:00.000Z", "deepseek/deepseek-v4-pro",
        "2", "800", f"{cost:.4f}", "completed", "no",
    ]  # fmt: skip
    assert cost > 0
    assert len(lines) == 4


def test_list_json_has_the_documented_fields(root: Path) -> None:
    rows = listed(root)

    assert [set(row) for row in rows] == [LIST_FIELDS] * 3
    first = rows[0]
    # Tokens sum every request's counts (300 + 500), as `stats tokens` does (session_numbers);
    # the corpus's running session counts (500) are resume's carry-over.
    assert (first["short_id"], first["turns"], first["tokens"]) == ("3f8a1c2d", 2, 800)
    assert (first["ref"], first["model"], first["requests"]) == (
        f"p1/a1/{SID_A}",
        "deepseek/deepseek-v4-pro",
        3,
    )
    assert (first["records"], first["shards"], first["has_errors"]) == (17, 1, False)
    assert rows[1]["status"] == "failed"
    assert rows[2]["has_errors"] is True  # C's compaction never ended


def test_list_filters_by_project_agent_model_status_errors_and_dates(root: Path) -> None:
    assert ids(root, "--project", "p2") == [SID_C]
    assert ids(root, "--agent", "a1") == [SID_A, SID_B]
    assert ids(root, "--model", "gpt-5") == [SID_B]
    assert ids(root, "--model", "deepseek/deepseek-v4-pro") == [SID_A, SID_C]
    assert ids(root, "--status", "failed") == [SID_B]
    assert ids(root, "--errors") == [SID_B, SID_C]
    assert ids(root, "--no-errors") == [SID_A]
    assert ids(root, "--since", "2026-07-19") == [SID_B, SID_C]
    assert ids(root, "--until", "2026-07-19T23:59:59Z") == [SID_A, SID_B]


def test_list_sorts_by_tokens_turns_and_id_and_limits(root: Path) -> None:
    assert ids(root, "--sort", "tokens") == [SID_B, SID_A, SID_C]
    assert ids(root, "--sort", "tokens", "--reverse") == [SID_C, SID_A, SID_B]
    assert ids(root, "--sort", "turns", "-r", "--limit", "1") == [SID_A]
    assert ids(root, "--sort", "id") == sorted([SID_A, SID_B, SID_C])


def test_an_unknown_sort_key_is_a_clean_usage_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "sessions", "list", "--sort", "size")

    assert code == 2
    assert err.splitlines() == [
        "error: expected a sort key among start, tokens, turns, id, found 'size'",
        "hint: for example --sort tokens",
    ]


def test_a_bad_date_is_a_clean_usage_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = fails(capsys, root, "sessions", "list", "--since", "last tuesday")

    assert code == 2
    # The one parser of every time option names the option, the value and the forms.
    assert err.startswith("error: --since 'last tuesday': expected a date (2026-11-01), an ISO")
    assert "hint: for example --since 7d" in err


@pytest.mark.parametrize("short", ["3f8a", "3f8a1c2d", "session-2026-07-18", SID_A])
def test_a_unique_prefix_or_token_prefix_resolves_the_session(root: Path, short: str) -> None:
    result = cli(root, "show", short, "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["session_id"] == SID_A


def test_an_ambiguous_prefix_lists_the_candidates(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "show", "3f8")

    assert code == 2
    assert err.splitlines() == [
        f"error: session reference '3f8' matches 2 sessions: p1/a1/{SID_A}, p1/a1/{SID_B}",
        "hint: type more characters of the id",
    ]


def test_a_prefix_matching_nothing_is_not_found_with_a_hint(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "replay", "deadbeef")

    assert code == 2  # as an ambiguous one, and as every command's (ADR 0092); it was 1
    first, hint = err.splitlines()
    assert first.startswith("error: no session id or 8-hex token starts with 'deadbeef' under ")
    assert hint.startswith("hint: list sessions with `pentrace list`")


def test_show_json_reports_shards_counters_and_the_summary(root: Path) -> None:
    shown = json.loads(cli(root, "show", "3f8a", "--json").stdout)

    assert [shard["index"] for shard in shown["shards"]] == [1]
    assert shown["shards"][0]["bytes"] == os.stat(shown["shards"][0]["path"]).st_size
    summary = shown["summary"]
    assert summary["requests"]["completed"] == 2
    assert summary["requests"]["aborted"] == 1
    assert summary["turns"] == 2
    assert summary["tokens"]["total"] == 500
    assert summary["token_totals"]["total"] == 800
    assert shown["numbers"]["requests"] == {"completed": 2, "aborted": 1}
    assert (shown["numbers"]["request_total"], shown["numbers"]["tokens"]["total"]) == (3, 800)
    assert summary["tool_calls"] == {"exec_command": {"calls": 1, "failures": 0, "unanswered": 0}}


def test_show_text_names_the_model_turns_and_tools(root: Path) -> None:
    text = cli(root, "show", "7777").stdout

    assert f"session      {SID_C}  (p2/a2)" in text
    assert "turns        1" in text
    assert "compactions  summarize/open 1; dangling 1" in text


def test_replay_shows_committed_history_and_hides_dropped_rounds(root: Path) -> None:
    text = cli(root, "replay", "3f8a").stdout

    assert "user: list the files" in text
    assert 'tool call exec_command {"cmd":"ls"}  [call_1]\n    output: a.txt' in text
    assert "--- turn 2 (request 3) ---" in text
    assert "THIS ROUND WAS DROPPED" not in text


def test_replay_include_uncommitted_marks_the_dropped_round(root: Path) -> None:
    text = cli(root, "replay", "3f8a", "--include-uncommitted").stdout

    assert "x-- dropped request 2 (aborted): not in the committed history --x" in text
    assert "x assistant: THIS ROUND WAS DROPPED" in text


def test_replay_raw_prints_the_committed_lines_exactly(root: Path) -> None:
    shard = build_corpus(root)[SID_A][0]
    raw = cli(root, "replay", "3f8a", "--raw").stdout_bytes

    trace_lines = shard.read_bytes().splitlines(keepends=True)
    # Lines 11-13 are the dropped round: its request_begin, its text and its aborted end.
    assert b"DROPPED" in trace_lines[11]
    assert raw.splitlines(keepends=True) == trace_lines[:10] + trace_lines[13:]


def test_replay_json_lists_items_with_their_state(root: Path) -> None:
    everything = json.loads(cli(root, "replay", "3f8a", "--json", "--include-uncommitted").stdout)
    committed = json.loads(cli(root, "replay", "3f8a", "--json").stdout)

    states = [item["state"] for item in everything["items"]]
    assert states.count("dropped") == 3
    assert [item["position"] for item in everything["items"]] == list(range(1, 18))
    assert all(item["state"] == "committed" for item in committed["items"])
    assert len(committed["items"]) == 14
    dropped = next(item for item in everything["items"] if item["state"] == "dropped")
    assert (dropped["round"], dropped["status"]) == (2, "aborted")
    assert dropped["envelope"]["payload"]["type"] == "request_begin"


def test_replay_never_pages_when_stdout_is_piped(root: Path) -> None:
    env = {**os.environ, "PAGER": "echo PAGED", "MANPAGER": "echo PAGED"}
    done = run_pentrace(root, "replay", "3f8a", env=env)

    assert done.returncode == 0, done.stderr
    assert "PAGED" not in done.stdout
    assert "user: list the files" in done.stdout


def test_resume_check_json_is_the_resume_report_of_the_latest_shard(root: Path) -> None:
    shard = build_corpus(root)[SID_A][-1]
    report = ParseReport()
    expected = encode_resume_report(resume_trace_file(shard, report=report), report)

    assert cli(root, "resume-check", "3f8a", "--json").stdout_bytes == expected + b"\n"
    assert cli(root, "resume-check", str(shard), "--json").stdout_bytes == expected + b"\n"


def test_resume_check_text_names_history_turns_and_closure(root: Path) -> None:
    text = cli(root, "resume-check", "7777").stdout

    assert "turns         1" in text
    assert "closed        no" in text
    # Once a dict repr, {'reason': 'context', ...} (issue #31): no Python in text output.
    assert "dangling      compaction (reason context, mode summarize)" in text


def test_resume_check_of_a_directory_is_a_clean_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Root ignores chmod 000, so an unreadable "file" is a directory here.
    code, err = fails(capsys, root, "resume-check", str(root))

    assert code == 1
    first, hint = err.splitlines()
    assert first.startswith(f"error: cannot read trace file {root}")
    assert hint == "hint: check that the path is a readable file"


def test_a_bad_option_is_a_usage_error_with_exit_code_2(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "replay", "3f8a", "--no-such-option")

    assert code == 2
    # One line in the project's error style, no click box.
    assert err.splitlines()[0] == "error: pentrace replay: no such option: --no-such-option"
    assert "╭" not in err


def test_a_missing_session_is_one_clean_line_and_debug_shows_a_traceback(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = fails(capsys, root, "show", "cafecafe")
    debug = run_pentrace(root, "--debug", "show", "cafecafe")

    assert code == 2  # an unknown session is 2 everywhere (ADR 0092); it was 1
    assert err.count("\n") == 2
    assert err.startswith("error: no session id")
    assert "Traceback (most recent call last)" in debug.stderr
    assert "NoMatchError" in debug.stderr  # a NotFoundError that exits 2 (ADR 0092)


def test_shell_completion_prints_a_bash_script(root: Path) -> None:
    # With shellingham installed, typer reads the shell from the process's ancestors and
    # ignores the argument; under CI the nearest ancestor shell may be sh.  Typer's own
    # switch makes it take the shell named on the command line, as a user's script would.
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    done = run_pentrace(root, "--show-completion", "bash", env=env)

    assert done.returncode == 0, done.stderr
    assert "complete -o default -F" in done.stdout
    assert "_PENTRACE_COMPLETE=complete_bash" in done.stdout


def test_an_empty_root_lists_nothing(tmp_path: Path) -> None:
    # A missing root is an error now (tests/integration/test_cli_conventions.py).
    assert listed(tmp_path) == []


def test_sessions_of_every_project_are_listed_with_their_place(root: Path) -> None:
    places = {(row["project"], row["agent"]) for row in listed(root)}

    assert places == {("p1", "a1"), ("p2", "a2")}
    assert SID_B in ids(root, "--project", "p1", "--agent", "a1")


def test_a_torn_tail_and_a_malformed_line_are_reported_not_fatal(root: Path) -> None:
    shard = build_corpus(root)[SID_A][0]
    lines = shard.read_bytes().splitlines(keepends=True)
    shard.write_bytes(
        b"".join([*lines[:5], b"{broken\n", *lines[5:]]) + b'{"type":"event_msg","pay'
    )

    shown = json.loads(cli(root, "show", "3f8a", "--json").stdout)
    text = cli(root, "replay", "3f8a").stdout

    assert (shown["skipped_lines"], shown["torn_tails"], shown["has_errors"]) == (1, 1, True)
    assert shown["summary"]["turns"] == 2
    assert "(reader: skipped 1 malformed line(s): 6; torn tails 1)" in text
    assert listed(root, "--errors")[0]["session_id"] == SID_A


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_an_unreadable_trace_file_is_a_clean_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = build_corpus(root)[SID_A][0]
    shard.chmod(0)
    try:
        code, err = fails(capsys, root, "resume-check", str(shard))
    finally:
        shard.chmod(0o600)

    assert code == 1
    assert err.startswith(f"error: cannot read trace file {shard}: Permission denied")


def test_resume_check_of_a_file_that_is_no_trace_says_so(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(f"line {n} of some notes\n" for n in range(52)))
    code, err = fails(capsys, root, "resume-check", str(notes))

    assert code == 1
    first, hint = err.splitlines()
    assert first == (
        f"error: {notes} is not a trace: none of its 52 non-blank line(s) is a "
        "session_meta, model_msg or event_msg record"
    )
    assert hint.startswith("hint: give the path of a session's .jsonl shard")


def test_resume_check_of_json_values_that_are_no_records_says_so_too(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "values.jsonl"
    values.write_bytes(b'{"a":1}\n42\n[]\n{"type":"other"}\n')
    code, err = fails(capsys, root, "resume-check", str(values), "--json")

    assert code == 1
    assert "is not a trace: none of its 4 non-blank line(s)" in err


def test_resume_check_of_a_trace_whose_first_write_was_torn_resumes_nothing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torn = tmp_path / "session-2026-07-18-11-10-22-3f8a1c2d_001.jsonl"
    torn.write_bytes(b'{"timestamp":"2026-07-18T11:10:22.000Z","type":"session_me')
    one_line = tmp_path / "one.jsonl"
    one_line.write_text("just one line of notes\n")

    report = cli_json(root, "resume-check", str(torn))
    code, err = fails(capsys, root, "resume-check", str(one_line))

    assert report["history"] == []
    assert code == 1
    assert "is not a trace: none of its 1 non-blank line(s)" in err
