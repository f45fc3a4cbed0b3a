"""pentrace's token counts of other agents' sessions equal ccusage's on the same files (issue #28).

ccusage 20.0.24 (npm) is installed once into ``~/.cache/pentrace-tests/ccusage``
(outside the repository) and run as ``ccusage <agent> daily|session --json
--offline -z UTC`` with the agent's store named by its environment variable.
The tests are skipped, with the reason, where node or npm are missing.

For each UTC day and each session, the four kinds (input, output, cache read,
cache write) must be equal.  ccusage names a Claude Code session by its file
(a subagent file counts for its parent session), pentrace by the conversation
(an inline sidechain, a fork after a rewind, are sessions of their own), so the
session comparison adds pentrace's sessions up by the file they came from.
Where ccusage miscounts, the documented difference is asserted exactly
(``docs/agents.md``, "Differences from ccusage").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

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
    gemini_call,
    jsonl,
    opencode_tool,
    reference_folder,
    text,
    tool_use,
)
from tests.support import cli_json

pytestmark = pytest.mark.usefixtures("own_stores")

VERSION: Final = "20.0.24"
Kinds = tuple[int, int, int, int]


@pytest.fixture(scope="module")
def ccusage() -> Path:
    """The ccusage binary, installed once into the test cache (or the test is skipped)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node/npm are missing: the comparison runs ccusage 20.0.24 from npm")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "pentrace-tests" / "ccusage"
    binary = folder / "node_modules" / ".bin" / "ccusage"
    manifest = folder / "node_modules" / "ccusage" / "package.json"
    installed = manifest.exists() and json.loads(manifest.read_text())["version"] == VERSION
    if not installed:
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(folder),
                "--no-audit",
                "--no-fund",
                f"ccusage@{VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not binary.exists():
            pytest.skip(f"cannot install ccusage@{VERSION} with npm: {done.stderr[-300:]}")
    return binary


