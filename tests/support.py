"""Helpers shared by pentrace's own tests; ``tests/conftest.py`` wraps some as fixtures.

Import them where a fixture does not fit (at module level, in a parametrize list,
inside a Hypothesis test): ``from tests.support import cli, run_pentrace``.  See
``docs/testing.md`` ("Fixtures for pentrace's own tests") for the list.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import hypothesis
import pytest
import uvicorn
from typer.testing import CliRunner, Result

from pentrace import testing as pt
from pentrace.cli.app import app
from pentrace.cli.demo import record_demo_session
from pentrace.errors import PentraceError
from pentrace.infrastructure.eventstore.application import SessionApplication, SessionHandle
from pentrace.infrastructure.ledger import LedgerDatabase
from pentrace.infrastructure.storage.layout import DataRoot

REPO: Final = Path(__file__).resolve().parents[1]
T = TypeVar("T")
# The session id ``pentrace.testing`` uses by default, and the ``sample_root`` session.
SAMPLE_ID: Final = "session-2026-07-18-11-10-22-3f8a1c2d"

# Every variable that points pentrace at a store, a data root or a policy outside the
# test's own data root.  A test that clears them reads and writes only what it made.
STORE_ENV: Final = (
    "PENGUIN_HOME",
    "PENGUIN_RUNTIME_EVENT_LEDGER_PATH",
    "PENGUIN_RUNTIME_EVENT_LEDGER_URL",
    "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS",
    "PENTRACE_LEDGER_URL",
    "PENTRACE_LEDGER_TABLE_PREFIX",
    "PENTRACE_ANALYTICS_URL",
    "PENTRACE_REDACTION_RULES",
)

# The PostgreSQL server the suite may use; tests that need it skip without it.
POSTGRES_URL: Final = os.environ.get("PENTRACE_TEST_DATABASE_URL")
NO_POSTGRES: Final = "PostgreSQL runs need PENTRACE_TEST_DATABASE_URL"
# ``pytestmark = NEEDS_POSTGRES`` marks a whole module ``postgres`` and skips it without a server.
NEEDS_POSTGRES: Final = [
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason=NO_POSTGRES),
]


@contextlib.contextmanager
def postgres_tables(label: str) -> Iterator[str]:
    """A fresh ledger table prefix ``{label}_<10 hex>_`` on :data:`POSTGRES_URL`.

    Its tables are dropped on the way out.  Only call it where the server is known
    to be there (:data:`NEEDS_POSTGRES`, the ``postgres_url`` fixture).
    """
    assert POSTGRES_URL is not None, NO_POSTGRES
    prefix = f"{label}_{uuid.uuid4().hex[:10]}_"
    try:
        yield prefix
    finally:
        database = LedgerDatabase(POSTGRES_URL, table_prefix=prefix)
        database.drop_all()
        database.close()


@contextlib.contextmanager
def served_in_thread(app: Any, port: int, log_level: str = "error") -> Iterator[str]:
    """Serve the ASGI ``app`` on ``127.0.0.1:port`` in a thread; yields the base URL.

    The server is told to exit, and joined, on the way out.
    """
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the server thread exited"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def clear_store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every :data:`STORE_ENV` variable for the rest of the test."""
    for name in STORE_ENV:
        monkeypatch.delenv(name, raising=False)


