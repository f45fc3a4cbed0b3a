"""``pentrace demo``: record a realistic session through the library, then look at it with the CLI.

The session is written with the library's ``SessionApplication``
(:mod:`pentrace.infrastructure.eventstore.application`) exactly as a harness
would: tool calls with approvals (one denied, one whose
output failed), a request that fails and is retried, token usage, a subagent
child session, a ``summarize`` compaction (so the trace rotates to a second
shard) and a finished goal.  Then the demo runs ``list``, ``replay``,
``audit`` (``resume-check`` when audit is not installed), ``show`` and
``stats`` when present, printing what each shows.
"""

from __future__ import annotations

import json
import shlex
import tempfile
import weakref
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from pentrace.cli.lazy import CLICK_ERROR, report_usage_error
from pentrace.cli.sessions.args import data_root
from pentrace.errors import PentraceError
from pentrace.infrastructure.operations.facade import SessionApplication, SessionHandle
from pentrace.infrastructure.operations.sessions import DataRoot

__all__ = ["demo", "record_demo_session", "stepping_clock"]

PROJECT = "demo_project"
AGENT = "demo_agent"
TOOLS = [
    {"name": "exec_command", "description": "Run a shell command in the workspace."},
    {"name": "write_file", "description": "Write a file in the workspace."},
]


def stepping_clock(start: datetime, step: timedelta) -> Callable[[], datetime]:
    """A clock that moves ``step`` per reading, so the trace reads like a real run."""
    ticks = [start]

    def now() -> datetime:
        ticks[0] += step
        return ticks[0]

    return now


def _call(handle: SessionHandle, call_id: str, name: str, arguments: str, **answer: Any) -> None:
    handle.record_tool_call(name, arguments, call_id, stop_reason="completed")
    handle.decide_approval(call_id, answer.pop("decision", "allow"))
    if "output" in answer:
        handle.record_tool_output(call_id, answer.pop("output"), **answer)


def _write_then_run(
    main: SessionHandle, first: int, greeting: str, command: str, result: str, answer: str
) -> None:
    """Calls ``call_<first>`` (write hello.py) and the next (run ``command``), then answer."""
    script = json.dumps({"path": "hello.py", "text": f"print('{greeting}')"}, separators=(",", ":"))
    _call(main, f"call_{first}", "write_file", script, output="ok")
    run = json.dumps({"cmd": command}, separators=(",", ":"))
    _call(main, f"call_{first + 1}", "exec_command", run, output=result)
    main.record_text(answer, stop_reason="completed")
    main.end_request("completed")


_FIELDS = ("cache_read", "cache_write", "output", "total")


def _usage(handle: SessionHandle, total: int, last: int) -> None:
    """Record one request's tokens; session counts are running sums, as providers report."""
    request = {
        "cache_read": last // 3,
        "cache_write": 512 if total == last else 0,  # the first request writes the prompt cache
        "output": last // 10,
        "total": last,
    }
    session = _running_totals.setdefault(handle, dict.fromkeys(_FIELDS, 0))
    for name in _FIELDS:
        session[name] += request[name]
    assert session["total"] == total, "demo token totals must add up"
    handle.record_token_usage(dict(session), request)


# Keyed by the handle itself, not id(handle): a later demo in the same process may get
# a new handle at a freed address, and would then add to the old session's totals.
_running_totals: weakref.WeakKeyDictionary[SessionHandle, dict[str, int]] = (
    weakref.WeakKeyDictionary()
)


def _record_turns(app: SessionApplication, main: SessionHandle) -> str:
    main.record_user_input("Add a greeting script and run it.")
    main.begin_request()
    main.record_thinking("The user wants hello.py; write it, then run it.", stop_reason="completed")
    _write_then_run(main, 1, "hello", "python hello.py", "hello", "hello.py prints 'hello'.")
    _usage(main, 2400, 2400)

    main.record_user_input("Now run the test suite.")
    main.begin_request()
    main.end_request("failed", error_message="provider overloaded (HTTP 529)", attempt=1)
    main.begin_request()  # the harness retries the same input
    denied = "[denied: the user refused this command]"
    _call(main, "call_3", "exec_command", '{"cmd":"rm -rf build"}', decision="deny", output=denied)
    _call(
        main,
        "call_4",
        "exec_command",
        '{"cmd":"pytest -q"}',
        output="1 failed, 3 passed\nFAILED test_hello.py::test_greeting",
        stop_reason="failed",
    )
    main.record_text(
        "One test fails: it expects 'Hello' with a capital H.", stop_reason="completed"
    )
    main.end_request("completed")
    _usage(main, 5900, 3500)

    child = app.spawn_subagent(main, system_prompt="You review small diffs.")
    child.record_user_input("Review: print('hello') -> print('Hello')")
    child.begin_request()
    child.record_text("The change is correct and minimal.", stop_reason="completed")
    child.end_request("completed")
    _usage(child, 800, 800)
    child.close()
    return child.session_id