def _run(
    binary: Path, agent: str, report: str, env: dict[str, str], home: Path, *extra: str
) -> Any:
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(binary), agent, report, "--json", "--offline", "-z", "UTC", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home), **env},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _reports(
    binary: Path, agent: str, env: dict[str, str], home: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """ccusage's daily and session rows for ``agent``."""
    daily = _run(binary, agent, "daily", env, home)["daily"]
    sessions = _run(binary, agent, "session", env, home)["sessions"]
    return daily, sessions


def _claude_kinds(row: dict[str, Any]) -> Kinds:
    return (
        row["inputTokens"],
        row["outputTokens"],
        row["cacheReadTokens"],
        row["cacheCreationTokens"],
    )


def _ours(row: dict[str, Any]) -> Kinds:
    return row["input"], row["output"], row["cache_read"], row["cache_write"]


def _sources(root: Path) -> dict[str, str]:
    """Each pentrace session's reference -> the source file its records came from."""
    found: dict[str, str] = {}
    for path in root.glob("*/agents/*/traces/*/*_001.jsonl"):
        first = json.loads(path.read_bytes().split(b"\n", 1)[0])
        project, agent = path.parts[-6], path.parts[-4]
        found[f"{project}/{agent}/{first['payload']['session_id']}"] = first["foreign"]["source"]
    return found


def _claude_session(reference: str, source: str) -> str:
    path = Path(source)
    return path.parent.parent.name if path.parent.name == "subagents" else path.stem


def _compare(
    root: Path,
    daily: list[dict[str, Any]],
    sessions: list[dict[str, Any]],
    kinds: Callable[[dict[str, Any]], Kinds],
    session_of: Callable[[str, str], str],
) -> None:
    ours_daily = {
        r["key"]: _ours(r) for r in cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    }
    theirs_daily = {r["date"]: kinds(r) for r in daily}
    assert {k: v for k, v in ours_daily.items() if any(v)} == theirs_daily
    sources = _sources(root)
    ours: dict[str, list[int]] = {}
    for row in cli_json(root, "stats", "tokens", "--by", "session")["rows"]:
        totals = ours.setdefault(session_of(row["key"], sources[row["key"]]), [0, 0, 0, 0])
        for index, value in enumerate(_ours(row)):
            totals[index] += value
    theirs = {r["sessionId"]: kinds(r) for r in sessions}
    assert {k: tuple(v) for k, v in ours.items() if any(v)} == theirs


def _claude_store(tmp_path: Path) -> Path:
    """A Claude Code store with what ccusage and pentrace must agree on: streamed rows of one
    message, inline sidechains, a subagent file, a rewind, a compaction, API errors, two days."""
    projects = tmp_path / "claude" / "projects"
    one = ClaudeLog("aaaaaaaa-0000-4000-8000-000000000001")
    for turn in range(4):
        claude_turn(one, turn, calls=turn)
    tip = one.tip
    one.prompt("side task", parent=False, isSidechain=True)
    one.answer([text("side")], message_id="msg_side_1", request_id="req_side_1",
               usage=(4, 9, 30, 3), isSidechain=True)  # fmt: skip
    one.tip = tip
    one.system("api_error", error={"status": 529}, retryInMs=200, retryAttempt=1)
    one.system("compact_boundary", compactMetadata={"trigger": "manual", "preTokens": 1})
    one.prompt("continued", isCompactSummary=True)
    answer = one.answer([text("ok")], message_id="msg_after", request_id="req_after",
                        usage=(1, 2, 3, 4), stop_reason="end_turn")  # fmt: skip
    one.prompt("branch A")
    one.answer([text("A")], message_id="msg_a", request_id="req_a", usage=(5, 5, 5, 5))
    one.prompt("branch B", parent=answer)
    one.answer([text("B")], message_id="msg_b", request_id="req_b", usage=(6, 6, 6, 6))
    one.write(projects / "-home-u-app")
    late = ClaudeLog("x").start.replace(day=4, hour=23, minute=59, second=53)
    two = ClaudeLog("bbbbbbbb-0000-4000-8000-000000000002", cwd="/home/u/other", start=late)
    for turn in range(3):
        claude_turn(two, turn, calls=2)
    two.answer([tool_use("toolu_x", "Task", {})], message_id="msg_task", request_id="req_task",
               usage=(1, 1, 1, 1))  # fmt: skip
    two.result("toolu_x", "done", toolUseResult={"agentId": "feed01"})
    two.write(projects / "-home-u-other")
    child = ClaudeLog("agent-feed01", cwd="/home/u/other")
    child.prompt("look", isSidechain=True, sessionId=two.session_id)
    child.answer([text("seen")], message_id="msg_child", request_id="req_child",
                 usage=(7, 8, 9, 10), isSidechain=True)  # fmt: skip
    child.write(projects / "-home-u-other" / two.session_id / "subagents")
    return tmp_path / "claude"


def test_claude_code_days_and_sessions_equal_ccusage(ccusage: Path, tmp_path: Path) -> None:
    store = _claude_store(tmp_path)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])
    env = {"CLAUDE_CONFIG_DIR": str(store)}

    daily, sessions = _reports(ccusage, "claude", env, tmp_path / "home")

    assert len(daily) == 3
    assert len(sessions) == 2
    _compare(root, daily, sessions, _claude_kinds, _claude_session)


def test_claude_code_reference_files_equal_ccusage(ccusage: Path, tmp_path: Path) -> None:
    folder = reference_folder("claude_code")
    store = tmp_path / "claude"
    # ccusage reads <dir>/projects/<project>/...; it does not follow links, so the layout
    # is made of copies in the test's own folder (the files stay out of the project).
    layout = {
        "ccviewer_sample-project": sorted((folder / "ccviewer_sample-project").glob("*.jsonl")),
        "agentsessions": sorted((folder / "agentsessions").glob("*.jsonl")),
        "alpha": [folder / "ccusage_session-alpha_chat.jsonl"],
    }
    for project, files in layout.items():
        for path in files:
            target = store / "projects" / project / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    parent = folder / "agentsessions" / "subagent"
    for path in parent.rglob("*.jsonl"):
        target = store / "projects" / "agentsessions" / path.relative_to(parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])
    env = {"CLAUDE_CONFIG_DIR": str(store)}

    daily, sessions = _reports(ccusage, "claude", env, tmp_path / "home")

    _compare(root, daily, sessions, _claude_kinds, _claude_session)


