"""A batch is checked as a whole: any refused record refuses the batch, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from pentrace.errors import RecordRefusedError
from pentrace.infrastructure.trace.writer import ShardWriter


def _text(value: str) -> bytes:
    return msgspec.json.encode(
        {
            "timestamp": "2026-11-29T10:00:00.000Z",
            "type": "model_msg",
            "payload": {"type": "text", "role": "user", "text": value},
        }
    )


_PARTIAL = msgspec.json.encode(
    {"type": "model_msg", "payload": {"type": "partial_text", "event_type": "delta", "text": "h"}}
)

# Records every batch refuses, with the reason the error names.
_REFUSED: list[tuple[bytes, str]] = [
    (b"", "empty record"),
    (b" \t ", "empty record"),
    (b"\n", "empty record"),
    (b'{"a":\n1}', "raw newline"),
    (_PARTIAL, "partial_text record"),
]


@pytest.mark.parametrize(("bad", "reason"), _REFUSED)
@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_batch_holding_one_refused_record_anywhere_writes_nothing(
    tmp_path: Path, bad: bytes, reason: str, position: int
) -> None:
    shard = tmp_path / "s_001.jsonl"
    batch = [_text("a"), _text("b")]
    batch.insert(position, bad)
    with ShardWriter(shard) as writer:
        writer.append(_text("first"))
        with pytest.raises(RecordRefusedError, match=reason):
            writer.append_many(batch)
    assert shard.read_bytes() == _text("first") + b"\n"


@pytest.mark.parametrize(("bad", "reason"), _REFUSED)
def test_a_batch_of_one_refused_record_writes_nothing(
    tmp_path: Path, bad: bytes, reason: str
) -> None:
    shard = tmp_path / "s_001.jsonl"
    with ShardWriter(shard) as writer:
        writer.append_many([_text("first")])
        with pytest.raises(RecordRefusedError, match=reason):
            writer.append_many([bad])
    assert shard.read_bytes() == _text("first") + b"\n"


def test_the_first_refused_record_of_a_batch_is_the_one_reported(tmp_path: Path) -> None:
    with (
        ShardWriter(tmp_path / "s_001.jsonl") as writer,
        pytest.raises(RecordRefusedError, match="empty record"),
    ):
        writer.append_many([_text("a"), b"", b'{"a":\n1}'])


def test_a_batch_that_only_mentions_partial_or_holds_escaped_newlines_is_written(
    tmp_path: Path,
) -> None:
    shard = tmp_path / "s_001.jsonl"
    batch = [_text('she typed "partial_text" here'), _text("two\nlines"), _text("c")]
    with ShardWriter(shard) as writer:
        writer.append_many(batch)
    assert shard.read_bytes().split(b"\n") == [*batch, b""]
