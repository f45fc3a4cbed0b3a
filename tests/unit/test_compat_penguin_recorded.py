"""Every compat helper, called with Penguin's keywords, gives Penguin's recorded result.

``tests/fixtures/penguin/recorded_calls.json`` holds calls and the results
Penguin's own modules returned (``record_calls.py`` beside it made them).  The
inputs stay clear of Penguin's documented weaknesses, so each result must come
back exactly, key order included.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pentrace.compat.penguin as compat

RECORDED = Path(__file__).parent.parent / "fixtures" / "penguin" / "recorded_calls.json"
CALLS: list[dict[str, Any]] = json.loads(RECORDED.read_text("utf-8"))


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    compat.reset_runtime_event_sequences()
    yield
    compat.reset_runtime_event_sequences()


def _canonical(value: Any) -> str:
    # Tuples become lists, as in the recording; key order is kept and compared.
    return json.dumps(value, ensure_ascii=False)


@pytest.mark.parametrize(
    "call", CALLS, ids=[f"{index:03d}-{call['function']}" for index, call in enumerate(CALLS)]
)
def test_the_compat_helper_returns_penguins_recorded_result(call: dict[str, Any]) -> None:
    function = getattr(compat, call["function"])
    result = function(*call["args"], **call["kwargs"])
    assert _canonical(result if not isinstance(result, tuple) else list(result)) == _canonical(
        call["result"]
    )


def test_the_recording_covers_every_public_envelope_helper() -> None:
    called = {call["function"] for call in CALLS}
    helpers = {
        "build_runtime_event", "event_category", "extract_runtime_scope",
        "normalize_event_directory", "normalize_runtime_event",
        "opencode_payload_from_runtime_event", "redact_runtime_payload",
        "runtime_event_from_opencode", "wrap_opencode_event", "normalize_opencode_event",
        "extract_event_session", "extract_event_directory", "normalize_directory",
        "directory_matches", "sse_event_frame",
    }  # fmt: skip
    assert helpers <= called


PENGUIN_SIGNATURES = {
    "build_runtime_event": "(*, event_type, payload, actor=None, category=None, correlation=None, "
    "event_id=None, projections=None, scope=None, sequence=None, source='penguin.backend', "
    "stream_id=None, subject=None, time_ms=None)",
    "runtime_event_from_opencode": "(data, *, default_agent_id=None, default_directory=None, "
    "default_session_id=None, now_ms=None, sequence=None)",
    "normalize_runtime_event": "(value, *, default_agent_id=None, default_directory=None, "
    "default_session_id=None, now_ms=None, overlay_payload=None, sequence=None)",
    "wrap_opencode_event": "(event_type, properties, *, default_agent_id=None, "
    "default_directory=None, default_session_id=None, now_ms=None)",
    "normalize_opencode_event": "(data, *, order, default_agent_id=None, default_directory=None, "
    "default_session_id=None, now_ms=None)",
    "redact_runtime_payload": "(value, path='')",
    "event_category": "(event_type, payload=None)",
    "record_opencode_event": "(core, data, *, persist=True)",
    "schedule_opencode_event": "(core_getter, event_type, properties, *, logger=None)",
    "get_runtime_event_ledger": "(core=None)",
}


@pytest.mark.parametrize("name", sorted(PENGUIN_SIGNATURES))
def test_the_helpers_take_penguins_parameters_and_defaults(name: str) -> None:
    parameters = inspect.signature(getattr(compat, name)).parameters.values()
    shown = inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in parameters])
    assert str(shown) == PENGUIN_SIGNATURES[name]


PENGUIN_MODULES = {
    "runtime_events": {
        "RUNTIME_EVENT_CATEGORIES", "RUNTIME_EVENT_SCHEMA_VERSION", "build_runtime_event",
        "event_category", "extract_runtime_scope", "normalize_event_directory",
        "normalize_runtime_event", "opencode_payload_from_runtime_event",
        "redact_runtime_payload", "reset_runtime_event_sequences",
        "runtime_event_from_opencode", "wrap_opencode_event",
    },
    "runtime_event_ledger": {
        "DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS", "DEFAULT_LEDGER_MAX_AGE_DAYS",
        "DEFAULT_LEDGER_MAX_BYTES", "DEFAULT_LEDGER_MAX_EVENTS", "ReplayResult",
        "RuntimeEventLedger", "RuntimeEventLedgerPolicy", "default_ledger_path",
        "get_runtime_event_ledger", "policy_from_env",
    },
    "opencode_events": {
        "GLOBAL_STATUS_EVENTS", "directory_matches", "emit_opencode_event",
        "extract_event_directory", "extract_event_session", "normalize_directory",
        "normalize_opencode_event", "record_opencode_event", "schedule_opencode_event",
        "sse_event_frame",
    },
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(PENGUIN_MODULES))
def test_every_public_name_of_penguins_modules_is_offered_by_module_and_package(
    module: str,
) -> None:
    names = PENGUIN_MODULES[module]
    mirror = importlib.import_module(f"pentrace.compat.penguin.{module}")
    assert names <= set(mirror.__all__)
    assert names <= set(compat.__all__)
    for name in names:
        assert getattr(compat, name) is getattr(mirror, name)


def test_the_constants_have_penguins_values_and_types() -> None:
    assert compat.RUNTIME_EVENT_SCHEMA_VERSION == "penguin.runtime_event.v1"
    assert isinstance(compat.RUNTIME_EVENT_CATEGORIES, set)
    assert len(compat.RUNTIME_EVENT_CATEGORIES) == 11
    assert (compat.DEFAULT_LEDGER_MAX_EVENTS, compat.DEFAULT_LEDGER_MAX_AGE_DAYS) == (100_000, 14)
    assert compat.DEFAULT_LEDGER_MAX_BYTES == 256 * 1024 * 1024
    assert compat.DEFAULT_LEDGER_CLEANUP_INTERVAL_SECONDS == 60.0
    assert compat.RuntimeEventLedgerPolicy() == compat.RuntimeEventLedgerPolicy(
        100_000, 14 * 86_400, 256 * 1024 * 1024, 60.0
    )


def test_a_nested_part_request_id_is_not_a_source_id() -> None:
    event = compat.runtime_event_from_opencode(
        {"type": "message.part.updated", "properties": {"part": {"requestID": "r1", "id": "p1"}}},
        now_ms=1,
    )
    assert event is not None
    assert event["subject"] == "message.part.updated:p1"
    only_request = compat.build_runtime_event(
        event_type="x.y", payload={"part": {"requestID": "r1"}}, time_ms=1
    )
    assert only_request["subject"] == "x.y"