def test_claude_code_rows_without_request_id_are_counted_once_where_ccusage_daily_counts_each(
    ccusage: Path, tmp_path: Path
) -> None:
    """ccusage issue #976: its daily report keys a row without ``requestId`` by its timestamp
    too, so the streamed rows of one message count once each; its session report, and
    pentrace, count the message once (at its largest)."""
    store = tmp_path / "claude"
    log = ClaudeLog("cccccccc-0000-4000-8000-000000000003")
    log.prompt("go")
    for output in (5, 50):
        log.answer([text("x")], message_id="msg_nr", request_id=None, usage=(2, output, 10, 1))
    log.write(store / "projects" / "-p")
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])
    env = {"CLAUDE_CONFIG_DIR": str(store)}

    [daily] = _run(ccusage, "claude", "daily", env, tmp_path / "home")["daily"]
    [session] = _run(ccusage, "claude", "session", env, tmp_path / "home")["sessions"]

    [ours] = cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    assert _ours(ours) == (2, 50, 10, 1) == _claude_kinds(session)
    assert _claude_kinds(daily) == (4, 55, 20, 2)  # both rows, each counted


def test_a_message_streamed_across_midnight_counts_each_rows_increase_on_its_own_day(
    ccusage: Path, tmp_path: Path
) -> None:
    """ccusage files a deduplicated message under the day of its largest row; pentrace writes
    each row's increase when the row comes, on the row's day, and never takes a record back
    (a live import cannot know a larger row will follow).  The totals are equal."""
    store = tmp_path / "claude"
    log = ClaudeLog("dddddddd-0000-4000-8000-000000000004",
                    start=ClaudeLog("x").start.replace(hour=23, minute=59, second=57))  # fmt: skip
    log.prompt("go")
    for output in (5, 50):  # 23:59:59, then 00:00:00 the next day
        log.answer([text("x")], message_id="msg_m", request_id="req_m", usage=(2, output, 10, 1))
    log.write(store / "projects" / "-p")
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])

    [daily] = _run(ccusage, "claude", "daily", {"CLAUDE_CONFIG_DIR": str(store)}, tmp_path / "h")[
        "daily"
    ]

    ours = {r["key"]: _ours(r) for r in cli_json(root, "stats", "tokens", "--by", "day")["rows"]}
    assert (daily["date"], _claude_kinds(daily)) == ("2025-09-04", (2, 50, 10, 1))
    assert ours == {"2025-09-03": (2, 5, 10, 1), "2025-09-04": (0, 45, 0, 0)}


def _codex_kinds(row: dict[str, Any]) -> Kinds:
    return (
        row["inputTokens"],
        row["outputTokens"],
        row["cacheReadTokens"],
        row["cacheCreationTokens"],
    )


def _codex_session(reference: str, source: str) -> str:
    """ccusage's Codex session: the rollout's path under ``sessions/`` (or
    ``archived_sessions/``), without its extension."""
    parts = Path(source).with_suffix("").parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in ("sessions", "archived_sessions"):
            return "/".join(parts[index + 1 :])
    return Path(source).stem


def test_codex_days_and_sessions_equal_ccusage(ccusage: Path, tmp_path: Path) -> None:
    home = tmp_path / "codex"
    first = CodexLog("0199aaaa-0000-7000-8000-000000000001")
    first.meta()
    first.context("gpt-5-codex")
    for turn in range(3):
        codex_turn(first, turn, calls=turn)
    first.context("gpt-5.1-codex")
    codex_turn(first, 3, calls=2)
    first.write(home)
    late = first.start.replace(hour=23, minute=59, second=40)
    second = CodexLog("0199aaaa-0000-7000-8000-000000000002", cwd="/srv/other", start=late)
    second.meta()
    second.context("gpt-5")
    for turn in range(4):
        codex_turn(second, turn, calls=1)  # runs past midnight
    second.write(home, archived=True)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "codex", [home])
    env = {"CODEX_HOME": str(home)}

    daily, sessions = _reports(ccusage, "codex", env, tmp_path / "home")

    assert len(daily) == 2
    assert len(sessions) == 2
    _compare(root, daily, sessions, _codex_kinds, _codex_session)


