"""The one helper that creates files and folders: exact private modes whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pentrace.infrastructure.storage.modes import (
    make_private_dirs,
    open_private,
    prepare_sqlite_file,
    tighten,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture(params=[0o000, 0o022, 0o277, 0o777])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    before = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(before)


def test_new_folders_are_exactly_0700_and_new_files_exactly_0600(
    tmp_path: Path, umask: int
) -> None:
    made = make_private_dirs(tmp_path / "a" / "b" / "c")
    assert made == [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"]
    assert {mode(folder) for folder in made} == {0o700}
    os.close(open_private(tmp_path / "a" / "f", os.O_WRONLY))
    assert mode(tmp_path / "a" / "f") == 0o600
    prepare_sqlite_file(tmp_path / "store" / "store.db")
    assert (mode(tmp_path / "store"), mode(tmp_path / "store" / "store.db")) == (0o700, 0o600)


def test_tightening_strips_group_and_other_bits_and_never_follows_a_symlink(
    tmp_path: Path,
) -> None:
    loose = tmp_path / "loose"
    loose.write_bytes(b"")
    loose.chmod(0o664)
    target = tmp_path / "target"
    target.write_bytes(b"")
    target.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(target)
    assert tighten(loose)
    assert mode(loose) == 0o600
    assert not tighten(link)
    assert mode(target) == 0o644
    assert not tighten(tmp_path / "missing")


def test_existing_folders_below_the_root_are_repaired_and_those_above_it_are_not(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    (root / "p" / "agents").mkdir(parents=True)
    for folder in (tmp_path, root, root / "p", root / "p" / "agents"):
        folder.chmod(0o755)
    make_private_dirs(root / "p" / "agents" / "a", within=root)
    assert [mode(f) for f in (tmp_path, root, root / "p", root / "p" / "agents")] == [
        0o755,
        0o755,
        0o700,
        0o700,
    ]
