"""Export, archive, import and delete sessions on real files in a temporary data root."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from pentrace import testing as pt
from pentrace.errors import (
    NotFoundError,
    SessionExistsError,
    TraceFormatError,
    TraceLockedError,
    UsageError,
)
from pentrace.infrastructure.operations.exports import export_session
from pentrace.infrastructure.sessions.files import (
    delete_session,
    export_archive,
    import_session,
)
from pentrace.infrastructure.storage.atomic import publish_file
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.writer import open_session_writer
from tests.support import text_turn, tool_turn

PROJECT, AGENT = "proj", "agent"
SID = "session-2026-07-18-11-10-22-3f8a1c2d"
CHILD = "session-2026-07-18-11-11-00-00000001"
GRANDCHILD = "session-2026-07-18-11-12-00-00000002"

ROUND: list[pt.Command] = [
    *tool_turn(
        "Create hello.txt",
        pt.ToolCall("call_0", "exec_command", '{"cmd":"printf hi > hello.txt"}'),
        "[no output]",
    ),
    pt.TokenUsage(pt.TokenCounts(1, 2, 3, 6), pt.TokenCounts(1, 2, 3, 6)),
]
COMPACTION: list[pt.Command] = [
    pt.CompactionBegin("context", "summarize"),
    *text_turn("Summarize", "[summary]done so far[/summary]"),
    pt.CompactionEnd("context", "summarize", "completed"),
]


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "data")


def _write(root: DataRoot, commands: list[pt.Command], session_id: str = SID) -> list[Path]:
    return pt.write_trace(
        root, [pt.StartSession(), *commands], project=PROJECT, agent=AGENT, session_id=session_id
    )


def _tree(root: DataRoot) -> set[Path]:
    return {p for p in root.path.rglob("*")} if root.path.exists() else set()


def test_export_writes_the_latest_shard_byte_for_byte(root: DataRoot, tmp_path: Path) -> None:
    paths = _write(root, [*ROUND, *COMPACTION, *ROUND])
    assert len(paths) == 2
    with paths[1].open("ab") as handle:
        handle.write(b'not json at all\n{"timestamp":"2026-07-18T03:1')

    result = export_session(root, PROJECT, AGENT, SID, tmp_path / "out.jsonl")

    assert (tmp_path / "out.jsonl").read_bytes() == paths[1].read_bytes()
    assert (result.shard.index, result.bytes) == (2, paths[1].stat().st_size)


def test_export_of_a_chosen_shard_to_a_stream_is_verbatim(root: DataRoot) -> None:
    paths = _write(root, [*ROUND, *COMPACTION, *ROUND])
    sink = io.BytesIO()

    export_session(root, PROJECT, AGENT, SID, sink, index=1)

    assert sink.getvalue() == paths[0].read_bytes()


def test_export_of_a_missing_shard_names_the_shards_there_are(
    root: DataRoot, tmp_path: Path
) -> None:
    _write(root, ROUND)
    with pytest.raises(NotFoundError, match=r"has no shard 007 \(it has 001\)"):
        export_session(root, PROJECT, AGENT, SID, tmp_path / "x.jsonl", index=7)
    assert not (tmp_path / "x.jsonl").exists()


def test_a_redacted_export_hides_secrets_keeps_tokens_and_drops_bad_lines(
    root: DataRoot, tmp_path: Path
) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    paths = _write(root, [pt.UserInput(f"use token {secret} please"), *ROUND[1:]])
    with paths[0].open("ab") as handle:
        handle.write(b"{broken\n")
        handle.write(b'{"type":"event_msg","payload":{"type":"abort"}}\n')

    result = export_session(root, PROJECT, AGENT, SID, tmp_path / "red.jsonl", redacted=True)

    text = (tmp_path / "red.jsonl").read_text()
    assert secret not in text
    assert "use token [redacted:" in text
    usage = [json.loads(line) for line in text.splitlines() if '"token_usage"' in line]
    assert usage[0]["payload"]["session"] == {
        "cache_read": 1,
        "cache_write": 2,
        "output": 3,
        "total": 6,
    }
    assert result.skipped_lines == 1
    assert len(text.splitlines()) == len(paths[0].read_bytes().splitlines()) - 1


def test_an_export_then_import_round_trips_bytes_and_counts(root: DataRoot, tmp_path: Path) -> None:
    paths = _write(root, [*ROUND, *ROUND])
    export_session(root, PROJECT, AGENT, SID, tmp_path / "s.jsonl")
    other = DataRoot(tmp_path / "other")

    result = import_session(other, PROJECT, AGENT, tmp_path / "s.jsonl")

    assert result.session_id == SID
    assert result.path == other.shard_path(PROJECT, AGENT, SID, 1, date(2026, 7, 18))
    assert result.path.read_bytes() == paths[0].read_bytes()
    assert (result.records, result.requests, result.tool_calls) == (14, 2, 2)
    assert not result.torn_tail_dropped
    assert [p.name for p in result.path.parent.iterdir()] == [result.path.name]


def test_an_import_files_the_session_under_the_utc_day_of_its_first_timestamp(
    root: DataRoot, tmp_path: Path
) -> None:
    lines = pt.render_shards([pt.StartSession(), *ROUND], session_id=SID)[0]
    first = json.loads(lines[0])
    first["timestamp"] = "2026-01-01T23:30:00.000-02:00"
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join([json.dumps(first).encode(), *lines[1:]]) + b"\n")

    result = import_session(root, PROJECT, AGENT, source)

    assert result.path.parent.name == "2026-01-02"


def test_an_import_of_an_existing_session_id_is_refused_and_writes_nothing(
    root: DataRoot, tmp_path: Path
) -> None:
    paths = _write(root, ROUND)
    source = tmp_path / "dup.jsonl"
    source.write_bytes(paths[0].read_bytes())
    before = _tree(root)

    with pytest.raises(SessionExistsError, match=f"session {SID} already exists under proj/agent"):
        import_session(root, PROJECT, AGENT, source)

    assert _tree(root) == before


def test_an_import_with_a_malformed_middle_line_names_the_file_and_line(
    root: DataRoot, tmp_path: Path
) -> None:
    lines = pt.render_shards([pt.StartSession(), *ROUND], session_id=SID)[0]
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"\n".join([*lines[:3], b"{oops", *lines[3:]]) + b"\n")

    with pytest.raises(TraceFormatError, match=rf"{source}:4: ") as caught:
        import_session(root, PROJECT, AGENT, source)

    assert caught.value.line == 4
    assert _tree(root) == set()


def test_an_import_without_session_meta_first_is_refused(root: DataRoot, tmp_path: Path) -> None:
    lines = pt.render_shards([pt.StartSession(), *ROUND], session_id=SID)[0]
    source = tmp_path / "headless.jsonl"
    source.write_bytes(b"\n".join(lines[1:]) + b"\n")

    with pytest.raises(TraceFormatError, match=r"headless.jsonl:1: expected session_meta"):
        import_session(root, PROJECT, AGENT, source)
    assert _tree(root) == set()


def test_an_import_whose_session_id_is_a_path_is_refused(root: DataRoot, tmp_path: Path) -> None:
    lines = pt.render_shards([pt.StartSession(), *ROUND], session_id="../../escape")[0]
    source = tmp_path / "evil.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")

    with pytest.raises(TraceFormatError, match=r"evil.jsonl:1: invalid session id name"):
        import_session(root, PROJECT, AGENT, source)
    assert _tree(root) == set()
    assert not (tmp_path / "escape").exists()


def test_an_import_drops_a_torn_last_line_like_the_reader(root: DataRoot, tmp_path: Path) -> None:
    lines = pt.render_shards([pt.StartSession(), *ROUND], session_id=SID)[0]
    whole = b"".join(line + b"\n" for line in lines)
    source = tmp_path / "torn.jsonl"
    source.write_bytes(whole + lines[0][:25] + b"\n \n")

    result = import_session(root, PROJECT, AGENT, source)

    assert result.torn_tail_dropped
    assert result.path.read_bytes() == whole
    assert result.records == len(lines)


def _scatter_shards(root: DataRoot) -> list[Path]:
    """Three shards of one session in three date folders, the newest shard in the oldest."""
    shards = pt.render_shards([pt.StartSession(), *ROUND, *COMPACTION, *ROUND, *COMPACTION, *ROUND])
    days = [date(2026, 7, 18), date(2026, 7, 19), date(2026, 7, 17)]
    paths = []
    for index, (lines, day) in enumerate(zip(shards, days, strict=True), start=1):
        paths += pt.write_shards(root, PROJECT, AGENT, SID, [lines], day=day)
        if index > 1:
            paths[-1] = paths[-1].rename(paths[-1].with_name(f"{SID}_{index:03d}.jsonl"))
    return paths


def test_delete_removes_every_shard_in_every_date_folder_and_the_scratchpad(
    root: DataRoot,
) -> None:
    paths = _scatter_shards(root)
    neighbour = _write(root, ROUND, session_id=CHILD)[0]
    scratch = root.truncated_output_dir(PROJECT, AGENT, SID)
    scratch.mkdir(parents=True)
    (scratch / "exec_command-0123456789abcdef.log").write_text("full output")

    result = delete_session(root, PROJECT, AGENT, SID)

    assert set(paths) <= set(result.removed)
    assert root.scratchpad_dir(PROJECT, AGENT, SID) in result.removed
    assert root.find_shards(PROJECT, AGENT, SID) == []
    assert not root.scratchpad_dir(PROJECT, AGENT, SID).exists()
    assert neighbour.exists()
    assert not (root.traces_dir(PROJECT, AGENT) / "2026-07-17").exists()


def test_delete_refuses_while_a_writer_holds_the_session(root: DataRoot) -> None:
    paths = _write(root, ROUND)
    before = paths[0].read_bytes()
    writer = open_session_writer(root, PROJECT, AGENT, SID)
    try:
        with pytest.raises(TraceLockedError, match=f"session {SID} is being written"):
            delete_session(root, PROJECT, AGENT, SID)
    finally:
        writer.close()
    assert paths[0].read_bytes() == before

    delete_session(root, PROJECT, AGENT, SID)
    assert not paths[0].exists()


def test_delete_of_an_unknown_session_says_so(root: DataRoot) -> None:
    with pytest.raises(NotFoundError, match=f"session {SID} has no trace and no scratchpad"):
        delete_session(root, PROJECT, AGENT, SID)


def test_an_archive_holds_the_session_its_children_and_a_manifest(
    root: DataRoot, tmp_path: Path
) -> None:
    missing = "session-2026-07-18-11-13-00-0000dead"
    parent = _write(root, [pt.SubagentPointer(CHILD), *ROUND, pt.SubagentPointer(missing)])
    child = _write(root, [pt.SubagentPointer(GRANDCHILD), *ROUND], session_id=CHILD)
    grandchild = _write(root, ROUND, session_id=GRANDCHILD)
    _write(root, ROUND, session_id="session-2026-07-18-11-14-00-00000bad")  # unrelated

    result = export_archive(root, PROJECT, AGENT, SID, tmp_path / "a.tar.gz")

    assert result.session_ids == (SID, CHILD, GRANDCHILD)
    assert result.missing == (missing,)
    with tarfile.open(tmp_path / "a.tar.gz") as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        contents = {n: tar.extractfile(n).read() for n in names if n.endswith(".jsonl")}  # type: ignore[union-attr]
    assert names[0] == "manifest.json"
    assert sorted(contents) == sorted(
        f"traces/2026-07-18/{p.name}" for p in parent + child + grandchild
    )
    for path in parent + child + grandchild:
        assert contents[f"traces/2026-07-18/{path.name}"] == path.read_bytes()
    assert [(s["session_id"], s["parent_session_id"]) for s in manifest["sessions"]] == [
        (SID, None),
        (CHILD, SID),
        (GRANDCHILD, CHILD),
    ]
    assert manifest["missing"] == [{"session_id": missing, "parent_session_id": SID}]
    for entry in manifest["sessions"]:
        for shard in entry["shards"]:
            data = contents[shard["path"]]
            assert shard["bytes"] == len(data)
            assert shard["sha256"] == hashlib.sha256(data).hexdigest()


def test_the_same_traces_always_give_the_same_archive_bytes(root: DataRoot, tmp_path: Path) -> None:
    _write(root, [pt.SubagentPointer(CHILD), *ROUND])
    _write(root, ROUND, session_id=CHILD)
    first, second = io.BytesIO(), io.BytesIO()
    export_archive(root, PROJECT, AGENT, SID, first)
    export_archive(root, PROJECT, AGENT, SID, second)
    assert first.getvalue() == second.getvalue()


def test_a_failed_publish_leaves_neither_the_file_nor_a_temp_file(tmp_path: Path) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"first":"line"}\n'
        raise TraceFormatError(tmp_path / "src.jsonl", 2, "expected JSON, found garbage")

    with pytest.raises(TraceFormatError, match=r"src.jsonl:2: expected JSON"):
        publish_file(tmp_path / "dest.jsonl", chunks(), overwrite=False)

    assert list(tmp_path.iterdir()) == []


def test_publishing_without_overwrite_refuses_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "dest.jsonl").write_bytes(b"kept\n")

    with pytest.raises(UsageError, match=r"dest.jsonl already exists; refusing to overwrite"):
        publish_file(tmp_path / "dest.jsonl", [b"new\n"], overwrite=False)

    assert (tmp_path / "dest.jsonl").read_bytes() == b"kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["dest.jsonl"]


def test_an_import_whose_session_meta_has_no_timestamp_is_refused(
    root: DataRoot, tmp_path: Path
) -> None:
    lines = pt.render_shards([pt.StartSession(), *ROUND], session_id=SID)[0]
    first = json.loads(lines[0])
    del first["timestamp"]
    source = tmp_path / "undated.jsonl"
    source.write_bytes(b"\n".join([json.dumps(first).encode(), *lines[1:]]) + b"\n")

    with pytest.raises(TraceFormatError, match=r"undated.jsonl:1: expected session_meta to carry"):
        import_session(root, PROJECT, AGENT, source)
    assert _tree(root) == set()


def test_delete_refuses_a_scratchpad_that_is_a_link_and_deletes_nothing(
    root: DataRoot, tmp_path: Path
) -> None:
    paths = _write(root, ROUND)
    elsewhere = tmp_path / "precious"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    scratchpad = root.scratchpad_dir(PROJECT, AGENT, SID)
    scratchpad.parent.mkdir(parents=True)
    scratchpad.symlink_to(elsewhere)

    with pytest.raises(UsageError, match=r"is not a folder; nothing was deleted"):
        delete_session(root, PROJECT, AGENT, SID)

    assert paths[0].exists()
    assert (elsewhere / "keep.txt").read_text() == "mine"