def test_a_forked_codex_rollout_equals_ccusage(ccusage: Path, tmp_path: Path) -> None:
    """A fork copies its parent's history, token counts included: neither tool counts the
    copy again (the copy stamped at the fork's creation, or keeping the parent's times)."""
    home = tmp_path / "codex"
    parent = CodexLog("0199aaaa-0000-7000-8000-000000000010")
    parent.meta()
    parent.context("gpt-5")
    for turn in range(2):
        codex_turn(parent, turn, calls=1)
    parent.write(home)
    for number, preserved in ((1, False), (2, True)):
        made = parent.start + timedelta(hours=number)
        fork = CodexLog(f"0199aaaa-0000-7000-8000-00000000001{number}", start=made)
        fork.meta(forked_from_id=parent.session_id)
        stamp = fork.rows[0]["timestamp"]
        fork.rows.extend(dict(row) if preserved else {**row, "timestamp": stamp}
                         for row in parent.rows)  # fmt: skip
        fork.totals = list(parent.totals)
        fork.step += 30
        codex_turn(fork, number, calls=1)
        fork.write(home)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "codex", [home])

    daily, sessions = _reports(ccusage, "codex", {"CODEX_HOME": str(home)}, tmp_path / "home")

    assert len(sessions) == 3
    _compare(root, daily, sessions, _codex_kinds, _codex_session)


def test_codex_reference_files_equal_ccusage(ccusage: Path, tmp_path: Path) -> None:
    folder = reference_folder("codex")
    home = tmp_path / "codex"
    for path in sorted(folder.rglob("*.jsonl")):
        target = home / "sessions" / "2026" / "01" / "01" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "codex", [home])
    env = {"CODEX_HOME": str(home)}

    daily, sessions = _reports(ccusage, "codex", env, tmp_path / "home")

    assert len(sessions) == 4
    _compare(root, daily, sessions, _codex_kinds, _codex_session)


def _opencode_kinds(row: dict[str, Any]) -> Kinds:
    return _claude_kinds(row)


def test_opencode_days_and_sessions_equal_ccusage(ccusage: Path, tmp_path: Path) -> None:
    folder = tmp_path / "opencode"
    db = OpenCodeDb(folder)
    for number in range(3):
        sid = f"ses_{number:012d}"
        db.session(sid, directory=f"/home/u/app{number}")
        for turn in range(4):
            db.user(sid, f"step {turn}")
            db.assistant(sid, [opencode_tool(f"c{number}{turn}", "bash", "ok"),
                               {"type": "text", "text": "done"}],
                         tokens=(100 + turn, 20 * number, 900, 40 + turn))  # fmt: skip
        db.clock += 86_400_000  # the next session a day later
    db.close()
    storage = reference_folder("opencode", "agentsessions", "storage_v2")
    shutil.copytree(storage, folder / "storage")
    root = tmp_path / "data"
    import_agent(DataRoot(root), "opencode", [folder])
    env = {"OPENCODE_DATA_DIR": str(folder)}

    daily, sessions = _reports(ccusage, "opencode", env, tmp_path / "home")

    assert len(daily) == 4
    assert len(sessions) == 4
    _compare(root, daily, sessions, _opencode_kinds, lambda reference, _: reference.split("/")[2])


