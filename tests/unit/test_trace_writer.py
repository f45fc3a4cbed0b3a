"""The trace writer on real files: lines, healing, batches, rotation, fsync policy, locks."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from datetime import date
from pathlib import Path

import msgspec
import pytest

from pentrace.domain.records import MalformedLine, decode_line
from pentrace.errors import RecordRefusedError, TraceLockedError, TraceWriteError, UsageError
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.locking import SessionLock
from pentrace.infrastructure.trace.writer import (
    Durability,
    ShardWriter,
    is_request_end,
    open_session_writer,
    session_lock_path,
)

SESSION = "session-2026-11-29-10-00-00-0123abcd"


def event(ptype: str, **fields: object) -> bytes:
    return msgspec.json.encode(
        {
            "timestamp": "2026-11-29T10:00:00.000Z",
            "type": "event_msg",
            "payload": {"type": ptype, **fields},
        }
    )


def text(body: str, role: str = "user") -> bytes:
    return msgspec.json.encode(
        {
            "timestamp": "2026-11-29T10:00:00.000Z",
            "type": "model_msg",
            "payload": {"type": "text", "role": role, "text": body},
        }
    )


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


class CountingFsync:
    """Wraps os.fsync and counts calls on files and on directories separately."""

    def __init__(self) -> None:
        self.files = 0
        self.dirs = 0

    def __call__(self, fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            self.dirs += 1
        else:
            self.files += 1
        os.fsync(fd)


def test_a_five_megabyte_record_is_one_intact_line(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    big = text("x" * (5 * 1024 * 1024))
    with ShardWriter(shard) as writer:
        writer.append(event("request_begin"))
        size = writer.append(big)
        writer.append(event("request_end", status="completed"))
    lines = lines_of(shard)
    assert lines == [event("request_begin"), big, event("request_end", status="completed")]
    assert size == len(event("request_begin")) + len(big) + 2


def test_a_new_shard_appears_only_with_its_first_record_and_mode_0600(tmp_path: Path) -> None:
    shard = tmp_path / "day" / "s_001.jsonl"
    writer = ShardWriter(shard)
    assert not shard.exists()
    writer.append(event("request_begin"))
    assert stat.S_IMODE(shard.stat().st_mode) == 0o600
    writer.close()
    assert sorted(p.name for p in shard.parent.iterdir()) == ["s_001.jsonl", "s_001.jsonl.lock"]


def test_a_torn_tail_is_healed_before_the_next_record(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    shard.write_bytes(event("request_begin") + b"\n" + b'{"timestamp":"2026-11-29T1')
    with ShardWriter(shard) as writer:
        writer.append(event("request_end", status="completed"))
        writer.append(event("request_begin"))
    lines = lines_of(shard)
    assert lines[1] == b'{"timestamp":"2026-11-29T1'
    assert lines[2:] == [event("request_end", status="completed"), event("request_begin")]
    with pytest.raises(MalformedLine):
        decode_line(lines[1])


def test_a_shard_that_ends_in_a_newline_gets_no_blank_line(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    shard.write_bytes(event("request_begin") + b"\n")
    with ShardWriter(shard) as writer:
        writer.append_many([text("hi"), event("request_end", status="completed")])
    assert lines_of(shard) == [
        event("request_begin"),
        text("hi"),
        event("request_end", status="completed"),
    ]


def test_a_batch_is_written_whole_in_order(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    batch = [
        event("request_begin"),
        text("a"),
        text("b" * 70_000),
        event("request_end", status="failed"),
    ]
    with ShardWriter(shard) as writer:
        assert writer.append_many([]) == 0
        size = writer.append_many(batch)
    assert lines_of(shard) == batch
    assert size == shard.stat().st_size


_FSIZE_CHILD = r"""
import resource, signal, sys
from pentrace.infrastructure.trace.writer import ShardWriter
from pentrace.errors import TraceWriteError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
path, limit = sys.argv[1], int(sys.argv[2])
writer = ShardWriter(path)
writer.append(b'{"n":0}')
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
for attempt in (lambda: writer.append_many([b'{"n":1}', b'{"big":"' + b"y" * 5000 + b'"}']),
                lambda: writer.append(b'{"big":"' + b"z" * 5000 + b'"}')):
    try:
        attempt()
    except TraceWriteError as exc:
        print("FAILED", exc.message)
