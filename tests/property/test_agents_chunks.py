"""A store imported in one go, and the same store imported while it is appended in random
chunks (torn lines included), give the same sessions, records and usage (issue #28).

The records are compared byte for byte, so this also ties the import's cursors,
its saved mapping state and its usage keys to one whole read: whatever a pass
leaves for the next (an open request, open tool calls, a torn line, a
sidechain, a fork) comes back exactly as one pass would have carried it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    text,
    tool_use,
)
from tests.support import BOUNDED_PROPERTY

pytestmark = pytest.mark.usefixtures("own_stores")

_STEP = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 3)),
    st.tuples(st.just("side"), st.integers(1, 3)),
    st.tuples(st.just("unknown"), st.just(0)),
    st.tuples(st.just("malformed"), st.just(0)),
    st.tuples(st.just("error"), st.just(0)),
    st.tuples(st.just("rewind"), st.integers(0, 50)),
    st.tuples(st.just("compact"), st.just(0)),
    st.tuples(st.just("dangling"), st.just(0)),
)


def _write_log(name: str, steps: list[tuple[str, int]]) -> bytes:
    log = ClaudeLog(name)
    chunks: list[bytes] = []
    for index, (kind, value) in enumerate(steps):
        if kind == "turn":
            claude_turn(log, index, calls=value)
        elif kind == "side":
            tip = log.tip
            log.prompt(f"side {index}", parent=False, isSidechain=True)
            for row in range(value):
                log.answer([text(f"s{row}")], message_id=f"m_{name[:4]}_{index}_{row}",
                           request_id=f"r{index}", isSidechain=True)  # fmt: skip
            log.tip = tip
        elif kind == "unknown":
            log.other({"type": "mystery", "n": index})
        elif kind == "malformed":
            chunks.append(log.data())
            log.rows.clear()
            chunks.append(b"{torn json\n")
        elif kind == "error":
            log.system("api_error", error={"status": 529}, retryInMs=100, retryAttempt=index)
        elif kind == "rewind":
            messages = [r["uuid"] for r in log.rows if r["type"] in ("user", "assistant")]
            if messages:
                parent = messages[value % len(messages)]
                log.prompt(f"again {index}", parent=parent)
                log.answer([text("again")], message_id=f"m_{name[:4]}_{index}_rw",
                           request_id=f"rw{index}", stop_reason="end_turn")  # fmt: skip
        elif kind == "compact":
            log.system("compact_boundary", compactMetadata={"trigger": "auto", "preTokens": 9})
            log.prompt("continued", isCompactSummary=True)
        elif kind == "dangling":
            log.prompt("go")
            log.answer([tool_use(f"t{index}", "Bash", {})], message_id=f"m_{name[:4]}_{index}_d",
                       request_id=f"d{index}")  # fmt: skip
    chunks.append(log.data())
    return b"".join(chunks)


def _traces(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.glob("*/agents/*/traces/*/*.jsonl"))
    }


@settings(BOUNDED_PROPERTY, max_examples=30)
@given(
    st.lists(st.lists(_STEP, min_size=1, max_size=8), min_size=1, max_size=2),
    st.data(),
)
def test_importing_while_the_files_grow_gives_what_one_import_gives(
    logs: list[list[tuple[str, int]]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        store = base / "claude" / "projects" / "-w"
        store.mkdir(parents=True)
        contents = {
            store / f"{index:04d}aaaa-0000-4000-8000-00000000000{index}.jsonl": _write_log(
                f"{index:04d}aaaa-0000-4000-8000-00000000000{index}", steps
            )
            for index, steps in enumerate(logs)
        }
        _grow_and_compare(base, "claude-code", store, contents, data)


def _grow_and_compare(
    base: Path, agent: str, store: Path, contents: dict[Path, bytes], data: st.DataObject
) -> None:
    """Import ``contents`` in one go, then again (into another root) while each file grows
    through random cut points, and check both roots hold the same traces byte for byte."""
    for path, content in contents.items():
        path.write_bytes(content)
    import_agent(DataRoot(base / "one"), agent, [store])
    cuts = {
        path: sorted(data.draw(st.lists(st.integers(0, len(content)), max_size=4), label=path.name))
        for path, content in contents.items()
    }
    for path in contents:
        path.write_bytes(b"")
    for step in range(max(len(points) for points in cuts.values()) + 1):
        for path, content in contents.items():
            points = cuts[path]
            path.write_bytes(content[: points[step] if step < len(points) else len(content)])
        import_agent(DataRoot(base / "chunks"), agent, [store])

    one, chunked = _traces(base / "one"), _traces(base / "chunks")
    assert one.keys() == chunked.keys()
    for name in one:
        assert chunked[name] == one[name], name
    rows = [
        line
        for content in one.values()
        for line in content.splitlines()
        if b'"row":' in line or b'"bytes":' in line
    ]
    # Every source line kept exactly once (a file with no timestamped line waits for one).
    lines = sum(
        len([x for x in c.split(b"\n") if x.strip()])
        for c in contents.values()
        if b'"timestamp"' in c
    )
    assert len(rows) == lines


_CODEX_STEP = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 3)),
    st.tuples(st.just("model"), st.integers(0, 3)),
    st.tuples(st.just("abort"), st.just(0)),
    st.tuples(st.just("compact"), st.just(0)),
    st.tuples(st.just("unknown"), st.just(0)),
)


def _codex_log(name: str, steps: list[tuple[str, int]], fork: bool = False) -> bytes:
    log = CodexLog(name)
    if fork:  # a fork: the parent's history copied at its creation, usage and all
        parent = CodexLog("0199ffff-0000-7000-8000-000000000001")
        parent.meta()
        for turn in range(2):
            codex_turn(parent, turn, calls=turn)
        log.meta(forked_from_id=parent.session_id)
        stamp = log.rows[0]["timestamp"]
        log.rows.extend({**row, "timestamp": stamp} for row in parent.rows)
        log.totals = list(parent.totals)
        log.step += 30
    else:
        log.meta()
    for index, (kind, value) in enumerate(steps):
        if kind == "turn":
            codex_turn(log, index, calls=value)
        elif kind == "model":
            log.context(f"gpt-5.{value}")
        elif kind == "abort":
            log.user("stop")
            log.call(f"c{index}", "sleep 9")
            log.line("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
        elif kind == "compact":
            log.line("compacted", {"message": f"summary {index}"})
        else:
            log.line("mystery", {"n": index})
    return log.data()


@settings(BOUNDED_PROPERTY, max_examples=20)
@given(
    st.lists(st.tuples(st.lists(_CODEX_STEP, max_size=6), st.booleans()), min_size=1, max_size=2),
    st.data(),
)
def test_a_codex_store_imported_while_it_grows_gives_what_one_import_gives(
    logs: list[tuple[list[tuple[str, int]], bool]], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        home = base / "codex"
        contents: dict[Path, bytes] = {}
        for index, (steps, fork) in enumerate(logs):
            name = f"0199aaaa-0000-7000-8000-00000000000{index}"
            path = CodexLog(name).path_in(home)
            path.parent.mkdir(parents=True, exist_ok=True)
            contents[path] = _codex_log(name, steps, fork)
        _grow_and_compare(base, "codex", home, contents, data)


def _gemini_chat(steps: list[int]) -> GeminiChat:
    chat = GeminiChat("7b7b7b7b-0000-4000-8000-000000000001")
    for index, calls in enumerate(steps):
        chat.user(f"step {index}")
        chat.reply(f"answer {index}", tokens=(100 + index, 10, 50, 3),
                   calls=[gemini_call(f"c{index}{n}", "ok") for n in range(calls)])  # fmt: skip
    return chat


@settings(BOUNDED_PROPERTY, max_examples=15)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=6), st.data())
def test_a_gemini_jsonl_chat_imported_while_it_grows_gives_what_one_import_gives(
    steps: list[int], data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        store = base / "gemini"
        path = store / "p" / "chats" / "chat.jsonl"
        path.parent.mkdir(parents=True)
        chat = _gemini_chat(steps)
        _grow_and_compare(base, "gemini", store, {path: jsonl([chat.header(), *chat.messages])},
                          data)  # fmt: skip


@settings(BOUNDED_PROPERTY, max_examples=15)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=6), st.data())
def test_a_gemini_json_chat_imported_at_each_rewrite_gives_what_one_import_gives(
    steps: list[int], data: st.DataObject
) -> None:
    """The JSON form is rewritten whole: import after random rewrites (first k messages)."""
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        store = base / "gemini" / "p"
        chat = _gemini_chat(steps)
        whole = list(chat.messages)
        chat.write(store)
        import_agent(DataRoot(base / "one"), "gemini", [base / "gemini"])
        cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), max_size=4)))
        for cut in [*cuts, len(whole)]:
            chat.messages = whole[:cut]
            chat.write(store)
            import_agent(DataRoot(base / "grown"), "gemini", [base / "gemini"])
        assert _traces(base / "one") == _traces(base / "grown")


@settings(BOUNDED_PROPERTY, max_examples=15)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=6),
    st.data(),
)
def test_an_opencode_database_imported_while_it_grows_gives_what_one_import_gives(
    turns: list[tuple[int, int]], data: st.DataObject
) -> None:
    """Messages added turn by turn (an answer written in two steps: created, then its parts
    and completion), imported at random moments, against one import of the whole."""
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        db = OpenCodeDb(base / "opencode")
        db.session("ses_grow")
        points = set(data.draw(st.lists(st.integers(0, 2 * len(turns)), max_size=4)))
        for index, (calls, session) in enumerate(turns):
            sid = "ses_grow" if session else "ses_grow2"
            if index == 0 or not session:
                with contextlib.suppress(sqlite3.IntegrityError):
                    db.session(sid)
            db.user(sid, f"step {index}")
            parts = [opencode_tool(f"c{index}{n}", "bash", "ok") for n in range(calls)]
            mid = db.assistant(sid, [], complete=False)
            if 2 * index in points:
                import_agent(DataRoot(base / "grown"), "opencode", [base / "opencode"])
            for part in [*parts, {"type": "text", "text": f"done {index}"}]:
                db.part(sid, mid, part)
            db.complete(mid)
            if 2 * index + 1 in points:
                import_agent(DataRoot(base / "grown"), "opencode", [base / "opencode"])
        db.close()
        import_agent(DataRoot(base / "grown"), "opencode", [base / "opencode"])
        import_agent(DataRoot(base / "one"), "opencode", [base / "opencode"])
        assert _traces(base / "one") == _traces(base / "grown")
