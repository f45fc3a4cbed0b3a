"""Other agents' sessions leave by OpenTelemetry as pentrace's own do (issues #28, #29).

The real files of Claude Code, Codex CLI, OpenCode and Gemini CLI in
``shared/reference/foreign-sessions`` are imported, then ``pentrace otel export``
sends them to an OTLP/HTTP receiver on a loopback port.  What arrives is checked
against the imported history and against ``pentrace stats``: one model span per
request, one tool span per tool call, every parent present, the tokens adding up,
each agent named, and a second export repeating the same ids.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pentrace import testing as pt
from pentrace.infrastructure.agents.importer import import_agent
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.reader import read_session
from tests.foreign_logs import reference_folder
from tests.otel_support import ReceivedSpan, Receiver
from tests.support import cli_json, cli_ok

pytestmark = pytest.mark.usefixtures("own_stores")

# The agent's name on the CLI, and its files in the reference set.
SOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("claude-code", ("claude_code",)),
    ("codex", ("codex",)),
    ("opencode", ("opencode", "agentsessions", "storage_v2")),
    ("gemini", ("gemini",)),
)
MODEL = ("chat", "generate_content", "text_completion")  # the operations of a model span
USAGE = ("input_tokens", "output_tokens", "cache_read.input_tokens", "cache_creation.input_tokens")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("otel-agents") / "data"
    for agent, folder in SOURCES:
        import_agent(DataRoot(data), agent, [reference_folder(*folder)])
    return data


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


def _records_by_agent(root: Path) -> dict[str, Counter[str]]:
    """Per agent: how many requests and tool calls of its own the imported history holds."""
    counts: dict[str, Counter[str]] = {}
    data = DataRoot(root)
    for ref in data.iter_sessions():
        tally = counts.setdefault(ref.key.agent, Counter())
        for record in read_session(ref.shards):
            if record.ptype == "request_begin":
                tally["requests"] += 1
            elif record.ptype == "tool_call" and not record.has_origin:
                tally["calls"] += 1
    return counts


def _agent_of(span: ReceivedSpan, spans: dict[str, ReceivedSpan]) -> str:
    """The ``gen_ai.agent.name`` of the task span a span hangs under."""
    while span.parent_id:
        span = spans[span.parent_id]
    return str(span.attributes["gen_ai.agent.name"])


def test_each_agents_sessions_export_whole_and_add_up_to_stats(
    root: Path, receiver: Receiver
) -> None:
    report = json.loads(
        cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0", "--json").stdout
    )
    assert report["failed_sessions"] == []
    held = receiver.held()
    assert report["spans"] == len(held) == len(receiver.copies)
    # Every parent is held, in the same trace.
    for span in held.values():
        if span.parent_id:
            assert held[span.parent_id].trace_id == span.trace_id

    want = _records_by_agent(root)
    assert set(want) == {agent for agent, _ in SOURCES}
    got: dict[str, Counter[str]] = {agent: Counter() for agent in want}
    for span in held.values():
        operation = str(span.attributes.get("gen_ai.operation.name"))
        agent = _agent_of(span, held)
        if operation in MODEL:
            got[agent]["requests"] += 1
        elif operation == "execute_tool":
            got[agent]["calls"] += 1
    for agent, tally in want.items():
        assert tally["requests"] > 0, f"{agent}: the import made no request"
        assert got[agent]["requests"] == tally["requests"], agent
        assert got[agent]["calls"] == tally["calls"], agent

    # The token counts add up to `pentrace stats tokens`, agent by agent.
    stats = cli_json(root, "stats", "tokens", "--by", "agent")["rows"]
    for row in stats:
        agent = str(row["key"])
        mine = [s.attributes for s in held.values() if _agent_of(s, held) == agent]
        # A model span carries its request's usage; usage the agent logged outside any
        # request (a Codex token_count before its turn, say) rides on the task span.
        total = {
            name: sum(
                int(a.get(f"gen_ai.usage.{name}", 0))
                + int(a.get(f"pentrace.unattributed.{name}", 0))
                for a in mine
            )
            for name in USAGE
        }
        assert total["output_tokens"] == row["output"], agent
        assert total["cache_read.input_tokens"] == row["cache_read"], agent
        assert total["cache_creation.input_tokens"] == row["cache_write"], agent
        assert total["input_tokens"] == (
            row["input"] + total["cache_read.input_tokens"] + total["cache_creation.input_tokens"]
        ), agent

    # Again: the same ids, the same spans.
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    assert len(receiver.copies) == 2 * len(held)
    assert set(receiver.held()) == set(held)


def test_usage_logged_before_any_prompt_opens_a_task_that_carries_it(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A session whose first usage precedes every prompt and request (as Codex logs a
    ``token_count`` ahead of its turn) still sends those tokens, on a task span."""
    data = tmp_path / "data"
    pt.write_trace(
        data,
        [
            pt.StartSession(),
            pt.TokenUsage(pt.TokenCounts(5, 7, 11, 13), pt.TokenCounts(5, 7, 11, 13)),
            pt.UserInput("go"),
            pt.BeginRequest(),
            pt.EndRequest(),
        ],
        project="p",
        agent="a",
        session_id="session-2026-07-18-11-10-22-0000abcd",
    )
    cli_ok(data, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    tasks = [s.attributes for s in receiver.held().values() if not s.parent_id]
    carried = {
        name: sum(int(a.get(f"pentrace.unattributed.{name}", 0)) for a in tasks) for name in USAGE
    }
    stats = cli_json(data, "stats", "tokens")["rows"]
    assert carried["output_tokens"] == sum(row["output"] for row in stats) > 0
    assert carried["cache_read.input_tokens"] == sum(row["cache_read"] for row in stats)