def test_gemini_days_and_sessions_equal_ccusage(ccusage: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    chats = home / ".gemini" / "tmp"
    for number in range(2):
        chat = GeminiChat(f"6a6a6a6a-0000-4000-8000-00000000000{number}")
        chat.start = chat.start.replace(day=5 + number)
        for turn in range(3):
            chat.user(f"step {turn}")
            chat.reply("", calls=[gemini_call(f"c{number}{turn}", "ok")],
                       tokens=(1000 + turn, 40, 300 * number, 0))  # fmt: skip
        chat.write(chats / f"project{number}")
    jsonl_chat = GeminiChat("6a6a6a6a-0000-4000-8000-0000000000ff")
    jsonl_chat.user("hi")
    jsonl_chat.reply("hello", tokens=(500, 9, 100, 0))
    path = chats / "project9" / "chats" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(jsonl([jsonl_chat.header(), *jsonl_chat.messages]))
    for file in sorted(reference_folder("gemini").rglob("*.json*")):
        target = chats / "reference" / "chats" / file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
    root = tmp_path / "data"
    import_agent(DataRoot(root), "gemini", [chats])

    daily, sessions = _reports(ccusage, "gemini", {}, home)

    assert len(sessions) == 6
    _compare(root, daily, sessions, _claude_kinds, lambda reference, _: reference.split("/")[2])


def test_gemini_thoughts_count_as_output_where_ccusage_leaves_them_out(
    ccusage: Path, tmp_path: Path
) -> None:
    """Gemini bills thinking tokens as output; ccusage 20.0.24 counts ``tokens.output``
    alone, pentrace adds ``tokens.thoughts`` to it.  Every other kind is equal."""
    home = tmp_path / "home"
    chat = GeminiChat("6a6a6a6a-0000-4000-8000-0000000000aa")
    chat.user("think hard")
    chat.reply("done", tokens=(800, 30, 200, 70))
    chat.write(home / ".gemini" / "tmp" / "p")
    root = tmp_path / "data"
    import_agent(DataRoot(root), "gemini", [home / ".gemini" / "tmp"])

    [daily], _ = _reports(ccusage, "gemini", {}, home)

    [ours] = cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    assert _claude_kinds(daily) == (600, 30, 200, 0)
    assert _ours(ours) == (600, 30 + 70, 200, 0)


def test_claude_code_rows_ccusage_refuses_are_counted(ccusage: Path, tmp_path: Path) -> None:
    """ccusage's loader drops a usage row whose ``requestId`` is empty or whose ``version``
    is not a version number; the tokens were still spent, and pentrace counts them."""
    store = tmp_path / "claude"
    log = ClaudeLog("eeeeeeee-0000-4000-8000-000000000005")
    log.prompt("go")
    log.answer([text("counted by both")], message_id="msg_ok", request_id="req_ok",
               usage=(1, 2, 3, 4))  # fmt: skip
    log.answer([text("empty request id")], message_id="msg_e", request_id="", usage=(10, 0, 0, 0))
    log.answer([text("odd version")], message_id="msg_v", request_id="req_v",
               usage=(100, 0, 0, 0), version="dev")  # fmt: skip
    log.write(store / "projects" / "-p")
    root = tmp_path / "data"
    import_agent(DataRoot(root), "claude-code", [store])

    [daily], _ = _reports(ccusage, "claude", {"CLAUDE_CONFIG_DIR": str(store)}, tmp_path / "h")

    [ours] = cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    assert _claude_kinds(daily) == (1, 2, 3, 4)
    assert _ours(ours) == (111, 2, 3, 4)


def test_opencode_messages_without_a_model_are_counted(ccusage: Path, tmp_path: Path) -> None:
    """ccusage skips an OpenCode message whose ``modelID`` is empty; its tokens count here."""
    folder = tmp_path / "opencode"
    db = OpenCodeDb(folder)
    db.session("ses_nomodel")
    db.user("ses_nomodel", "go")
    db.assistant("ses_nomodel", [{"type": "text", "text": "a"}], tokens=(5, 6, 7, 8))
    db.assistant("ses_nomodel", [{"type": "text", "text": "b"}], tokens=(50, 0, 0, 0), model="")
    db.close()
    root = tmp_path / "data"
    import_agent(DataRoot(root), "opencode", [folder])

    [daily], _ = _reports(ccusage, "opencode", {"OPENCODE_DATA_DIR": str(folder)}, tmp_path / "h")

    [ours] = cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    assert _claude_kinds(daily) == (5, 6, 7, 8)
    assert _ours(ours) == (55, 6, 7, 8)
