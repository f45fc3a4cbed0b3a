"""``stats ... --plot`` draws what the table shows, on a real time axis, in human units.

The pictures are SVG with text kept as text, so the test reads the titles,
tick labels and legends the way a person would; the PNGs written alongside
are the ones looked at while writing these tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from tests.integration.stats_corpus import MODELS, PROJECTS, build_stats_corpus


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("plots") / "data"
    build_stats_corpus(data)
    result = CliRunner().invoke(app, ["--data-root", str(data), "ledger", "sync"])
    assert result.exit_code == 0, result.output
    return data


def picture(root: Path, tmp_path: Path, *args: str, suffix: str = ".svg") -> str:
    path = tmp_path / ("-".join(a.strip("-") for a in args) + suffix)
    result = CliRunner().invoke(app, ["--data-root", str(root), *args, "--plot", str(path)])
    assert result.exit_code == 0, result.output
    return path.read_text(encoding="utf-8") if suffix == ".svg" else ""


def texts(svg: str) -> list[str]:
    """The text a reader sees (the chart engine writes one <text> per label)."""
    return [
        re.sub(r"<[^>]+>", "", t).strip() for t in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)
    ]


def test_by_project_draws_the_projects_not_the_days(root: Path, tmp_path: Path) -> None:
    by_project = texts(picture(root, tmp_path, "stats", "tokens", "--by", "project"))
    by_day = texts(picture(root, tmp_path, "stats", "tokens", "--by", "day"))

    assert by_project != by_day
    assert set(PROJECTS) <= set(by_project)
    assert not set(PROJECTS) & set(by_day)
    assert "Total tokens by project, 2026-08-01 to 2026-11-29 (UTC)" in by_project
    # Each bar carries the table's total in human units.
    table = CliRunner().invoke(
        app, ["--data-root", str(root), "stats", "tokens", "--by", "project"]
    )
    totals = {
        line.split("\t")[0]: int(line.split("\t")[-1]) for line in table.stdout.splitlines()[1:]
    }
    assert f"{totals['data_pipeline'] / 1e6:.1f}M" in by_project


def test_days_are_a_time_axis_where_a_gap_of_months_shows(root: Path, tmp_path: Path) -> None:
    shown = texts(picture(root, tmp_path, "stats", "tokens", "--by", "day"))

    # Ticks are months, September and October included although nothing ran then.
    assert {"Aug", "Sep", "Oct", "Nov"} <= set(shown)
    assert len([t for t in shown if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t)]) == 0  # no 60 labels
    assert {f"{provider}/{model}" for provider, model in MODELS} <= set(shown)  # the legend
    assert "model" in shown
    assert "Tokens per day by model, 2026-08-01 to 2026-11-29 (UTC)" in shown


def test_axes_use_human_units_never_an_offset(root: Path, tmp_path: Path) -> None:
    for args in (("tokens", "--by", "day"), ("tokens", "--by", "model"), ("cost", "--by", "day")):
        shown = texts(picture(root, tmp_path, "stats", *args))
        assert not [t for t in shown if re.search(r"1e\d|×10", t)], args
    ticks = texts(picture(root, tmp_path, "stats", "tokens", "--by", "day"))
    assert any(re.fullmatch(r"\d+M", t) for t in ticks)


def test_since_and_until_are_in_the_title_and_limit_the_picture(root: Path, tmp_path: Path) -> None:
    shown = texts(
        picture(root, tmp_path, "stats", "tokens", "--by", "model", "--since", "2026-11-10")
    )
    assert "Total tokens by model, 2026-11-10 to 2026-11-29 (UTC)" in shown


def test_tools_show_calls_and_failures(root: Path, tmp_path: Path) -> None:
    shown = texts(picture(root, tmp_path, "stats", "tools"))
    assert "exec_command" in shown
    assert "failed" in shown  # the legend of the red share
    assert any(re.fullmatch(r"\d+ \(\d+ failed\)", t) for t in shown)


def test_many_groups_keep_the_largest_and_say_how_many_were_left_out(
    root: Path, tmp_path: Path
) -> None:
    shown = texts(picture(root, tmp_path, "stats", "tokens", "--by", "session"))
    assert any(t.startswith("(top 25; 50 smaller left out") for t in shown)


def test_png_pictures_are_written_too(root: Path, tmp_path: Path) -> None:
    pytest.importorskip("cairosvg")  # the plots extra converts the SVG
    for args in (("tokens", "--by", "day"), ("tokens", "--by", "project"), ("tools",)):
        picture(root, tmp_path, "stats", *args, suffix=".png")
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 3
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)
