"""``pentrace serve`` refuses what it cannot serve before uvicorn starts, in one line."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support import clean_env, run_pentrace


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_missing_data_root_is_refused_instead_of_serving_an_empty_listing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-root"
    done = run_pentrace(missing, "serve", "--port", str(_closed_port()), env=clean_env())
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: data root {missing} does not exist (from --data-root)")
    assert "Uvicorn running" not in done.stderr
    assert not missing.exists()


def test_a_ledger_that_cannot_be_opened_is_one_line_without_a_traceback_or_the_password(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    url = f"postgresql+psycopg://pentrace:s3cret-pw@127.0.0.1:{_closed_port()}/ledger"
    done = run_pentrace(
        root,
        "serve",
        "--port",
        str(_closed_port()),
        env=clean_env(PENTRACE_LEDGER_URL=url, PENTRACE_DB_CONNECT_TIMEOUT="2"),
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cret-pw" not in done.stderr + done.stdout
    assert "127.0.0.1" in done.stderr  # it names where it tried
    assert "Uvicorn running" not in done.stderr
