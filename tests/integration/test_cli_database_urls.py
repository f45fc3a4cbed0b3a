"""Database URLs on the command line: credentials never printed, bad schemes a clean error.

Every command that opens the ledger or the analytics database runs as a real
process with URLs that carry a password in each form libpq knows (userinfo,
``?password=``, ``?sslpassword=``, ``?passfile=``), pointed at a dead port.
Neither stdout nor stderr may contain any of them, and there is no traceback.
"""

from __future__ import annotations

import logging
import socket
import subprocess
from pathlib import Path

import pytest

from pentrace.infrastructure.eventstore.recording import open_recording
from pentrace.infrastructure.ledger import LedgerSettings
from pentrace.testing import AssistantText, BeginRequest, EndRequest, StartSession, UserInput
from pentrace.testing import write_trace as write_commands
from tests.support import REPO, clean_env, run_pentrace

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
SECRETS = ("Pw1-userinfo", "Pw2-query", "Pw3-sslpass", "Pw4-passfile", "Pw5-analytics", "Pw6-an")


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ledger_url(port: int) -> str:
    return (
        f"postgresql+psycopg://app:{SECRETS[0]}@127.0.0.1:{port}/ledger"
        f"?password={SECRETS[1]}&sslpassword={SECRETS[2]}&passfile=/home/app/{SECRETS[3]}"
    )


def analytics_url(port: int) -> str:
    return f"postgresql://an:{SECRETS[4]}@127.0.0.1:{port}/an?password={SECRETS[5]}"


def run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_pentrace(
        root, *args, env=clean_env(PENTRACE_DB_CONNECT_TIMEOUT="2", **env), cwd=REPO
    )


def a_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_commands(
        root,
        [StartSession(), UserInput("hi"), BeginRequest(), AssistantText("yo"), EndRequest()],
        session_id=SID,
    )
    return root


LEDGER_COMMANDS = [
    ("ledger", "tail"),
    ("ledger", "replay", "--after", f"evt:session:{SID}:00000001"),
    ("ledger", "sync"),
    ("ledger", "rebuild"),
    ("ledger", "cleanup", "--dry-run"),
    ("ledger", "forget", SID, "--yes"),
    ("ledger", "stats"),
    ("audit",),
    ("stats", "tokens"),
    ("stats", "cost", "--sync"),
    ("projections", "status"),
    ("projections", "rebuild", "tokens"),
    ("delete", SID, "--yes"),
    ("serve", "--port", "0"),
]


@pytest.mark.parametrize("args", LEDGER_COMMANDS, ids=lambda args: " ".join(args[:2]))
def test_no_command_prints_a_ledger_or_analytics_password(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    port = dead_port()
    env = {"PENTRACE_LEDGER_URL": ledger_url(port), "PENTRACE_ANALYTICS_URL": analytics_url(port)}
    result = run(a_root(tmp_path), env, *args)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"127.0.0.1:{port}" in output  # it did report the database it could not reach
    for secret in SECRETS:
        assert secret not in output
    if args[0] != "serve":  # uvicorn's own startup-failure report is the service's (see below)
        assert "Traceback" not in output
        assert "error:" in result.stderr or "warning:" in result.stderr


@pytest.mark.parametrize(
    "args", [("stats", "tokens"), ("projections", "status"), ("projections", "rebuild", "tokens")]
)
def test_no_command_prints_an_analytics_password_when_the_ledger_is_fine(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    port = dead_port()
    root = a_root(tmp_path)
    assert run(root, {}, "ledger", "sync").returncode == 0
    result = run(root, {"PENTRACE_ANALYTICS_URL": analytics_url(port)}, *args)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"127.0.0.1:{port}" in output
    assert "Traceback" not in output
    for secret in SECRETS:
        assert secret not in output


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("mysql://app:Pw-mysql-1@db/ledger", "'mysql'"),
        ("foo://app:Pw-foo-2@db/ledger", "'foo'"),
        ("mssql+pyodbc://app:Pw-odbc-3@dsn", "'mssql+pyodbc'"),
        ("://app:Pw-garbage-4@", "does not parse"),
    ],
)
def test_an_unknown_url_scheme_is_one_clear_error_without_a_traceback(
    tmp_path: Path, url: str, named: str
) -> None:
    for variable, args in (
        ("PENTRACE_LEDGER_URL", ("ledger", "stats")),
        ("PENTRACE_ANALYTICS_URL", ("stats", "tokens")),
    ):
        result = run(a_root(tmp_path / variable), {variable: url}, *args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"error: {variable}: ")
        assert named in result.stderr
        assert "hint: set" in result.stderr or "hint: fix" in result.stderr
        assert "postgresql://" in result.stderr  # the hint names what is supported
        assert "Traceback" not in result.stderr
        assert "Pw-" not in result.stdout + result.stderr


def test_postgresql_without_a_driver_name_means_psycopg_not_a_missing_psycopg2(
    tmp_path: Path,
) -> None:
    port = dead_port()
    url = f"postgresql://app:Pw-plain-5@127.0.0.1:{port}/ledger"
    result = run(a_root(tmp_path), {"PENTRACE_LEDGER_URL": url}, "ledger", "stats")
    assert result.returncode == 1
    assert "Connection refused" in result.stderr
    assert "psycopg2" not in result.stderr
    assert "Pw-plain-5" not in result.stderr


def test_the_recording_warning_hides_every_password_of_the_ledger_url(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = LedgerSettings(url=ledger_url(dead_port()))
    with caplog.at_level(logging.DEBUG):
        recording = open_recording(tmp_path / "data", "proj", "agent", ledger_settings=settings)
    recording.close()
    assert "recording without the ledger" in caplog.text
    logged = caplog.text + "".join(str(record.args) for record in caplog.records)
    for secret in SECRETS[:4]:
        assert secret not in logged
    assert SECRETS[0] not in repr(settings)
