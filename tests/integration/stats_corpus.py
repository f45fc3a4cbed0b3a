"""A data root for pictures: three projects, three models, two months with a long gap.

Days 2026-08-01 .. 2026-08-30 and 2026-11-10 .. 2026-11-29 (a 2.5-month gap),
sessions of millions of tokens (so an axis would reach for a ``1e7`` offset),
written through the real :class:`SessionApplication`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from pentrace.cli.demo import stepping_clock
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot

PROJECTS = ("web_shop", "data_pipeline", "infra")
MODELS = (("deepseek", "deepseek-v4-pro"), ("anthropic", "claude-opus-5"), ("openai", "gpt-6"))


def corpus_days() -> Iterator[date]:
    first = date(2026, 8, 1)
    yield from (first + timedelta(days=n) for n in range(30))
    later = date(2026, 11, 10)
    yield from (later + timedelta(days=n) for n in range(20))


def build_stats_corpus(path: Path) -> DataRoot:
    """Write one session a day (a second on even days); totals grow with the day number."""
    root = DataRoot(path)
    for number, day in enumerate(corpus_days()):
        for extra in range(1 + (number % 2 == 0)):
            project = PROJECTS[(number + extra) % 3]
            provider, model = MODELS[(number * 2 + extra) % 3]
            start = datetime(day.year, day.month, day.day, 9 + extra * 5, tzinfo=UTC)
            with SessionApplication(
                root, project, "agent", clock=stepping_clock(start, timedelta(seconds=2))
            ) as app:
                handle = app.start_session(
                    provider=provider,
                    model_id=model,
                    model_context_window=1_000_000,
                    system_prompt="You are a coding agent.",
                    workspace=None,
                    tools=[{"name": "exec_command", "description": "Run a command."}],
                )
                total = 0
                for turn in range(3):
                    handle.record_user_input(f"step {turn}")
                    handle.begin_request()
                    call = f"call_{turn}"
                    handle.record_tool_call(
                        "exec_command", '{"cmd":"make"}', call, stop_reason="completed"
                    )
                    handle.decide_approval(call, "allow")
                    failed = (number + turn) % 7 == 0
                    handle.record_tool_output(
                        call,
                        "error" if failed else "ok",
                        stop_reason="failed" if failed else "completed",
                    )
                    handle.record_text("done", stop_reason="completed")
                    handle.end_request("completed")
                    last = 400_000 + 90_000 * number + 50_000 * turn
                    total += last
                    request = {
                        "cache_read": last // 3,
                        "cache_write": 0,
                        "output": last // 10,
                        "total": last,
                    }
                    session = {
                        "cache_read": total // 3,
                        "cache_write": 0,
                        "output": total // 10,
                        "total": total,
                    }
                    handle.record_token_usage(session, request)
                handle.close()
    return root
