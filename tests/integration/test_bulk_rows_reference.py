"""The bulk path's rows are the reference mapping's rows, byte for byte.

``build_session`` builds each record's candidate from the session's shared
headers (:mod:`pentrace.domain.runtime.candidate`), keeps it when the screen
clears its bytes and takes its columns from the struct.  The reference maps
each record field by field with the full redaction
(``runtime_event_from_record``), encodes the builtins with ``JsonEncoder`` and
makes the row with every check of ``envelope_row``; where that refuses a
record, the session's rows stop there and it is reported.  The traces are the
PenguinHarness fixtures, records made from Penguin's runtime-event fixtures,
and generated sessions with secrets in texts, keys, tool output and names.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.domain.records import TraceRecord
from pentrace.domain.runtime import record_workspace, runtime_event_from_record
from pentrace.domain.runtime.candidate import Candidates
from pentrace.domain.session.key import SessionKey
from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger.bulk import build_session
from pentrace.infrastructure.ledger.rows import ROW_COLUMNS, envelope_row
from pentrace.infrastructure.storage.layout import SessionRef, iter_sessions, name_problem
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing.files import write_shards
from tests.property.test_event_mapping_header import SECRETS

FIXTURES = Path(__file__).parent.parent / "fixtures"
HARNESS_TRACES = sorted((FIXTURES / "penguin_harness").glob("*.jsonl"))
PENGUIN_EVENTS = sorted((FIXTURES / "penguin").glob("*_v1.json"))
NOW = 1_790_000_000_000
# Secrets a session id may be (a path component): one in the session's own name.
NAMED_SECRETS = [secret for secret in SECRETS if name_problem(f"s-{secret}") is None]
_encode = msgspec.json.encode


def reference_rows(ref: SessionRef) -> tuple[list[tuple[Any, ...]], list[int]]:
    """The session's rows by the reference path, and the positions of the records it refused
    (each left out: ADR 0102)."""
    records = list(read_session(ref.shards))
    directory = record_workspace(records[0]) if records else None
    rows: list[tuple[Any, ...]] = []
    refused: list[int] = []
    for position, record in enumerate(records, start=1):
        event = runtime_event_from_record(
            record,
            session_id=ref.key.session_id,
            position=position,
            project=ref.key.project,
            agent=ref.key.agent,
            directory=directory,
        )
        try:
            row = envelope_row(event.to_builtins(), NOW)
        except LedgerError:
            refused.append(position)
            continue
        rows.append(tuple(row[column] for column in ROW_COLUMNS))
    return rows, refused


def assert_bulk_rows_are_the_reference(root: Path) -> None:
    refs = list(iter_sessions(root))
    assert refs
    for ref in refs:
        built = build_session(ref, frozenset(), 0, NOW)
        expected, refused = reference_rows(ref)
        assert built.rows == expected, ref.key
        assert [failure.position for failure in built.failures] == refused, ref.key


def candidate_share(root: Path) -> float:
    """The share of records the shared-header candidate builds (the rest take the mapping)."""
    built = total = 0
    for ref in iter_sessions(root):
        records = list(read_session(ref.shards))
        directory = record_workspace(records[0]) if records else None
        candidates = Candidates(ref.key)
        for position, record in enumerate(records, start=1):
            total += 1
            built += candidates.candidate(position, record, directory) is not None
    return built / total


def line(kind: str, payload: dict[str, Any], second: int, **extra: Any) -> bytes:
    stamp = f"2026-11-30T08:{second // 60 % 60:02d}:{second % 60:02d}.{second % 1000:03d}Z"
    return _encode({"timestamp": stamp, "type": kind, "payload": payload, **extra})


def generated_session(rng: random.Random, records: int) -> list[bytes]:
    """A session_meta, then requests of user text, thinking, tool calls and outputs,
    approvals, partials, ends and token usage; about one record in six holds a secret."""

    def text() -> str:
        words = " ".join(rng.choices(["deploy", "the", "build", "token", "café", "key"], k=6))
        return f"{words} {rng.choice(SECRETS)}" if rng.random() < 0.17 else words

    workspace = rng.choice(["/srv/app", "~/work", f"/home/{rng.choice(SECRETS)}"])
    lines = [line("session_meta", {"workspace": workspace, "provider": "openai"}, 0)]
    while len(lines) < records:
        second = len(lines)
        call = f"call_{second}"
        choices: list[tuple[str, dict[str, Any]]] = [
            ("model_msg", {"type": "text", "role": "user", "text": text()}),
            ("model_msg", {"type": "text", "role": "user", "text": text(), "sender": "ops"}),
            ("event_msg", {"type": "request_begin"}),
            ("model_msg", {"type": "thinking", "role": "assistant", "thinking": text()}),
            ("model_msg", {"type": "tool_call", "role": "assistant", "tool_call_id": call}),
            ("model_msg", {"type": "tool_call_output", "tool_call_id": call, "output": text()}),
            ("model_msg", {"type": "partial_text", "role": "assistant", "text": text()}),
            ("model_msg", {"type": "text", "role": "assistant", "api_key": text()}),
            ("event_msg", {"type": "approval_decision", "tool_call_id": call}),
            ("event_msg", {"type": "request_end", "status": rng.choice(["completed", "x"])}),
            ("event_msg", {"type": "token_usage", "session": {"total": second}}),
            ("event_msg", {"type": "subagent", "session_id": "child"}),
            ("model_msg", {"type": "text", "role": "assistant", "part": {"text": text()}}),
            ("session_meta", {"workspace": "/x", "provider": rng.choice(["a", 7, None, ["x"]])}),
        ]
        kind, payload = rng.choice(choices)
        extra = {"origin": ["goal", text()]} if rng.random() < 0.05 else {}
        lines.append(line(kind, payload, second, **extra))
    return lines


@pytest.mark.parametrize("trace", HARNESS_TRACES, ids=lambda path: path.stem)
def test_penguin_harness_traces_give_the_reference_rows(tmp_path: Path, trace: Path) -> None:
    lines = trace.read_bytes().split(b"\n")
    write_shards(tmp_path, "harness", "coder", f"session-{trace.stem}", [lines])
    assert_bulk_rows_are_the_reference(tmp_path)


def test_records_of_penguins_runtime_event_fixtures_give_the_reference_rows(
    tmp_path: Path,
) -> None:
    lines = [line("session_meta", {"workspace": "/tmp/penguin-fixture"}, 0)]
    for number, path in enumerate(PENGUIN_EVENTS, start=1):
        payload = json.loads(path.read_text("utf-8"))["runtime_event"]["payload"]
        # As Penguin sent it, and without the keys the header reads (the shared-header path).
        plain = {key: value for key, value in payload.items() if not key[0].islower()}
        lines.append(line("event_msg", payload, number))
        lines.append(line("model_msg", {**plain, "type": "text", "role": "assistant"}, number))
    write_shards(tmp_path, "penguin", "default", "ses_fixture", [lines])
    assert_bulk_rows_are_the_reference(tmp_path)


@pytest.mark.parametrize("seed", range(4))
def test_generated_sessions_with_secrets_give_the_reference_rows(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for number, name in enumerate(["s1", f"s-{rng.choice(NAMED_SECRETS)}", "séance", "s4"]):
        session = generated_session(rng, 120 + 40 * number)
        write_shards(tmp_path, rng.choice(["acme", "password"]), "coder", name, [session])
    assert_bulk_rows_are_the_reference(tmp_path)
    assert candidate_share(tmp_path) > 0.7  # most records took the shared-header path


def test_a_candidate_is_none_for_a_record_whose_header_reads_the_payload() -> None:
    candidates = Candidates(SessionKey("acme", "coder", "s1"))
    reads = TraceRecord.from_value({"type": "model_msg", "payload": {"sessionID": "other"}})
    plain = TraceRecord.from_value({"type": "model_msg", "payload": {"text": "hi"}})
    assert candidates.candidate(2, reads, None) is None
    assert candidates.candidate(2, plain, None) is not None
