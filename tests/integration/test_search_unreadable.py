"""Search indexing leaves out a session whose shard it may not open, says so, and goes on.

The shard is really unreadable: the refresh runs with the effective uid of an
unprivileged user (root drops it with ``os.seteuid`` around the call) while the
shard stays root's own 0600 file.  Skipped where the tests do not run as root.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cli_sessions_corpus import SID_A, SID_B, build_corpus
from tests.support import cli

NOBODY = 65534

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop to another uid"
)


@pytest.fixture
def shared_root() -> Iterator[Path]:
    # Not under pytest's tmp_path: its parents are root's 0700 folders.
    base = Path(tempfile.mkdtemp(prefix="pentrace-search-"))
    base.chmod(0o755)
    try:
        yield base / "root"
    finally:
        shutil.rmtree(base)


def _give_to_nobody(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        os.chown(folder, NOBODY, NOBODY)
        for name in files:
            os.chown(Path(folder) / name, NOBODY, NOBODY)


def _hit_sessions(stdout: str) -> set[str]:
    return {hit["session_id"] for hit in json.loads(stdout)["hits"]}


def test_search_reports_a_session_it_cannot_open_and_finds_the_others(
    shared_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PENGUIN_HOME", raising=False)
    shards = build_corpus(shared_root)
    # "files" is said in session A only, "hello" in B only.
    assert _hit_sessions(cli(shared_root, "search", "files", "--json").stdout) == {SID_A}
    assert _hit_sessions(cli(shared_root, "search", "hello", "--json").stdout) == {SID_B}
    _give_to_nobody(shared_root)
    locked = shards[SID_A][0]
    os.chown(locked, 0, 0)
    locked.chmod(0o600)

    os.seteuid(NOBODY)
    try:
        with pytest.raises(PermissionError):
            locked.open("rb").close()  # the premise: this user really cannot read it
        result = cli(shared_root, "search", "--rebuild", "--json")
        in_a = cli(shared_root, "search", "files", "--json")
        in_b = cli(shared_root, "search", "hello", "--json")
    finally:
        os.seteuid(0)

    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    assert f"left out of the search index: p1/a1/{SID_A}" in result.stderr
    assert "Permission denied" in result.stderr
    assert '"failures"' in result.stdout
    assert _hit_sessions(in_a.stdout) == set()  # left out, and said so above
    assert _hit_sessions(in_b.stdout) == {SID_B}  # the others are indexed
