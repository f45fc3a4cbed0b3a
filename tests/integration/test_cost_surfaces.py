"""Every surface shows one cost per session, with the same flags (issue #28, ADR 0099).

A root of four imported sessions, one per agent so the Usage page's agent filter picks out
each one: Claude Code switching from Sonnet 4.5 to Opus 4.5, Codex switching from
gpt-5-codex to gpt-5.1-codex, Gemini mixing gemini-2.5-pro with a model nobody prices,
and OpenCode on that model alone.  Under a table with a ``[default]`` rate that model is
priced by the fallback; without one it is unpriced.  For each session the cost and both
flag lists must be equal on the web Traces list, the Session page, ``stats cost --by
session``, ``show --json``, ``list --json``, ``report``, the Usage page and the HTTP API
of a real ``pentrace serve``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from tests.foreign_logs import (
    ClaudeLog,
    CodexLog,
    GeminiChat,
    OpenCodeDb,
    claude_turn,
    codex_turn,
    text,
)
from tests.integration.sse_harness import Server
from tests.support import cli_json, cli_ok

pytestmark = pytest.mark.usefixtures("own_stores")

NOBODY = "acme-llm-1"  # a model no dataset knows
TABLES = {
    "fallback": 'currency = "USD"\n[default]\ninput = 2.0\noutput = 8.0\n',
    "unpriced": 'currency = "USD"\n',
}
# (cost rounded to 6 decimals or None, unpriced models, fallback models)
Seen = tuple[float | None, tuple[str, ...], tuple[str, ...]]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("costs")
    claude = ClaudeLog("c0c0c0c0-0000-4000-8000-000000000001")
    for turn in range(2):
        claude_turn(claude, turn)
    claude.prompt("think harder")
    opus = "claude-opus-4-5-20251101"
    claude.answer([text("ok")], message_id="msg_opus", request_id="req_opus",
                  usage=(4000, 9000, 120_000, 30_000), model=opus)  # fmt: skip
    claude.write(base / "claude" / "projects" / "-home-u-app")
    codex = CodexLog("0199c0c0-0000-7000-8000-000000000002")
    codex.meta()
    codex.context("gpt-5-codex")
    for turn in range(2):
        codex_turn(codex, turn)
    codex.context("gpt-5.1-codex")
    codex_turn(codex, 2)
    codex.write(base / "codex")
    gemini = GeminiChat("9e9ec0c0-0000-4000-8000-000000000003")
    gemini.user("plan")
    gemini.reply("planned", tokens=(300_000, 2000, 100_000, 500))
    gemini.user("now with the other model")
    gemini.reply("done", tokens=(50_000, 4000, 0, 0), model=NOBODY)
    gemini.write(base / "gemini" / "p")
    db = OpenCodeDb(base / "opencode")
    db.session("ses_cost000004")
    db.user("ses_cost000004", "go")
    db.assistant("ses_cost000004", [{"type": "text", "text": "ok"}],
                 tokens=(70_000, 3000, 10_000, 0), model=NOBODY)  # fmt: skip
    db.close()
    data = base / "data"
    for agent, folder in (("claude-code", "claude"), ("codex", "codex"),
                          ("opencode", "opencode"), ("gemini", "gemini")):  # fmt: skip
        import_agent(DataRoot(data), agent, [base / folder])
    cli_ok(data, "ledger", "sync")
    return data


@pytest.fixture(scope="module", params=sorted(TABLES))
def table(request: pytest.FixtureRequest, root: Path) -> tuple[str, Path]:
    path = root.parent / f"{request.param}.toml"
    path.write_text(TABLES[request.param])
    return request.param, path


@pytest.fixture(scope="module")
def server(root: Path, table: tuple[str, Path]) -> Iterator[Server]:
    running = Server(root, env={"PENTRACE_PRICES": str(table[1])}).start()
    yield running
    running.stop()


def _seen(cost: Any, unpriced: Any, fallback: Any) -> Seen:
    if isinstance(cost, str):
        cost = float(cost) if cost else None
    amount = None if cost is None else round(float(cost), 6)
    return amount, tuple(sorted(unpriced)), tuple(sorted(fallback))


def _split(value: str) -> list[str]:
    return [name for name in html.unescape(value).split(",") if name]


def _attributes(tag: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', tag)}


def _from_tag(tag: str, cost_name: str) -> Seen:
    found = _attributes(tag)
    return _seen(found[cost_name], _split(found["data-unpriced"]), _split(found["data-fallback"]))


def _get(server: Server, path: str, **params: str) -> httpx.Response:
    answer = httpx.get(server.url + path, params=params, timeout=60)
    assert answer.status_code == 200, answer.text[:500]
    return answer


def test_every_surface_shows_the_same_cost_and_flags(
    root: Path,
    table: tuple[str, Path],
    server: Server,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    kind, path = table
    monkeypatch.setenv("PENTRACE_PRICES", str(path))
    listed = cli_json(root, "list")["sessions"]
    assert len(listed) == 4
    refs = {row["ref"]: row for row in listed}
    by_session = {
        row["key"]: _seen(row["cost"], row["unpriced"], row["fallback"])
        for row in cli_json(root, "stats", "cost", "--by", "session")["rows"]
    }
    traces = _get(server, "/web/traces").text
    api_list = {s["ref"]: s for s in _get(server, "/api/v1/sessions").json()["sessions"]}
    for ref, row in refs.items():
        project, agent, session_id = ref.split("/")
        seen: dict[str, Seen] = {
            "list --json": _seen(row["cost"], row["cost_unpriced"], row["cost_fallback"]),
            "stats cost --by session": by_session[ref],
        }
        shown = cli_json(root, "show", session_id)
        seen["show --json"] = _seen(shown["cost"], shown["cost_unpriced"], shown["cost_fallback"])
        [trace_row] = re.findall(rf'<tr data-session="{re.escape(ref)}">.*?</tr>', traces, re.S)
        [cell] = re.findall(r'<td class="n" data-label="cost"[^>]*>', trace_row)
        seen["web Traces list"] = _from_tag(cell, "data-cost")
        page = _get(server, f"/web/sessions/{project}/{agent}/{session_id}").text
        [span] = re.findall(r"<span data-session-cost=[^>]*>", page)
        seen["web Session page"] = _from_tag(span, "data-session-cost")
        item = api_list[ref]
        seen["GET /api/v1/sessions"] = _seen(
            item["cost"], item["cost_unpriced"], item["cost_fallback"]
        )
        detail = _get(server, f"/api/v1/sessions/{project}/{agent}/{session_id}").json()
        seen["GET /api/v1/sessions/{id}"] = _seen(
            detail["cost"], detail["cost_unpriced"], detail["cost_fallback"]
        )
        report = tmp_path / f"{agent}.html"
        cli_ok(root, "report", session_id, "-o", str(report))
        [fact] = re.findall(r"<dd data-cost=[^>]*>", report.read_text())
        seen["report"] = _from_tag(fact, "data-cost")
        usage = _get(server, "/web/usage", agent=agent).text
        [card] = re.findall(r'<section class="card" data-card="all time"[^>]*>.*?</section>',
                            usage, re.S)  # fmt: skip
        flags = re.findall(r'<span class="cost-flag"[^>]*>', card)
        card_flags = _attributes(flags[0]) if flags else {}
        card_cost = _attributes(card.split(">", 1)[0])["data-cost"]
        seen["web Usage page"] = _seen(
            card_cost,
            _split(card_flags.get("data-unpriced", "")),
            _split(card_flags.get("data-fallback", "")),
        )
        expected = seen["stats cost --by session"]
        assert all(value == expected for value in seen.values()), (ref, seen)
    flagged = {ref: seen for ref, seen in by_session.items()}
    _check_flags(kind, flagged)


def _check_flags(kind: str, flagged: dict[str, Seen]) -> None:
    """The known models are priced from the dataset; the unknown one is flagged as it should
    be under this table, in the sessions that used it, and nowhere else."""
    by_agent = {ref.split("/")[1]: seen for ref, seen in flagged.items()}
    for agent in ("claude-code", "codex"):
        cost, unpriced, fallback = by_agent[agent]
        assert cost is not None
        assert cost > 0
        assert (unpriced, fallback) == ((), ())
    for agent in ("gemini", "opencode"):
        cost, unpriced, fallback = by_agent[agent]
        names = unpriced if kind == "unpriced" else fallback
        assert [name.rsplit("/", 1)[-1] for name in names] == [NOBODY]
        assert (fallback if kind == "unpriced" else unpriced) == ()
    # Gemini's priced model still counts; OpenCode's only model has no price under "unpriced".
    gemini_cost = by_agent["gemini"][0]
    assert gemini_cost is not None
    assert gemini_cost > 0
    assert (by_agent["opencode"][0] is None) == (kind == "unpriced")
