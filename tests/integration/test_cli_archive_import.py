"""``import`` takes back what ``export --archive`` wrote, and nothing that was changed."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from pentrace.cli.app import app, main
from pentrace.cli.demo import AGENT, PROJECT, record_demo_session
from pentrace.infrastructure.storage.layout import DataRoot, iter_sessions


def cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--data-root", str(root), *args])


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "source"
    main_id, _child = record_demo_session(DataRoot(source), datetime(2026, 11, 3, 9, tzinfo=UTC))
    out = tmp_path / "session.tar.gz"
    assert cli(source, "export", main_id[-8:], "--archive", "-o", str(out)).exit_code == 0
    return source, out


def shard_bytes(root: Path) -> dict[str, bytes]:
    return {
        shard.path.name: shard.path.read_bytes()
        for ref in iter_sessions(DataRoot(root))
        for shard in ref.shards
    }


def test_an_archive_comes_back_whole_with_its_children(
    archive: tuple[Path, Path], tmp_path: Path
) -> None:
    source, path = archive
    target = tmp_path / "target"

    result = cli(target, "import", str(path), "--json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["session_ids"]) == 2
    assert len(report["paths"]) == 3  # two shards of the parent, one of the child
    assert report["torn_tails_dropped"] == 0
    assert shard_bytes(target) == shard_bytes(source)
    assert {(r.project, r.agent) for r in iter_sessions(DataRoot(target))} == {(PROJECT, AGENT)}
    assert cli(target, "audit", "--no-ledger").exit_code == 0


def test_an_archive_goes_under_another_project_and_agent_on_request(
    archive: tuple[Path, Path], tmp_path: Path
) -> None:
    target = tmp_path / "target"
    result = cli(target, "import", str(archive[1]), "-p", "other", "-a", "bot")
    assert result.exit_code == 0, result.output
    assert {(r.project, r.agent) for r in iter_sessions(DataRoot(target))} == {("other", "bot")}


def test_existing_ids_are_refused_and_nothing_is_written(
    archive: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, path = archive
    before = shard_bytes(source)
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(source), "import", str(path)])
    assert exit_info.value.code == 2
    assert "already exists under demo_project/demo_agent" in capsys.readouterr().err
    assert shard_bytes(source) == before


def _rewrite(path: Path, change: str) -> Path:
    """A copy of the archive with one thing changed, the way a broken or hostile one might be."""
    with tarfile.open(path, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]
    manifest = json.loads(members[0][1])
    if change.startswith("rehash"):  # shards first, so the manifest can carry their new hashes
        members = [*members[1:], members[0]]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member, data in members:
            if change.startswith("rehash") and member.name == "manifest.json":
                data = json.dumps(manifest).encode()
            if change == "flip a byte" and member.name.endswith("_001.jsonl"):
                data = data.replace(b"hello", b"HELLO", 1)
            if change.startswith("rehash") and member.name.endswith("_001.jsonl"):
                if change == "rehash a malformed line":  # mid-shard, no JSON prefix: not healed
                    first, _, rest = data.partition(b"\n")
                    data = first + b"\nnot json at all\n" + rest
                else:  # another session's trace under this name
                    data = data.replace(b'"session_id":"session-', b'"session_id":"sessioX-', 1)
                entry = next(
                    shard
                    for session in manifest["sessions"]
                    for shard in session["shards"]
                    if shard["path"] == member.name
                )
                entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
            if change == "format" and member.name == "manifest.json":
                data = json.dumps({**manifest, "format": "something.v9"}).encode()
            if change == "path" and member.name == "manifest.json":
                manifest["sessions"][0]["shards"][0]["path"] = "../../etc/x.jsonl"
                data = json.dumps(manifest).encode()
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        if change == "extra file":
            extra = tarfile.TarInfo("traces/2026-11-03/notes.txt")
            extra.size = 2
            tar.addfile(extra, io.BytesIO(b"hi"))
        if change == "symlink":
            link = tarfile.TarInfo("traces/2026-11-03/link.jsonl")
            link.type = tarfile.SYMTYPE
            link.linkname = "/etc/passwd"
            tar.addfile(link)
    bad = path.with_name(f"bad-{change.replace(' ', '-')}.tar.gz")
    bad.write_bytes(gzip.compress(out.getvalue()))
    return bad


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("flip a byte", "does not match its size and sha256 in the manifest"),
        ("format", "expected manifest format pentrace.session_archive.v1, found 'something.v9'"),
        ("path", "has an unexpected entry '../../etc/x.jsonl'"),
        (
            "extra file",
            "expected only the listed files, found also ['traces/2026-11-03/notes.txt']",
        ),
        ("symlink", "expected only the listed files, found also ['traces/2026-11-03/link.jsonl']"),
        ("rehash a malformed line", "_001.jsonl:2: not valid JSON"),
        ("rehash another session", "belongs to session sessioX-"),
    ],
)
def test_a_changed_archive_is_refused_and_writes_nothing(
    archive: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: str,
    message: str,
) -> None:
    bad = _rewrite(archive[1], change)
    target = tmp_path / "target"
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(target), "import", str(bad)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err.startswith(f"error: cannot import archive {bad}: ")
    assert message in err
    assert "Traceback" not in err
    assert not target.exists() or shard_bytes(target) == {}


def test_a_plain_trace_still_needs_project_and_agent(
    archive: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = next(iter(iter_sessions(DataRoot(archive[0])))).shards[0].path
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-root", str(tmp_path / "t"), "import", str(shard)])
    assert exit_info.value.code == 2
    assert "needs --project and --agent (only an archive names its own)" in capsys.readouterr().err


def test_a_torn_last_line_is_left_out_as_a_plain_import_does(
    archive: tuple[Path, Path], tmp_path: Path
) -> None:
    source, _ = archive
    latest = sorted(source.rglob("*_002.jsonl"))[0]
    whole = latest.read_bytes()
    latest.write_bytes(whole + b'{"timestamp":"2026-11-03T09:')  # a writer died mid-line
    torn = tmp_path / "torn.tar.gz"
    assert (
        cli(
            source, "export", latest.name.split("_")[0][-8:], "--archive", "-o", str(torn)
        ).exit_code
        == 0
    )

    target = tmp_path / "target"
    result = cli(target, "import", str(torn), "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["torn_tails_dropped"] == 1
    assert next(target.rglob(latest.name)).read_bytes() == whole
