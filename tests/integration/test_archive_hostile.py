"""Hostile archives are refused from their headers, before anything is unpacked (ADR 0089).

Each archive is built here, starting from a real ``export --archive``: gzip bombs,
members with huge declared sizes, links, absolute and ``..`` names, many
members, a sparse file, a manifest nested deeply.  The bomb runs in a real
process whose file-size limit (RLIMIT_FSIZE) is far below the bomb: writing it
to scratch would kill the process, so a clean refusal proves nothing was copied.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import resource
import subprocess
import sys
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app, main
from pentrace.cli.demo import record_demo_session
from pentrace.infrastructure.storage.layout import DataRoot, iter_sessions

BOMB: Final = 256 * 1024 * 1024
FILE_LIMIT: Final = 16 * 1024 * 1024
# A real export: its manifest, then its members with their data.
Exported = tuple[dict[str, Any], list[tuple[tarfile.TarInfo, bytes]]]


@pytest.fixture
def exported(tmp_path: Path) -> Exported:
    """The manifest and members of a real export of a session with a child."""
    source = tmp_path / "source"
    main_id, _ = record_demo_session(DataRoot(source), datetime(2026, 11, 3, 9, tzinfo=UTC))
    out = tmp_path / "real.tar.gz"
    result = CliRunner().invoke(
        app, ["--data-root", str(source), "export", main_id[-8:], "--archive", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    with tarfile.open(out, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    return json.loads(members[0][1]), members[1:]


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, read in chunks (never held whole)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


def _write(
    path: Path,
    manifest: Any,
    members: list[tuple[tarfile.TarInfo, Any]],
    *,
    manifest_first: bool = True,
    fmt: int = tarfile.PAX_FORMAT,
) -> Path:
    """A tar.gz (fast compression) of the manifest and members; data may be bytes or a stream."""
    body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    head = tarfile.TarInfo("manifest.json")
    head.size = len(body)
    entries = [(head, body), *members] if manifest_first else [*members, (head, body)]
    with (
        path.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=fmt) as tar,
    ):
        for info, data in entries:
            if isinstance(data, bytes):
                info.size = len(data) if info.isreg() else 0
                tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
            else:
                tar.addfile(info, data)
    return path


class Refusal:
    """Imports an archive into a fresh root under ``folder``; checks it is refused cleanly."""

    def __init__(self, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.folder = folder
        self.capsys = capsys

    def __call__(self, archive: Path) -> str:
        """The first line of the error the import stopped with."""
        target = self.folder / "target"
        with pytest.raises(SystemExit) as exit_info:
            main(["--data-root", str(target), "import", str(archive)])
        err = self.capsys.readouterr().err
        assert exit_info.value.code == 1, err
        assert "Traceback" not in err
        assert err.startswith(f"error: cannot import archive {archive}: ")
        assert not list(iter_sessions(DataRoot(target)))
        return err.splitlines()[0]


@pytest.fixture
def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Refusal:
    return Refusal(tmp_path, capsys)


def _first_shard(manifest: dict[str, Any]) -> dict[str, Any]:
    return dict(manifest["sessions"][0]["shards"][0])


def _zero_sha(size: int) -> str:
    digest = hashlib.sha256()
    chunk = bytes(1024 * 1024)
    for _ in range(size // len(chunk)):
        digest.update(chunk)
    return digest.hexdigest()


def _limited_import(root: Path, archive: Path) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), "import", str(archive)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=limit,  # only sets a limit; the child runs no threads before exec
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("listed", ["its true size and hash", "a small size"])
def test_a_gzip_bomb_is_refused_without_being_unpacked(
    tmp_path: Path,
    exported: Exported,
    listed: str,
) -> None:
    manifest, members = exported
    shard = _first_shard(manifest)
    if listed == "its true size and hash":
        shard["bytes"], shard["sha256"] = BOMB, _zero_sha(BOMB)
    manifest["sessions"][0]["shards"][0] = shard
    bomb = tarfile.TarInfo(shard["path"])
    bomb.size = BOMB
    rest = [(info, data) for info, data in members if info.name != shard["path"]]
    archive = _write(tmp_path / "bomb.tar.gz", manifest, [(bomb, _Zeros(BOMB)), *rest])
    assert archive.stat().st_size < BOMB // 100

    done = _limited_import(tmp_path / "target", archive)

    # Over RLIMIT_FSIZE the child would die of SIGXFSZ (or fail with EFBIG) instead.
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    reason = (
        "does not start with a JSON record"
        if listed == "its true size and hash"
        else "does not match its size and sha256 in the manifest"
    )
    assert f"{shard['path']} {reason}" in done.stderr
    assert "pentrace-import-" not in done.stderr  # the member is named, not the scratch copy


def test_a_member_larger_than_the_free_space_is_refused_from_its_header(
    refused: Refusal, exported: Exported
) -> None:
    manifest, _ = exported
    shard = _first_shard(manifest)
    huge = 1 << 50  # a pebibyte: no scratch folder has room for it
    shard["bytes"] = huge
    manifest["sessions"][0]["shards"][0] = shard
    # The member's own header claims the size too, with the data that follows cut short.
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        body = json.dumps(manifest).encode()
        head = tarfile.TarInfo("manifest.json")
        head.size = len(body)
        tar.addfile(head, io.BytesIO(body))
        info = tarfile.TarInfo(shard["path"])
        info.size = huge
        tar.fileobj.write(info.tobuf(tarfile.PAX_FORMAT))  # header only
    archive = refused.folder / "huge.tar.gz"
    archive.write_bytes(gzip.compress(raw.getvalue()))

    line = refused(archive)

    assert "pentrace-import-" not in line


def _change(
    exported: Exported,
    edit: Callable[[dict[str, Any], list[tuple[tarfile.TarInfo, bytes]]], Any],
) -> Exported:
    manifest, members = exported
    members = [(info, data) for info, data in members]
    edit(manifest, members)
    return manifest, members


def _replace_shard(kind: bytes, link: str) -> Callable[..., None]:
    def edit(manifest: dict[str, Any], members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
        name = _first_shard(manifest)["path"]
        for number, (info, _) in enumerate(members):
            if info.name == name:
                replaced = tarfile.TarInfo(name)
                replaced.type = kind
                replaced.linkname = link
                members[number] = (replaced, b"")

    return edit


def _add(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> Callable[..., None]:
    def edit(_manifest: dict[str, Any], members: list[tuple[tarfile.TarInfo, bytes]]) -> None:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = link
        members.append((info, b"{}\n"))

    return edit


HOSTILE: Final[dict[str, tuple[Callable[..., None], str]]] = {
    "a symlink as a listed shard": (
        _replace_shard(tarfile.SYMTYPE, "/etc/passwd"),
        "is not a regular file",
    ),
    "a hardlink as a listed shard": (
        _replace_shard(tarfile.LNKTYPE, "manifest.json"),
        "is not a regular file",
    ),
    "a fifo as a listed shard": (_replace_shard(tarfile.FIFOTYPE, ""), "is not a regular file"),
    "an absolute member": (_add("/etc/cron.d/x"), "found also ['/etc/cron.d/x']"),
    "a member climbing out": (_add("../../x.jsonl"), "found also ['../../x.jsonl']"),
    "an extra hardlink": (
        _add("traces/x.jsonl", tarfile.LNKTYPE, "/etc/shadow"),
        "found also ['traces/x.jsonl']",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_links_and_strange_names_are_refused_before_unpacking(
    refused: Refusal,
    exported: Exported,
    name: str,
) -> None:
    edit, message = HOSTILE[name]
    manifest, members = _change(exported, edit)
    archive = _write(refused.folder / "hostile.tar.gz", manifest, members)

    assert message in refused(archive)


def test_a_sparse_member_is_refused(refused: Refusal, exported: Exported) -> None:
    manifest, members = exported
    name = _first_shard(manifest)["path"]
    sparse = [(_sparse(info) if info.name == name else info, data) for info, data in members]
    archive = _write(refused.folder / "sparse.tar.gz", manifest, sparse, fmt=tarfile.GNU_FORMAT)

    assert f"{name} is not a regular file" in refused(archive)


def _sparse(info: tarfile.TarInfo) -> tarfile.TarInfo:
    marked = tarfile.TarInfo(info.name)
    marked.type = tarfile.GNUTYPE_SPARSE
    return marked


def test_too_many_members_are_refused_from_their_headers(
    refused: Refusal, exported: Exported
) -> None:
    manifest, members = exported
    many = [(tarfile.TarInfo(f"traces/n/{number}"), b"") for number in range(10_001)]
    archive = _write(refused.folder / "many.tar.gz", manifest, [*members, *many])

    assert "expected at most 10000 members, found more" in refused(archive)


@pytest.mark.parametrize("depth", [2_000, 200_000])
def test_a_deeply_nested_manifest_is_a_clean_error(
    refused: Refusal,
    exported: Exported,
    depth: int,
) -> None:
    _, members = exported
    nested = b'{"format":' * depth + b"1" + b"}" * depth
    archive = _write(refused.folder / "nested.tar.gz", nested, members)

    line = refused(archive)

    assert "manifest" in line


def test_a_manifest_after_the_shards_still_imports(
    tmp_path: Path,
    exported: Exported,
) -> None:
    manifest, members = exported
    archive = _write(tmp_path / "late.tar.gz", manifest, members, manifest_first=False)

    result = CliRunner().invoke(app, ["--data-root", str(tmp_path / "t"), "import", str(archive)])

    assert result.exit_code == 0, result.output
    assert len(list(iter_sessions(DataRoot(tmp_path / "t")))) == 2
