"""pentrace stats and projections on a real data root (the demo session and its subagent)."""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app, main
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.operations.stats import KINDS
from pentrace.infrastructure.storage.layout import DataRoot, iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from tests.support import cli_json, cli_ok

START = datetime(2026, 11, 28, 22, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("stats") / "data"
    record_demo_session(DataRoot(data), START)
    # Index the traces here, so that no test depends on another's `--sync` having run.
    result = CliRunner().invoke(app, ["--data-root", str(data), "ledger", "sync"])
    assert result.exit_code == 0, result.output
    return data


def stats(root: Path, *args: str) -> Any:
    return cli_json(root, *args)


def payloads(root: Path) -> list[dict[str, Any]]:
    """Every record's payload, read straight from the trace files (the test's own oracle)."""
    found = []
    for ref in iter_sessions(root):
        found += [record.payload() for record in read_session(ref.shards)]
    return found


def test_tokens_by_model_add_up_every_request_in_the_traces(root: Path) -> None:
    document = stats(root, "stats", "tokens", "--sync", "--by", "model")
    usages = [p["request"] for p in payloads(root) if p.get("type") == "token_usage"]
    begun = [p for p in payloads(root) if p.get("type") == "request_begin"]
    [row] = document["rows"]
    # One set of numbers (session_numbers): the model is provider/model_id, requests are the
    # requests begun, and the token_usage records are counted apart, under their own name.
    assert row["key"] == "deepseek/deepseek-v4-pro"
    assert row["requests"] == len(begun)
    assert row["usage_records"] == len(usages)
    assert row["total"] == sum(u["total"] for u in usages)
    assert row["output"] == sum(u["output"] for u in usages)
    fresh = [u["total"] - u["output"] - u["cache_read"] - u["cache_write"] for u in usages]
    assert row["input"] == sum(max(f, 0) for f in fresh)
    assert row["cache_write"] == sum(u["cache_write"] for u in usages)


def test_stats_on_traces_alone_read_them_and_sync_adds_what_came_later_once(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    record_demo_session(DataRoot(data), START)  # traces only: nothing indexed yet
    [row] = stats(data, "stats", "tokens")["rows"]  # built from the traces (ADR 0050)
    first = [p["request"] for p in payloads(data) if p.get("type") == "token_usage"]
    assert (row["key"], row["usage_records"]) == ("deepseek/deepseek-v4-pro", len(first))
    assert stats(data, "ledger", "stats")["rows"] == 0  # the ledger was not filled for it
    record_demo_session(DataRoot(data), START.replace(day=29))  # written after the build
    assert stats(data, "stats", "tokens")["rows"] == [row]  # not in the ledger yet
    [row] = stats(data, "stats", "tokens", "--sync")["rows"]
    usages = [p["request"] for p in payloads(data) if p.get("type") == "token_usage"]
    assert len(usages) > len(first)
    assert row["usage_records"] == len(usages)  # the folded records were not counted again
    assert row["total"] == sum(u["total"] for u in usages)


def test_tokens_by_session_and_a_date_range_outside_the_data(root: Path) -> None:
    by_session = stats(root, "stats", "tokens", "--by", "session")["rows"]
    assert len(by_session) == 2
    assert stats(root, "stats", "tokens", "--since", "2027-01-01")["rows"] == []


def test_cost_uses_the_edited_price_table(root: Path, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('currency = "EUR"\n[models."deepseek-v4-pro"]\ninput = 1000000\noutput = 0\n')
    document = stats(root, "stats", "cost", "--prices", str(prices))
    tokens = stats(root, "stats", "tokens")["rows"][0]
    [row] = document["rows"]
    assert document["currency"] == "EUR"
    # One unit per fresh input token; cache prices default to the input price.
    assert row["cost"] == pytest.approx(
        tokens["input"] + tokens["cache_read"] + tokens["cache_write"]
    )
    # A table that turns the bundled dataset off leaves a model it does not name unpriced.
    prices.write_text('dataset = false\n[models."other"]\ninput = 1\noutput = 1\n')
    # Models are named as `stats cost --by model` names them: provider/model_id.
    assert stats(root, "stats", "cost", "--prices", str(prices))["rows"][0]["unpriced"] == [
        "deepseek/deepseek-v4-pro"
    ]
    # With the dataset on (the default), the dataset prices it: neither flag is raised.
    prices.write_text('[models."other"]\ninput = 1\noutput = 1\n')
    [row] = stats(root, "stats", "cost", "--prices", str(prices))["rows"]
    assert (row["unpriced"], row["fallback"]) == ([], [])
    assert row["cost"] > 0


def test_a_bad_price_table_is_one_clean_line_naming_the_file_and_key(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "bad.toml"
    prices.write_text('[models."m"]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(root), "stats", "cost", "--prices", str(prices)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2  # a usage error: the user's file is wrong
    assert f"price table {prices}: key models.m.input" in err
    assert "Traceback" not in err


def test_tools_count_calls_failures_and_approvals_like_the_traces(root: Path) -> None:
    document = stats(root, "stats", "tools")
    records = payloads(root)
    calls = Counter(p["name"] for p in records if p.get("type") == "tool_call")
    names = {p["tool_call_id"]: p["name"] for p in records if p.get("type") == "tool_call"}
    failed = Counter(
        names[p["tool_call_id"]]
        for p in records
        if p.get("type") == "tool_call_output" and p.get("stop_reason") not in (None, "completed")
    )
    decisions = Counter(p["decision"] for p in records if p.get("type") == "approval_decision")
    assert {row["tool"]: row["calls"] for row in document["tools"]} == dict(calls)
    assert {row["tool"]: row["failures"] for row in document["tools"] if row["failures"]} == dict(
        failed
    )
    assert document["approvals"] == dict(decisions)
    assert sum(failed.values()) >= 1


def test_requests_sessions_and_the_subagent_tree(root: Path) -> None:
    records = payloads(root)
    ends = Counter(p["status"] for p in records if p.get("type") == "request_end")
    document = stats(root, "stats", "requests")
    assert document["requests"] == dict(ends)
    assert [c["mode"] for c in document["compactions"]] == ["summarize"]
    sessions = stats(root, "stats", "sessions", "--by", "agent")["rows"]
    assert sessions[0]["sessions"] == 2
    [tree] = stats(root, "stats", "tree")["trees"]
    [child] = tree["children"]
    assert tree["subtree_tokens"] == tree["tokens"] + child["tokens"]
    assert child["tokens"] > 0


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plots_are_written_as_png_or_svg(root: Path, tmp_path: Path, suffix: str) -> None:
    for command in ("tokens", "cost", "tools"):
        picture = tmp_path / f"{command}{suffix}"
        stats(root, "stats", command, "--plot", str(picture))
        head = picture.read_bytes()[:200]
        assert (
            head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in head or b"<?xml" in head
        )


def test_an_unknown_grouping_and_a_plot_name_without_a_picture_suffix_are_usage_errors(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["--by", "colour"], ["--plot", str(tmp_path / "x.pdf")]):
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(root), "stats", "tokens", *args])
        assert exit_info.value.code == 2
        assert "error: " in capsys.readouterr().err


def test_projections_status_and_rebuild(root: Path) -> None:
    stats(root, "stats", "tools")
    status = {row["name"]: row for row in stats(root, "projections", "status")["projections"]}
    assert status["tools"]["behind"] == 0
    assert status["tools"]["needs_rebuild"] is False
    before = stats(root, "stats", "tools")
    result = CliRunner().invoke(app, ["--data-root", str(root), "projections", "rebuild", "tools"])
    assert result.exit_code == 0, result.output
    assert "rebuilt from 2 session(s)" in result.stdout
    assert stats(root, "stats", "tools") == before


def test_without_the_plots_extra_a_png_plot_is_a_clean_error_and_the_table_is_plain_text(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = CliRunner().invoke(app, ["--data-root", str(root), "stats", "tokens"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].split("\t")[:2] == ["model", "requests"]
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # as if the extra were not installed
    with pytest.raises(SystemExit):
        main(["--data-root", str(root), "stats", "tokens", "--plot", str(tmp_path / "t.png")])
    err = capsys.readouterr().err
    assert "t.png: a PNG needs cairosvg" in err
    assert "pentrace[plots]" in err


def test_an_unknown_projection_name_is_a_usage_error(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("nope", "no.such.module:Thing"):
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(root), "projections", "rebuild", name])
        assert exit_info.value.code == 2
        assert "expected" in capsys.readouterr().err


def test_stats_sync_is_not_tripped_by_the_retention_of_its_own_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A limit far below the demo's events: the sync alone would prune most of what it
    # indexes before the projections read it, and the catch-up then saw a gap.
    monkeypatch.setenv("PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS", "5")
    record_demo_session(DataRoot(tmp_path), START)
    usages = [p["request"] for p in payloads(tmp_path) if p.get("type") == "token_usage"]
    document = stats(tmp_path, "stats", "tokens", "--sync", "--by", "model")
    # Every token_usage record was read (usage_records); requests count requests begun (#13).
    assert sum(row["usage_records"] for row in document["rows"]) == len(usages)
    ledger = stats(tmp_path, "ledger", "stats")
    assert ledger["rows"] == 5
    # A second run prunes nothing of its own either, and sees the same numbers.
    assert stats(tmp_path, "stats", "tokens", "--sync", "--by", "model") == document


def test_a_bad_grouping_is_refused_before_any_projection_catches_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    record_demo_session(DataRoot(data), START)
    assert CliRunner().invoke(app, ["--data-root", str(data), "ledger", "sync"]).exit_code == 0
    capsys.readouterr()
    refused = {
        "tokens": ("colour", "model, provider, agent, project, day, session, hour, minute"),
        "cost": ("colour", "model, provider, agent, project, day, session, hour, minute"),
        "tools": ("session", "model, agent, project, day, hour, minute"),
        "requests": ("session", "model, provider, agent, project, day, hour, minute"),
        "sessions": ("hour", "model, provider, agent, project, day, session"),
    }
    for kind, (by, allowed) in refused.items():
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(data), "stats", kind, "--by", by])
        assert exit_info.value.code == 2, kind
        err = capsys.readouterr().err.splitlines()
        # ADR 0025: one error line naming the option, the value and the choices; a hint.
        assert err[0] == f"error: --by: expected one of {allowed}, found {by!r}", kind
        assert err[1].startswith("hint: for example --by "), kind
    # Nothing was caught up: every built-in is still behind the ledger.
    status = stats(data, "projections", "status")["projections"]
    assert {row["name"]: row["behind"] > 0 for row in status} == {
        "tokens": True,
        "tools": True,
        "sessions": True,
    }


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_stats_kind_draws_its_table_as_a_picture(
    root: Path, tmp_path: Path, kind: str
) -> None:
    by = {"requests": ("--by", "model"), "tools": ("--by", "day")}.get(kind, ())
    for args in ((), by):
        picture = tmp_path / f"{kind}{len(args)}.svg"
        stats(root, "stats", kind, *args, "--plot", str(picture))
        head = picture.read_bytes()[:200]
        assert b"<svg" in head or b"<?xml" in head


def test_stats_and_projections_text_shows_no_python_values(root: Path) -> None:
    runs = [["stats", kind] for kind in KINDS]
    runs += [["stats", "requests", "--by", "model"], ["stats", "tools", "--by", "hour"]]
    runs += [["projections", "status"], ["projections", "status", "--failures"]]
    for args in runs:
        text = cli_ok(root, *args).stdout
        cells = {cell.strip() for line in text.splitlines() for cell in line.split("\t")}
        assert not cells & {"None", "True", "False"}, args
        assert "None" not in text, args
    tools = cli_ok(root, "stats", "tools", "--by", "day").stdout.splitlines()
    rates = [line.split("\t")[-1] for line in tools[1:] if not line.startswith("approval")]
    assert rates
    assert all(rate == "-" or rate.endswith("%") for rate in rates)  # one format


def test_stats_tree_names_models_with_their_provider_as_every_command_does(root: Path) -> None:
    models = {row["key"] for row in stats(root, "stats", "tokens", "--by", "model")["rows"]}
    lines = cli_ok(root, "stats", "tree").stdout.splitlines()[1:]
    assert lines
    assert {line.split("\t")[1] for line in lines} <= models