@contextlib.contextmanager
def watched_sandbox(
    monkeypatch: pytest.MonkeyPatch, prefix: str, unset: Iterable[str]
) -> Iterator[tuple[Path, list[Path]]]:
    """A fresh folder ``prefix<random>`` plus HOME, cwd and TMPDIR folders the test watches.

    Yields ``(base, [home, cwd, tmp])``: the variables in ``unset`` are cleared, HOME and
    TMPDIR (and :mod:`tempfile`) point at the watched folders and cwd is the second one,
    until the block ends; then the whole folder is removed.
    """
    base = Path(tempfile.mkdtemp(prefix=prefix))
    watched = [base / "home", base / "cwd", base / "tmp"]
    for folder in watched:
        folder.mkdir()
    with monkeypatch.context() as patch:
        for name in unset:
            patch.delenv(name, raising=False)
        patch.setenv("HOME", str(watched[0]))
        patch.chdir(watched[1])
        patch.setenv("TMPDIR", str(watched[2]))
        patch.setattr(tempfile, "tempdir", str(watched[2]))
        try:
            yield base, watched
        finally:
            shutil.rmtree(base, ignore_errors=True)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any ``PENGUIN_*``/``PENTRACE_*`` variable, plus ``extra``.

    For a child process that must see only the settings the test gives it.
    """
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("PENGUIN_", "PENTRACE_"))}
    return {**kept, **extra}


def cli(root: Path, *args: str, input_text: str | None = None) -> Result:
    """Run ``pentrace --data-root root ARGS`` in process; the result keeps any exception."""
    return CliRunner().invoke(app, ["--data-root", str(root), *args], input=input_text)


def cli_raising(root: Path, *args: str) -> Result:
    """:func:`cli`, but a library error is raised (an exit code, even a failing one, is kept)."""
    result = cli(root, *args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def cli_ok(root: Path, *args: str) -> Result:
    """:func:`cli_raising` that must exit with 0."""
    result = cli_raising(root, *args)
    assert result.exit_code == 0, result.output
    return result


def exit_code_of(result: Result) -> int | None:
    """The code ``pentrace`` would exit with after ``result``; ``None`` when the command crashed.

    A library error and an ``OSError`` are printed by ``main()`` as one line and exit with
    their code (1 when they name none); any other exception is a crash.
    """
    error = result.exception
    if isinstance(error, PentraceError | OSError):
        return int(getattr(error, "exit_code", 1))
    if error is None or isinstance(error, SystemExit):
        return result.exit_code
    return None


def cli_json(root: Path, *args: str) -> Any:
    """The parsed stdout of ``pentrace --data-root root ARGS --json``, which must succeed."""
    return json.loads(cli_ok(root, *args, "--json").stdout)


def run_pentrace(
    root: Path | None,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pentrace [--data-root root] ARGS`` as a real process.

    Output is captured as text and stdin is empty.  ``env`` is the child's whole
    environment (default: this process's; see :func:`clean_env`).
    """
    where = [] if root is None else ["--data-root", str(root)]
    return subprocess.run(
        [sys.executable, "-m", "pentrace", *where, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


# The share of pytest's per-test timeout Hypothesis may spend shrinking one failure: the
# rest is for finding it (a whole resume property run takes well under a tenth) and
# reporting it.  Hypothesis's own cap, MAX_SHRINKING_SECONDS (300 s), is as long as the
# timeout itself; its docs name it as the setting to patch.
SHRINK_SHARE: Final = 0.4


# Settings for the resume properties, whose examples are slow (a stateful machine over a
# real data root, or long generated traces): no per-example deadline (a loaded machine
# is not a bug; the per-test timeout bounds the whole run), and no explain phase, which
# re-runs the shrunk example many times after shrinking; print_blob gives the
# @reproduce_failure line, so a failure cut short is replayed exactly.
BOUNDED_PROPERTY: Final = hypothesis.settings(
    deadline=None,
    phases=(
        hypothesis.Phase.explicit,
        hypothesis.Phase.reuse,
        hypothesis.Phase.generate,
        hypothesis.Phase.shrink,
    ),
    print_blob=True,
)


def loaded_by(code: str, *modules: str) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys\nprint(*(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.splitlines()[-1].split() if done.stdout.strip() else []


def bound_shrinking(config: pytest.Config) -> None:
    """Cap Hypothesis's shrinking at :data:`SHRINK_SHARE` of the configured per-test timeout
    (``--timeout`` or the ``timeout`` ini value; no timeout leaves Hypothesis's own cap)."""
    from hypothesis.internal.conjecture import engine

    given = config.getoption("timeout", None) or config.getini("timeout")
    timeout = float(given or 0)
    if timeout > 0:
        engine.MAX_SHRINKING_SECONDS = max(1, int(timeout * SHRINK_SHARE))


def sync_ledger(root: Path, env: Mapping[str, str]) -> None:
    """Index every trace of ``root`` into the ledger ``env`` names (the ledger the analytics
    runner follows), then close it: ``pentrace ledger sync`` in process."""
    # Imported here: most tests never touch the analytics runner.
    from pentrace.infrastructure.analytics.runner import open_ledger
    from pentrace.infrastructure.ledger.bulk import sync

    with contextlib.closing(open_ledger(root, env)) as ledger:
        sync(ledger, root)


def assert_clean_error(
    done: subprocess.CompletedProcess[str], code: int, error: str, hint: str = "hint: "
) -> None:
    """A real process failed as docs/cli.md's conventions say: exit ``code``, stderr starting
    ``error: <error>``, holding ``hint``, and no traceback."""
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith(f"error: {error}"), done.stderr
    assert hint in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def start_sample_session(
    application: SessionApplication, *, workspace: Path | None = None, session_id: str | None = None
) -> SessionHandle:
    """A session started with the suite's usual meta (``gpt-5`` by ``openai``, "be brief")."""
    return application.start_session(
        provider="openai", model_id="gpt-5", model_context_window=200_000,
        system_prompt="be brief", workspace=workspace, session_id=session_id,
    )  # fmt: skip


def record_answered_turn(handle: SessionHandle, question: str, answer: str) -> None:
    """One completed request: the user's ``question`` and a text ``answer``, then saved."""
    handle.record_user_input(question)
    handle.begin_request()
    handle.record_text(answer)
    handle.end_request("completed")


def text_turn(question: str, answer: str, status: str = "completed") -> list[pt.Command]:
    """One round as commands: the user's ``question``, a request answered with the text
    ``answer``, its end with ``status`` (the command twin of :func:`record_answered_turn`)."""
    return [
        pt.UserInput(question),
        pt.BeginRequest(),
        pt.AssistantText(answer),
        pt.EndRequest(status),
    ]


def tool_turn(
    question: str,
    call: pt.ToolCall,
    output: str,
    *,
    approval: str | None = None,
    status: str = "completed",
) -> list[pt.Command]:
    """One round as commands: the user's ``question``, a request making ``call`` (with the
    ``approval`` decision when one is given), the call's ``output``, its end with ``status``."""
    decided = [] if approval is None else [pt.Approval(call.tool_call_id, approval)]
    return [
        pt.UserInput(question),
        pt.BeginRequest(),
        call,
        *decided,
        pt.ToolOutput(call.tool_call_id, output),
        pt.EndRequest(status),
    ]


def list_files_opening() -> list[pt.Command]:
    """A session's first five commands: "list the files", and an answered ``ls`` call."""
    return [
        pt.StartSession(),
        pt.UserInput("list the files"),
        pt.BeginRequest(),
        pt.ToolCall("call_1", "exec_command", '{"cmd":"ls"}'),
        pt.ToolOutput("call_1", "a.txt"),
    ]


def one_turn_session() -> list[pt.Command]:
    """The seven-command sample session: :func:`list_files_opening`, a reply, the end."""
    return [*list_files_opening(), pt.AssistantText("one file"), pt.EndRequest()]


def plain_rows(db: LedgerDatabase) -> list[tuple[int, str, bytes]]:
    """Every row's notification id, event id and envelope as a reader sees them (ADR 0058:
    the columns may leave a derived id out and hold the envelope compressed)."""
    from sqlalchemy import select

    from pentrace.infrastructure.ledger.backend.schema import event_id_of

    events = db.tables.events
    with db.reading("read the test's rows") as conn:
        rows = conn.execute(
            select(events.c.notification_id, event_id_of(events), events.c.event_json).order_by(
                events.c.notification_id
            )
        ).all()
    return [(int(nid), str(event_id), db.codec.plain_json(json)) for nid, event_id, json in rows]


def ledger_file_rows(path: Path) -> list[tuple[int, str, bytes]]:
    """:func:`plain_rows` of a SQLite ledger file, opened read-only."""
    db = LedgerDatabase.for_path(path, read_only=True)
    try:
        return plain_rows(db)
    finally:
        db.close()


def ledger_file_sessions(path: Path) -> list[tuple[str | None, bytes]]:
    """Each row's session id (the column as readers see it) and envelope, in order."""
    from sqlalchemy import select

    db = LedgerDatabase.for_path(path, read_only=True)
    events = db.tables.events
    try:
        with db.reading("read the test's rows") as conn:
            rows = conn.execute(
                select(db.session_column(), events.c.event_json).order_by(events.c.notification_id)
            ).all()
        return [(sid, db.codec.plain_json(json)) for sid, json in rows]
    finally:
        db.close()


def sqlite_rows(path: Path, table: str = "runtime_events") -> int:
    """How many rows a SQLite ledger file holds now (0 before its schema is made)."""
    with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
        try:
            return int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        except sqlite3.OperationalError:  # the schema is not there yet
            return 0


def kill_sync_after(
    root: Path, path: Path, rows: int, seen: Callable[[Path], T] | None = None
) -> T | None:
    """Run ``pentrace ledger sync --workers 1`` into the SQLite ledger ``path`` and kill it
    with SIGKILL once it has committed ``rows`` rows; returns ``seen(path)`` taken then."""
    env = {**os.environ, "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": str(path),
           "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": "off"}  # fmt: skip
    command = [sys.executable, "-m", "pentrace", "--data-root", str(root), "ledger", "sync"]
    process = subprocess.Popen([*command, "--workers", "1"], env=env)
    found: T | None = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if path.exists() and sqlite_rows(path) >= rows:  # some batches committed
                found = seen(path) if seen is not None else None
                break
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the sync ended before it was killed"
    return found


def demo_report(folder: Path) -> Path:
    """``folder/report.html``: the report of the demo session recorded into ``folder/data``."""
    root = folder / "data"
    main_id, _child = record_demo_session(DataRoot(root), datetime(2026, 11, 28, 9, tzinfo=UTC))
    out = folder / "report.html"
    result = CliRunner().invoke(
        app, ["--data-root", str(root), "report", main_id[-8:], "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out