writer.append(b'{"n":2}')
writer.close()
"""


def test_a_batch_that_hits_the_file_size_limit_leaves_nothing_behind(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes the kernel do a real short write and then fail with EFBIG.
    shard = tmp_path / "s_001.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _FSIZE_CHILD, str(shard), "2000"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    failures = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failures) == 2
    assert "rolled back to 8 bytes" in failures[0]
    assert "File too large" in failures[0]
    assert lines_of(shard) == [b'{"n":0}', b'{"n":2}']


def test_a_partial_record_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    partial = msgspec.json.encode(
        {
            "type": "model_msg",
            "payload": {"type": "partial_text", "event_type": "delta", "text": "h"},
        }
    )
    with ShardWriter(shard) as writer:
        writer.append(event("request_begin"))
        with pytest.raises(RecordRefusedError, match=r"partial_text record .* never written"):
            writer.append(partial)
        with pytest.raises(RecordRefusedError, match="partial_text"):
            writer.append_many([text("ok"), partial])
        writer.append(text('she typed "partial_text" here'))
    assert lines_of(shard) == [event("request_begin"), text('she typed "partial_text" here')]


@pytest.mark.parametrize(
    ("record", "reason"), [(b"", "empty"), (b"  ", "empty"), (b'{"a":\n1}', "newline")]
)
def test_empty_and_multi_line_records_are_refused(
    tmp_path: Path, record: bytes, reason: str
) -> None:
    with (
        ShardWriter(tmp_path / "s_001.jsonl") as writer,
        pytest.raises(RecordRefusedError, match=reason),
    ):
        writer.append(record)


def test_request_end_is_recognised_by_its_header_not_by_its_text() -> None:
    assert is_request_end(event("request_end", status="completed"))
    assert not is_request_end(text('the word "request_end" in a message'))
    assert not is_request_end(event("request_begin"))


def test_per_request_durability_fsyncs_at_request_end_and_on_shard_creation(tmp_path: Path) -> None:
    counter = CountingFsync()
    writer = ShardWriter(tmp_path / "new" / "s_001.jsonl", fsync=counter)
    assert counter.dirs == 1  # the new "new/" folder's entry in tmp_path
    writer.append(event("request_begin"))
    assert (counter.files, counter.dirs) == (1, 2)  # the created shard and its folder
    writer.append(text('mentions "request_end"'))
    assert counter.files == 1
    writer.append(event("request_end", status="completed"))
    assert counter.files == 2
    writer.append_many([event("request_begin"), text("x"), event("request_end", status="failed")])
    assert counter.files == 3
    writer.append_many([text('one record mentioning "request_end"')])  # a save per event
    assert counter.files == 3
    writer.append_many([event("request_end", status="completed")])
    assert counter.files == 4
    writer.append_many([event("request_begin")], sync=True)
    assert counter.files == 5
    writer.append(event("token_usage"), sync=True)
    assert counter.files == 6
    writer.append(event("token_usage"))
    writer.close()  # the unsynced token_usage is flushed on close
    assert (counter.files, counter.dirs) == (7, 2)


def test_no_durability_never_fsyncs(tmp_path: Path) -> None:
    counter = CountingFsync()
    with ShardWriter(
        tmp_path / "d" / "s_001.jsonl", durability=Durability.NONE, fsync=counter
    ) as w:
        w.append_many([event("request_begin"), event("request_end", status="completed")])
        w.append(event("request_end", status="completed"))
    assert (counter.files, counter.dirs) == (0, 0)


def test_every_record_durability_fsyncs_after_each_append(tmp_path: Path) -> None:
    counter = CountingFsync()
    shard = tmp_path / "s_001.jsonl"
    shard.write_bytes(b"")
    with ShardWriter(shard, durability=Durability.EVERY_RECORD, fsync=counter) as w:
        for _ in range(3):
            w.append(text("x"))
        w.append(text("y"), sync=False)
        assert counter.files == 3
    assert counter.files == 4  # close flushes the one skipped


def test_rotation_starts_the_next_shard_with_the_header_records(tmp_path: Path) -> None:
    root = DataRoot(tmp_path)
    days = iter([date(2026, 11, 29), date(2026, 11, 30)])
    headers = [b'{"type":"session_meta","payload":{}}', event("tool_list_ready", tools=[])]
    with open_session_writer(root, "p", "a", SESSION, today=lambda: next(days)) as writer:
        writer.append_many([headers[0], headers[1], event("compaction_end", status="completed")])
        first = writer.path
        new_path = writer.rotate(headers)
        writer.append(event("request_begin"))
        assert writer.index == 2
    assert first == root.shard_path("p", "a", SESSION, 1, date(2026, 11, 29))
    assert new_path == root.shard_path("p", "a", SESSION, 2, date(2026, 11, 30))
    assert lines_of(new_path) == [*headers, event("request_begin")]
    assert len(lines_of(first)) == 3
    latest = root.latest_shard("p", "a", SESSION)
    assert latest is not None
    assert latest.path == new_path


def test_a_reopened_session_writer_continues_its_latest_shard(tmp_path: Path) -> None:
    root = DataRoot(tmp_path)
    day = date(2026, 11, 29)
    with open_session_writer(root, "p", "a", SESSION, today=lambda: day) as writer:
        writer.append(text("one"))
        writer.rotate([text("meta")])
    with open_session_writer(root, "p", "a", SESSION, today=lambda: day) as writer:
        assert writer.index == 2
        writer.append(text("two"))
    assert lines_of(root.shard_path("p", "a", SESSION, 2, day)) == [text("meta"), text("two")]


def test_rotation_refuses_to_reuse_an_existing_shard(tmp_path: Path) -> None:
    nxt = tmp_path / "s_002.jsonl"
    nxt.write_bytes(text("someone else") + b"\n")
    with ShardWriter(
        tmp_path / "s_001.jsonl", next_shard=lambda i: tmp_path / f"s_{i:03d}.jsonl"
    ) as w:
        w.append(text("a"))
        with pytest.raises(TraceWriteError, match=r"s_002\.jsonl: it already exists"):
            w.rotate([text("meta")])
        w.append(text("b"))
        assert w.index == 1
    assert lines_of(tmp_path / "s_001.jsonl") == [text("a"), text("b")]


def test_rotation_needs_a_way_to_name_the_next_shard_and_headers(tmp_path: Path) -> None:
    with ShardWriter(tmp_path / "s_001.jsonl") as w, pytest.raises(UsageError, match="next_shard"):
        w.rotate([text("meta")])
    with (
        ShardWriter(tmp_path / "t_001.jsonl", next_shard=lambda i: tmp_path / "t_002.jsonl") as w,
        pytest.raises(UsageError, match="has no records yet"),
    ):
        w.rotate([text("meta")])
    with (
        ShardWriter(tmp_path / "s_001.jsonl", next_shard=lambda i: tmp_path / "x") as w,
        pytest.raises(UsageError, match="no header records"),
    ):
        w.rotate([])


def test_a_second_writer_gets_an_error_naming_the_holder(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    with ShardWriter(shard):
        with pytest.raises(
            TraceLockedError, match=rf"held by pid {os.getpid()} on host .+ since 20"
        ) as info:
            ShardWriter(shard)
        assert info.value.hint is not None
        assert "wait=" in info.value.hint
        holder = json.loads((tmp_path / "s_001.jsonl.lock").read_text())
        assert holder["pid"] == os.getpid()
    with ShardWriter(shard) as again:  # released on close
        again.append(text("ok"))


def test_a_waiting_writer_times_out_with_the_holder_named(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    with (
        ShardWriter(shard),
        pytest.raises(TraceLockedError, match=r"after waiting 0.05 s.*held by pid"),
    ):
        ShardWriter(shard, wait=0.05)


def test_a_waiting_writer_gets_the_lock_once_the_holder_closes(tmp_path: Path) -> None:
    shard = tmp_path / "s_001.jsonl"
    first = ShardWriter(shard)
    first.append(text("first"))
    releaser = threading.Timer(0.05, first.close)
    releaser.start()
    with ShardWriter(shard, wait=30) as second:
        second.append(text("second"))
    releaser.join()
    assert lines_of(shard) == [text("first"), text("second")]


def test_a_session_lock_is_one_per_session_across_rotations(tmp_path: Path) -> None:
    root = DataRoot(tmp_path)
    with open_session_writer(root, "p", "a", SESSION, today=lambda: date(2026, 11, 29)) as w:
        w.append(text("a"))
        w.rotate([text("meta")])
        with pytest.raises(TraceLockedError, match=f"session {SESSION} is being written"):
            open_session_writer(root, "p", "a", SESSION)


def test_a_session_lock_held_by_an_import_or_delete_keeps_writers_out(tmp_path: Path) -> None:
    root = DataRoot(tmp_path)
    path = session_lock_path(root, "p", "a", SESSION)
    assert path == tmp_path / "p" / "agents" / "a" / "traces" / ".locks" / f"{SESSION}.lock"
    path.parent.mkdir(parents=True)
    with (
        SessionLock(path, label=f"session {SESSION}"),
        pytest.raises(TraceLockedError, match="held by pid"),
    ):
        open_session_writer(root, "p", "a", SESSION)
    with open_session_writer(root, "p", "a", SESSION) as writer:
        writer.append(text("after"))


def test_a_negative_wait_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="lock wait must be None or >= 0"):
        ShardWriter(tmp_path / "s_001.jsonl", wait=-1)
    with ShardWriter(tmp_path / "s_001.jsonl"):
        pass  # the failed open released its lock


def test_a_folder_that_cannot_be_made_is_a_trace_write_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "taken").write_bytes(b"a file where a folder should be")
    with pytest.raises(TraceWriteError, match=r"cannot create the trace folder .*taken/day"):
        ShardWriter(tmp_path / "taken" / "day" / "s_001.jsonl")


def test_a_closed_writer_refuses_to_append(tmp_path: Path) -> None:
    writer = ShardWriter(tmp_path / "s_001.jsonl")
    writer.append(text("a"))
    writer.close()
    writer.close()
    with pytest.raises(UsageError, match="is closed"):
        writer.append(text("b"))