def _record_compaction_and_finish(main: SessionHandle) -> None:
    main.begin_compaction("context", "summarize", context=5900, turns=2)
    main.begin_request()
    summary = "[summary]Wrote hello.py; one failing test expects a capital H.[/summary]"
    main.record_text(summary, stop_reason="completed")
    main.end_request("completed")
    main.end_compaction("completed")  # the next record opens shard _002

    main.record_user_input("Fix the greeting and rerun the tests.")
    main.begin_request()
    _write_then_run(main, 5, "Hello", "pytest -q", "4 passed", "Fixed: all 4 tests pass.")
    _usage(main, 7300, 1400)
    main.finish_goal("complete", rounds=4, tokens_used=7300)


def record_demo_session(root: DataRoot, start: datetime) -> tuple[str, str]:
    """Write the demo session and its subagent child under ``root``; return both ids."""
    with SessionApplication(
        root, PROJECT, AGENT, clock=stepping_clock(start, timedelta(milliseconds=350))
    ) as app:
        main = app.start_session(
            provider="deepseek",
            model_id="deepseek-v4-pro",
            model_context_window=1_000_000,
            system_prompt="You are a careful coding agent.",
            workspace=None,  # a fresh workspaces/tmp-<8hex>, as PenguinHarness makes one
            tools=TOOLS,
        )
        child_id = _record_turns(app, main)
        _record_compaction_and_finish(main)
        main.close()
        return main.session_id, child_id


def _run(root: DataRoot, *args: str) -> bool:
    """Run one CLI command in this process and print what it prints; False when it failed."""
    from pentrace.cli.app import app, report_error  # app imports this module: import late

    typer.secho(f"\n$ pentrace {' '.join(args)}", bold=True)
    command = typer.main.get_command(app)
    argv = ["--data-root", str(root.path), *args]
    try:
        code = command.main(args=argv, prog_name="pentrace", standalone_mode=False)
    except PentraceError as error:
        report_error(error)
        return False
    except CLICK_ERROR as error:  # typer's click, which may be its own vendored copy
        report_usage_error(error)
        return False
    if isinstance(code, int) and code != 0:
        # audit exits 1 for warnings: shown, but the demo itself went fine.
        typer.echo(f"(exit code {code})")
    return True


def demo(ctx: typer.Context) -> None:
    """Record a sample session, then look at it with the commands.

    The session is realistic: tool calls, approvals, a retried request, a
    subagent and a compaction.  Then the demo lists, replays, audits and
    summarises it.

    Writes into --data-root when given on the command line (run it again there
    to add two more sessions), else into a new temporary folder, kept so you
    can explore it with the commands the demo prints, which also say how to
    remove it; PENGUIN_HOME is never used, so real sessions stay untouched.

    Example: pentrace demo

    Example: pentrace --data-root /tmp/pentrace-demo demo
    """
    root_ctx = ctx.find_root()
    settings: Any = root_ctx.obj
    # Only an explicit --data-root: a PENGUIN_HOME in the environment is the user's
    # real data, and the demo must not mix sample sessions into it.
    given = root_ctx.get_parameter_source("data_root")
    if (
        getattr(settings, "data_root", None) is not None
        and given is not None
        and given.name == "COMMANDLINE"
    ):
        root = data_root(ctx, must_exist=False)
        made = None
    else:
        made = Path(tempfile.mkdtemp(prefix="pentrace-demo-"))
        root = DataRoot(made / "data")
    # Start a little in the past: the stepping clock runs ahead of the wall clock.
    main_id, child_id = record_demo_session(root, datetime.now(UTC) - timedelta(minutes=1))
    typer.echo(f"data root: {root.path}")
    typer.echo(f"recorded session {main_id} and its subagent {child_id}")
    short = main_id[-8:]
    steps: list[tuple[str, ...]] = [
        ("list",),
        ("replay", short, "--no-pager", "--include-uncommitted"),
        ("show", short),
        ("ledger", "sync"),
        ("audit", short),
        ("stats", "tokens", "--by", "session"),
        ("stats", "tools"),
    ]
    failed = [step[0] for step in steps if not _run(root, *step)]
    typer.echo(f"\nexplore further: pentrace --data-root {shlex.quote(str(root.path))} list")
    if made is not None:
        typer.echo(
            f"this demo root is kept; remove it with: rm -r {shlex.quote(str(made))}\n"
            f"(or give the demo a root to reuse: pentrace --data-root DIR demo)"
        )
    if failed:
        typer.echo(f"demo steps that failed: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
