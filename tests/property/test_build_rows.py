"""The sync's rows (``build_session``) are the exact path's rows, byte for byte.

``build_session`` maps each record through :meth:`SessionEvents.encoded`
and takes its columns with ``encoded_values(..., codec)``, which for a
screened candidate derives the columns its shared header gives once per
header.  The reference is the exact path, which does nothing of the kind:
the fully redacted envelope (:meth:`SessionEvents.event`), every check of
:func:`envelope_row` and the stored form of :func:`stored_row`.  Both must
give the same tuple (or the same refusal) for every record: generated legal
sessions (torn tails included), generated records holding secrets and lone
surrogates, and the PenguinHarness fixtures' payloads, in every row form.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.json_codec import JsonEncoder
from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import SessionEvents
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger.backend.codec import RowCodec, train_dictionary
from pentrace.infrastructure.ledger.bulk import build_session
from pentrace.infrastructure.ledger.bulk.build import session_pieces
from pentrace.infrastructure.ledger.rows import (
    ROW_COLUMNS,
    checked_values,
    compressed_rows,
    encoded_values,
    envelope_row,
)
from pentrace.infrastructure.ledger.rows import stored_row as stored
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing.files import write_shards
from pentrace.testing.strategies import trace_records
from tests.integration.test_ledger_indexer import trace_lines
from tests.property.test_event_mapping_header import SECRETS, homeless_batches

_encode = JsonEncoder().encode
_NOW = 1_790_000_000_000
_PENGUIN = Path(__file__).parent.parent / "fixtures" / "penguin"
_HARNESS = Path(__file__).parent.parent / "fixtures" / "penguin_harness"


def _trained() -> bytes:
    samples = [
        _encode({"n": n, "text": f"answer {n}", "lines": trace_lines(f"s{n}", 2)[1].decode()})
        for n in range(400)
    ]
    return train_dictionary(samples, 7)


_DICTIONARY = _trained()
# Every row form: plain (no codec), form 1 (compressed, every column) and form 2.
CODECS: tuple[RowCodec | None, ...] = (
    None,
    RowCodec({7: _DICTIONARY}, 7, derived_ids=False),
    RowCodec({7: _DICTIONARY}, 7, derived_ids=True),
)


def _outcome(build: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...] | str:
    try:
        return build()
    except LedgerError as error:  # RedactionError included
        return f"{type(error).__name__}: {error.message}"


def _exact(
    mapper: SessionEvents, position: int, record: TraceRecord, codec: RowCodec | None
) -> tuple[Any, ...] | str:
    """The row by the exact path: full redaction, every check, then the stored form."""
    event = mapper.event(position, record)

    def build() -> tuple[Any, ...]:
        row = envelope_row(event.to_builtins(), _NOW, _encode(event.to_builtins()))
        if codec is not None:
            row = stored(row, codec)
        return tuple(row[column] for column in ROW_COLUMNS)

    return _outcome(build)


def _ours(
    mapper: SessionEvents, position: int, record: TraceRecord, codec: RowCodec | None
) -> tuple[Any, ...]:
    return encoded_values(mapper.encoded(position, record), _NOW, codec)


def _assert_same_rows(key: SessionKey, records: list[TraceRecord], directory: Any) -> None:
    for codec in CODECS:
        ours, theirs = SessionEvents(key, directory), SessionEvents(key, directory)
        for position, record in enumerate(records * 2, start=1):
            mine = _outcome(functools.partial(_ours, ours, position, record, codec))
            assert mine == _exact(theirs, position, record, codec), (position, record.raw)


@homeless_batches(8)
def test_generated_records_give_the_exact_paths_rows_in_every_row_form(
    batch: list[tuple[TraceRecord, dict[str, Any]]],
) -> None:
    # Records with secrets, odd names and lone surrogates, twice each, so later
    # ones meet the columns remembered for an earlier record's header.
    for record, context in batch:
        key = SessionKey(context["project"], context["agent"], context["session_id"])
        _assert_same_rows(key, [record], context["directory"])
    if batch:
        record, context = batch[0]
        key = SessionKey(context["project"], context["agent"], context["session_id"])
        _assert_same_rows(key, [r for r, _ in batch], context["directory"])


_surrogate_texts = st.sampled_from(["\ud800", "a\udcffb", "\udbff\udfff", "é\ud83d"])


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["text", "tool_call_output", "token_usage", "request_end"]),
    _surrogate_texts,
    st.sampled_from(["s1", "sess-\u00e9", "a\ud800"]),
    st.sampled_from(["/srv/app", "/srv/\udcff", None]),
)
def test_lone_surrogates_anywhere_give_the_exact_paths_rows(
    ptype: str, text: str, session_id: str, workspace: str | None
) -> None:
    kind = "event_msg" if ptype in ("token_usage", "request_end") else "model_msg"
    meta = {"type": "session_meta", "payload": {"session_id": session_id, "workspace": workspace}}
    payload = {"type": ptype, "role": "assistant", "text": text, "sender": text}
    line = {"timestamp": "2026-07-18T03:10:22.531Z", "type": kind, "payload": payload}
    records = [TraceRecord.from_value(meta), TraceRecord.from_value(line)]
    _assert_same_rows(SessionKey("acme", "coder", "session-x"), records, None)


def _fixture_records() -> list[TraceRecord]:
    """Records carrying the payloads of the PenguinHarness RuntimeEvent fixtures."""
    found: list[TraceRecord] = []
    for path in sorted(_PENGUIN.glob("*_v1.json")):
        payload = json.loads(path.read_text("utf-8"))["runtime_event"]["payload"]
        for kind, ptype in (("event_msg", "token_usage"), ("model_msg", "text"), (
            "event_msg", payload.get("type", "new"))):  # fmt: skip
            envelope = {"timestamp": "2026-07-18T03:10:22.531Z", "type": kind}
            found.append(TraceRecord.from_value({**envelope, "payload": {
                **payload, "type": ptype}}))  # fmt: skip
    return found


def test_the_penguin_fixtures_payloads_give_the_exact_paths_rows() -> None:
    records = _fixture_records()
    assert len(records) == 9
    _assert_same_rows(SessionKey("acme", "coder", "ses_fixture"), records, "/srv/app")


@pytest.mark.parametrize("trace", sorted(p.name for p in _HARNESS.glob("*.jsonl")))
def test_the_penguin_harness_traces_give_the_exact_paths_rows(trace: str, tmp_path: Path) -> None:
    lines = (_HARNESS / trace).read_bytes().split(b"\n")
    write_shards(tmp_path, "acme", "coder", "session-2026-07-18-11-10-22-0000abcd", [lines])
    for codec in CODECS:
        built, exact = _session_rows(tmp_path, codec)
        assert len(built) > 3
        assert built == exact


def _session_rows(root: Path, codec: RowCodec | None) -> tuple[list[Any], list[Any]]:
    (ref,) = iter_sessions(root)
    built = build_session(ref, frozenset(), 0, _NOW, codec)
    mapper = SessionEvents(ref.key)
    exact = [
        _exact(mapper, position, record, codec)
        for position, record in enumerate(read_session(ref.shards), start=1)
    ]
    # A refused record is left out, one finding at its position; the others are built.
    kept = [row for row in exact if not isinstance(row, str)]
    refused = [position for position, row in enumerate(exact, start=1) if isinstance(row, str)]
    assert [failure.position for failure in built.failures] == refused
    # Built in pieces (a large session, by the writer), the rows and findings are the same.
    pieces = list(session_pieces(ref, frozenset(), 0, _NOW, codec, 2))
    assert [row for piece in pieces for row in piece.rows] == built.rows
    assert all(len(piece.rows) == 2 for piece in pieces[:-1])
    assert [piece.final for piece in pieces] == [False] * (len(pieces) - 1) + [True]
    assert pieces[-1].failures == built.failures
    assert sum(piece.already_held for piece in pieces) == built.already_held
    return built.rows, kept


@settings(max_examples=60, deadline=None)
@given(
    trace_records(crashed=True),
    st.lists(st.sampled_from([*SECRETS[:6], "token_usage", "\ud800"]), max_size=3),
)
def test_a_session_built_from_its_files_has_the_exact_paths_rows(
    lines: list[bytes], planted: list[str]
) -> None:
    # A legal session cut anywhere (a torn tail), with secrets planted in new records.
    extra = [
        json.dumps(
            {"timestamp": "2026-07-18T03:10:22.531Z", "type": "model_msg", "payload": {
                "type": "tool_call_output", "tool_call_id": "c9", "output": f"ok {text} ok"}}
        ).encode() + b"\n"
        for text in planted
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_shards(root, "acme", "coder", "session-2026-07-18-11-10-22-0000abcd", [
            extra + lines])  # fmt: skip
        for codec in CODECS:
            built, exact = _session_rows(root, codec)
            assert built == exact


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=3000) | st.sampled_from([b"{}", b"x" * 5000]),
                max_size=40))  # fmt: skip
def test_a_sessions_frames_made_at_once_are_the_frames_made_one_by_one(
    plains: list[bytes],
) -> None:
    # ``ledger sync`` compresses a session's envelopes in one call: each frame must be the
    # one ``stored_json`` makes (so the same row bytes), names the dictionary and reads alone.
    codec = CODECS[2]
    assert codec is not None
    frames = codec.stored_many(plains)
    assert frames == [codec.stored_json(plain) for plain in plains]
    for plain, frame in zip(plains, frames, strict=True):
        assert zstandard.get_frame_parameters(frame).dict_id == 7
        assert codec.plain_json(frame) == plain
    assert RowCodec().stored_many(plains) == plains  # no dictionary: stored plain


@homeless_batches(8)
def test_rows_checked_plain_then_compressed_together_are_the_rows_one_by_one(
    batch: list[tuple[TraceRecord, dict[str, Any]]],
) -> None:
    for codec in CODECS:
        one, together = _mappers(batch), _mappers(batch)
        expected, checked = [], []
        for position, (record, context) in enumerate(batch, start=1):
            key = (context["project"], context["agent"], context["session_id"])
            mine = _outcome(
                functools.partial(encoded_values, one[key].encoded(position, record), _NOW, codec)
            )
            plain = _outcome(functools.partial(
                checked_values, together[key].encoded(position, record), _NOW, codec))  # fmt: skip
            assert isinstance(mine, str) == isinstance(plain, str)  # the same refusals
            if not isinstance(mine, str):
                assert isinstance(plain, tuple)
                expected.append(mine)
                checked.append(plain)
        assert compressed_rows(checked, codec) == expected


def _mappers(batch: list[tuple[TraceRecord, dict[str, Any]]]) -> dict[Any, SessionEvents]:
    return {
        (c["project"], c["agent"], c["session_id"]): SessionEvents(
            SessionKey(c["project"], c["agent"], c["session_id"]), c["directory"]
        )
        for _, c in batch
    }
