"""pentrace.compat.penguin reproduces Penguin's observed envelope semantics case by case.

The cases come from /work/shared/reference/runtime-events-semantics.md; the
fixtures in tests/fixtures/penguin/ are Penguin's own envelopes and must come
out byte for byte.  Where Penguin is weak, tests/unit/test_runtime_event_weaknesses.py
shows the deviation instead.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pentrace.compat.penguin import (
    SCHEMA_VERSION,
    build_runtime_event,
    event_category,
    extract_runtime_scope,
    normalize_runtime_event,
    opencode_payload_from_runtime_event,
    redact_runtime_payload,
    reset_runtime_event_sequences,
    runtime_event_from_opencode,
    wrap_opencode_event,
)
from tests.support import loaded_by

FIXTURES = sorted((Path(__file__).parent.parent / "fixtures" / "penguin").glob("*_v1.json"))
KEY_ORDER = [
    "id", "schema_version", "type", "category", "source", "subject", "time", "stream_id",
    "sequence", "scope", "correlation", "actor", "privacy", "payload", "projections",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    reset_runtime_event_sequences()
    yield
    reset_runtime_event_sequences()


def _fixture(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return value


def _event(event_type: str = "custom.thing", **options: Any) -> dict[str, Any]:
    options.setdefault("time_ms", 1)
    options.setdefault("payload", {})
    return build_runtime_event(event_type=event_type, **options)


# Fixtures ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_penguin_fixture_envelopes_are_rebuilt_byte_for_byte(path: Path) -> None:
    expected = _fixture(path)["runtime_event"]
    event = build_runtime_event(
        event_type=expected["type"],
        payload=expected["payload"],
        actor=expected["actor"],
        sequence=expected["sequence"],
        time_ms=expected["time"],
        projections=expected["projections"],
    )
    assert msgspec.json.encode(event) == msgspec.json.encode(expected)


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_penguin_fixture_opencode_projections_match(path: Path) -> None:
    fixture = _fixture(path)
    projected = opencode_payload_from_runtime_event(fixture["runtime_event"])
    assert msgspec.json.encode(projected) == msgspec.json.encode(fixture["opencode"])


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_an_opencode_event_becomes_the_fixture_envelope_and_wraps_back(path: Path) -> None:
    # Penguin's runtime_event_from_opencode sets no actor, and names the projection
    # by the top-level ``requestID`` before the part's id (the fixtures were written
    # with explicit actor and projections); everything else is the fixture's.
    fixture = _fixture(path)
    expected = fixture["runtime_event"]
    opencode = {"type": expected["type"], "properties": expected["payload"]}
    event = runtime_event_from_opencode(
        opencode, now_ms=expected["time"], sequence=expected["sequence"]
    )
    assert event is not None
    source = expected["payload"].get("id") or expected["payload"]["requestID"]
    projection = {"id": f"{expected['type']}:ses_fixture:{source}", "type": expected["type"]}
    assert event == {**expected, "actor": {}, "projections": {"opencode": projection}}
    reset_runtime_event_sequences({expected["stream_id"]: expected["sequence"] - 1})
    wrapped = wrap_opencode_event(expected["type"], expected["payload"], now_ms=expected["time"])
    assert wrapped == {
        "type": expected["type"],
        "properties": fixture["opencode"]["properties"],
        "runtime_event": {**event},
        "id": fixture["opencode"]["id"],
        "time": fixture["opencode"]["time"],
        "order": fixture["opencode"]["order"],
    }


# Envelope basics -----------------------------------------------------------------------------


def test_the_envelope_has_penguins_keys_in_penguins_order() -> None:
    event = _event(payload={"x": 1})
    assert list(event) == KEY_ORDER
    assert list(msgspec.json.decode(msgspec.json.encode(event))) == KEY_ORDER


def test_schema_version_and_default_source() -> None:
    event = _event()
    assert (event["schema_version"], event["source"]) == (SCHEMA_VERSION, "penguin.backend")
    assert SCHEMA_VERSION == "penguin.runtime_event.v1"
    assert _event(source="penguin.tui")["source"] == "penguin.tui"


def test_time_ms_is_kept_verbatim_even_when_zero_or_negative() -> None:
    assert [_event(time_ms=value)["time"] for value in (0, -5, 1800000000000)] == [
        0,
        -5,
        1800000000000,
    ]


def test_the_payload_is_a_copy_and_the_input_is_not_touched() -> None:
    payload = {"nested": {"password": "pw-1"}, "items": [1, 2]}
    event = _event(payload=payload)
    assert payload == {"nested": {"password": "pw-1"}, "items": [1, 2]}
    event["payload"]["items"].append(3)
    assert payload["items"] == [1, 2]


# Redaction (key rules) -----------------------------------------------------------------------


@pytest.mark.parametrize("hidden", [{"a": 1}, [1, 2], None, 42, True, "x"])
def test_a_secret_keys_whole_value_becomes_the_redacted_string(hidden: Any) -> None:
    value, paths = redact_runtime_payload({"token": hidden, "keep": 1})
    assert value == {"token": "[redacted]", "keep": 1}
    assert paths == ["token"]


def test_redaction_paths_are_dotted_with_list_indices_depth_first() -> None:
    payload = {
        "providers": [{"name": "a"}, {"auth": {"password": "p", "user": "u"}}],
        "matrix": [[1], [2], [[{"refresh_token": "r"}]]],
    }
    value, paths = redact_runtime_payload(payload)
    assert paths == ["providers[1].auth.password", "matrix[2][0][0].refresh_token"]
    assert value["providers"][1]["auth"] == {"password": "[redacted]", "user": "u"}


def test_a_literal_dotted_key_and_nesting_give_the_same_path_twice() -> None:
    _, paths = redact_runtime_payload({"a.b": {"token": 1}, "a": {"b": {"token": 2}}})
    assert paths == ["a.b.token", "a.b.token"]


def test_redaction_does_not_descend_below_a_secret_key() -> None:
    _, paths = redact_runtime_payload({"credentials": {"password": "p", "token": "t"}})
    assert paths == ["credentials"]


@pytest.mark.parametrize(
    "key",
    [
        "authorization", "bearer_token", "client_secret", "id_token", "password", "private_key",
        "refresh_token", "secret", "secret_key", "token", "apiKey", "api-key", "db_password",
        "has_password", "secret_name", "authorization_url", "private_keys", "accessToken",
        "auth_token", "sessionToken", "x-refresh-token",
    ],
)  # fmt: skip
def test_penguins_secret_key_rules_still_redact(key: str) -> None:
    value, paths = redact_runtime_payload({key: "v"})
    assert (value, paths) == ({key: "[redacted]"}, [key])


@pytest.mark.parametrize(
    "key", ["tokens", "token_usage", "input_tokens", "context_window", "max_tokens", "key", "keys"]
)
def test_token_telemetry_and_bare_key_names_survive(key: str) -> None:
    assert redact_runtime_payload({key: 7}) == ({key: 7}, [])


def test_privacy_block_lists_the_redacted_fields() -> None:
    assert _event(payload={"x": 1})["privacy"] == {
        "classification": "public",
        "redacted": False,
        "redacted_fields": [],
    }
    assert _event(payload={"apiKey": "k", "n": {"secret": 1}})["privacy"] == {
        "classification": "sensitive",
        "redacted": True,
        "redacted_fields": ["apiKey", "n.secret"],
    }


# Category ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "payload", "expected"),
    [
        ("permission.asked", {}, "user_input_approval"),
        ("permission.replied", {}, "user_input_approval"),
        ("question.asked", {}, "user_input_approval"),
        ("question.replied", {}, "user_input_approval"),
        ("question.rejected", {}, "user_input_approval"),
        ("permission.updated", {}, "session_lifecycle"),
        ("message.part.updated", {"part": {"type": "text"}}, "stream_chunk"),
        ("message.part.updated", {"part": {"type": "reasoning"}}, "stream_chunk"),
        ("message.part.removed", {"part": {"type": "text"}}, "stream_chunk"),
        ("message.part.updated", {"part": {"type": "tool"}}, "tool_action_lifecycle"),
        ("message.part.updated", {"part": {"type": "Text"}}, "tool_action_lifecycle"),
        ("message.part.updated", {}, "tool_action_lifecycle"),
        ("message.updated", {}, "message_lifecycle"),
        ("message.part.delta", {}, "message_lifecycle"),
        ("session.diff", {}, "file_diff"),
        ("session.diff.updated", {}, "file_diff"),
        ("vcs.branch.updated", {}, "file_diff"),
        ("session.error", {}, "error"),
        ("session.error.fatal", {}, "error"),
        ("tool.error", {}, "error"),
        ("session.created", {}, "session_lifecycle"),
        ("session.idle", {}, "session_lifecycle"),
        ("tool.started", {}, "tool_action_lifecycle"),
        ("tool_call", {}, "tool_action_lifecycle"),
        ("action.run", {}, "tool_action_lifecycle"),
        ("todo.updated", {}, "tool_action_lifecycle"),
        ("task.created", {}, "task_run_state"),
        ("run.started", {}, "task_run_state"),
        ("provider.updated", {}, "provider_model_state"),
        ("model.switched", {}, "provider_model_state"),
        ("token.usage.updated", {}, "cwm_token_usage"),
        ("usage.updated", {}, "cwm_token_usage"),
        ("context_window.updated", {}, "cwm_token_usage"),
        ("cwm.updated", {}, "cwm_token_usage"),
        ("notification.sent", {}, "notification"),
        ("file.edited", {}, "file_diff"),
        ("lsp.diagnostics", {}, "file_diff"),
        ("", {}, "session_lifecycle"),
        ("error", {}, "session_lifecycle"),
        ("Session.Created", {}, "session_lifecycle"),
        ("something.else", {}, "session_lifecycle"),
    ],
)
def test_category_follows_penguins_first_matching_rule(
    event_type: str, payload: dict[str, Any], expected: str
) -> None:
    assert event_category(event_type, payload) == expected
    assert _event(event_type, payload=payload)["category"] == expected


def test_an_explicit_category_wins_without_validation() -> None:
    assert _event("message.updated", category="made_up")["category"] == "made_up"


# Scope ---------------------------------------------------------------------------------------


def test_scope_takes_the_first_non_empty_string_of_each_targets_keys() -> None:
    scope = extract_runtime_scope(
        {
            "sessionID": 5,
            "session_id": "",
            "conversation_id": "conv-1",
            "agent_id": "agent-1",
            "task": "task-1",
            "runID": "run-1",
            "project_id": "proj-1",
            "providerID": "openrouter",
            "model_id": "m-1",
        }
    )
    assert scope == {
        "session_id": "conv-1",
        "conversation_id": "conv-1",
        "agent_id": "agent-1",
        "task_id": "task-1",
        "run_id": "run-1",
        "project_id": "proj-1",
        "provider_id": "openrouter",
        "model_id": "m-1",
    }


def test_session_id_alone_also_sets_the_conversation() -> None:
    assert extract_runtime_scope({"sessionID": "s1"}) == {
        "session_id": "s1",
        "conversation_id": "s1",
    }


def test_the_outer_level_beats_part_which_beats_info_which_beats_status() -> None:
    scope = extract_runtime_scope(
        {
            "conversation_id": "outer",
            "part": {"sessionID": "from-part", "agentID": "part-agent", "taskID": "part-task"},
            "info": {"agentID": "info-agent", "runID": "info-run", "taskID": "info-task"},
            "status": {"runID": "status-run", "projectID": "status-project"},
        }
    )
    assert scope["session_id"] == "outer"
    assert scope["agent_id"] == "part-agent"
    assert scope["task_id"] == "part-task"
    assert scope["run_id"] == "info-run"
    assert scope["project_id"] == "status-project"


def test_scope_recursion_reaches_any_depth_of_part_info_and_status() -> None:
    scope = extract_runtime_scope({"part": {"info": {"status": {"modelID": "deep"}}}})
    assert scope == {"model_id": "deep"}


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"directory": "/srv/a/", "info": {"directory": "/srv/b"}}, "/srv/a"),
        ({"info": {"directory": "/srv/b"}, "path": {"cwd": "/srv/c"}}, "/srv/b"),
        ({"info": {"path": {"cwd": "/srv/d"}, "cwd": "/srv/e"}}, "/srv/d"),
        ({"info": {"cwd": "/srv/e"}, "path": {"cwd": "/srv/c"}}, "/srv/e"),
        ({"path": {"cwd": "/srv/c/./x/.."}}, "/srv/c"),
        ({"part": {"cwd": "/srv/f"}}, "/srv/f"),
        ({"directory": "", "path": {"cwd": "/srv/c"}}, "/srv/c"),
    ],
)
def test_directory_takes_the_first_candidate_normalised(
    payload: dict[str, Any], expected: str
) -> None:
    scope = extract_runtime_scope(payload)
    assert (scope["directory"], scope["workspace"]) == (expected, expected)


def test_a_blank_top_level_directory_stops_the_search_but_recursion_may_still_find_one() -> None:
    assert "directory" not in extract_runtime_scope({"directory": "  ", "path": {"cwd": "/srv/c"}})
    scope = extract_runtime_scope(
        {"directory": " ", "path": {"cwd": "/c"}, "part": {"directory": "/p"}}
    )
    assert scope["directory"] == "/p"


def test_a_home_relative_directory_expands_to_the_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ada")
    assert extract_runtime_scope({"directory": "~/proj/"})["directory"] == "/home/ada/proj"


def test_explicit_scope_merges_over_with_none_dropped_and_empty_overriding() -> None:
    event = _event(
        payload={"sessionID": "s1", "agentID": "a1"},
        scope={"agent_id": "", "session_id": None, "tenant": "acme"},
    )
    assert event["scope"] == {
        "session_id": "s1",
        "conversation_id": "s1",
        "agent_id": "",
        "tenant": "acme",
    }


# Correlation, subject, stream ----------------------------------------------------------------


def test_correlation_fills_request_trace_and_parent_ids_from_top_level_strings() -> None:
    event = _event(
        payload={
            "requestID": "r1",
            "trace_id": "t1",
            "parentEventID": "p1",
            "part": {"traceID": "no"},
        },
        correlation={"message_id": "m1"},
    )
    assert event["correlation"] == {
        "message_id": "m1",
        "request_id": "r1",
        "trace_id": "t1",
        "parent_event_id": "p1",
    }


def test_explicit_correlation_wins_unless_falsy() -> None:
    event = _event(
        payload={"requestID": "r1", "traceID": "t1"},
        correlation={"request_id": "mine", "trace_id": ""},
    )
    assert event["correlation"] == {"request_id": "mine", "trace_id": "t1"}


@pytest.mark.parametrize(
    ("payload", "subject"),
    [
        ({"sessionID": "s1", "taskID": "t1"}, "session_id:s1"),
        ({"taskID": "t1", "runID": "r1", "agentID": "a1"}, "task_id:t1"),
        ({"runID": "r1", "agentID": "a1"}, "run_id:r1"),
        ({"agentID": "a1"}, "agent_id:a1"),
        ({"id": "x1", "requestID": "q1"}, "custom.thing:x1"),
        ({"requestID": "q1", "messageID": "m1"}, "custom.thing:q1"),
        ({"messageID": "m1", "partID": "p1"}, "custom.thing:m1"),
        ({"part": {"messageID": "m2"}, "info": {"id": "i2"}}, "custom.thing:m2"),
        ({"info": {"partID": "p3"}}, "custom.thing:p3"),
        ({}, "custom.thing"),
    ],
)
def test_subject_is_scope_then_source_id_then_type(payload: dict[str, Any], subject: str) -> None:
    assert _event(payload=payload)["subject"] == subject


def test_an_explicit_subject_wins_when_non_empty() -> None:
    assert _event(payload={"sessionID": "s"}, subject="mine")["subject"] == "mine"
    assert _event(payload={"sessionID": "s"}, subject="")["subject"] == "session_id:s"


@pytest.mark.parametrize(
    ("payload", "stream"),
    [
        ({"sessionID": "s1", "runID": "r1"}, "session:s1"),
        ({"taskID": "t1", "runID": "r1"}, "run:r1"),
        ({"taskID": "t1"}, "task:t1"),
        ({"directory": "/srv/app"}, "workspace:" + hashlib.sha256(b"/srv/app").hexdigest()[:12]),
        ({"agentID": "a1"}, "global"),
    ],
)
def test_stream_id_is_session_run_task_workspace_or_global(
    payload: dict[str, Any], stream: str
) -> None:
    assert _event(payload=payload)["stream_id"] == stream


def test_an_explicit_stream_id_wins() -> None:
    assert _event(payload={"sessionID": "s"}, stream_id="custom")["stream_id"] == "custom"


# Sequence and id -----------------------------------------------------------------------------


def test_sequences_count_from_one_per_stream() -> None:
    ids = [_event(payload={"sessionID": sid})["id"] for sid in ("s1", "s1", "s2", "s1")]
    assert ids == [
        "evt:session:s1:00000001",
        "evt:session:s1:00000002",
        "evt:session:s2:00000001",
        "evt:session:s1:00000003",
    ]


@pytest.mark.parametrize(
    ("sequence", "suffix"), [(0, "00000000"), (-3, "-0000003"), (42, "00000042")]
)
def test_an_explicit_sequence_is_used_verbatim(sequence: int, suffix: str) -> None:
    event = _event(payload={"sessionID": "s"}, sequence=sequence)
    assert (event["sequence"], event["id"]) == (sequence, f"evt:session:s:{suffix}")


def test_an_explicit_event_id_wins_but_still_consumes_the_counter() -> None:
    assert _event(payload={"sessionID": "s"}, event_id="mine")["id"] == "mine"
    assert _event(payload={"sessionID": "s"})["id"] == "evt:session:s:00000002"


def test_reset_restarts_the_counters() -> None:
    _event(payload={"sessionID": "s"})
    reset_runtime_event_sequences()
    assert _event(payload={"sessionID": "s"})["sequence"] == 1


def test_a_clean_stream_id_is_used_as_is_in_the_event_id() -> None:
    event = _event(stream_id="run:job_1.a-b")
    assert event["id"] == "evt:run:job_1.a-b:00000001"


def test_a_long_stream_id_keeps_48_characters_and_a_sha256_prefix() -> None:
    stream = "session:" + "x" * 100
    digest = hashlib.sha256(stream.encode()).hexdigest()[:12]
    assert _event(stream_id=stream)["id"] == f"evt:{stream[:48]}-{digest}:00000001"
    exactly_80 = "s" * 80
    assert _event(stream_id=exactly_80)["id"] == f"evt:{exactly_80}:00000001"


# OpenCode ------------------------------------------------------------------------------------


def test_opencode_properties_backfill_session_agent_and_directory_from_scope() -> None:
    event = _event(payload={"part": {"sessionID": "s1", "agentID": "a1", "cwd": "/w"}, "x": 1})
    projected = opencode_payload_from_runtime_event(event)
    assert list(projected) == ["id", "order", "time", "type", "properties"]
    assert projected["order"] == event["sequence"]
    assert projected["properties"] == {
        "part": {"sessionID": "s1", "agentID": "a1", "cwd": "/w"},
        "x": 1,
        "sessionID": "s1",
        "agentID": "a1",
        "directory": "/w",
    }


def test_an_opencode_projection_id_uses_a_dash_without_a_top_level_session() -> None:
    event = runtime_event_from_opencode(
        {"type": "message.part.updated", "properties": {"part": {"id": "p1", "sessionID": "s1"}}},
        now_ms=1,
    )
    assert event is not None
    assert event["projections"]["opencode"] == {
        "id": "message.part.updated:-:p1",
        "type": "message.part.updated",
    }


def test_without_a_source_id_the_projection_id_ends_in_the_sequence() -> None:
    event = runtime_event_from_opencode(
        {"type": "session.idle", "properties": {"sessionID": "s1"}}, now_ms=1, sequence=12
    )
    assert event is not None
    assert event["projections"]["opencode"]["id"] == "session.idle:s1:12"


def test_wrap_attaches_the_envelope_and_projects_its_redacted_properties() -> None:
    properties = {"id": "q1", "sessionID": "s1", "api_key": "k-1"}
    wrapped = wrap_opencode_event("question.asked", properties, now_ms=5)
    event = wrapped["runtime_event"]
    assert list(wrapped) == ["type", "properties", "runtime_event", "id", "time", "order"]
    assert (wrapped["id"], wrapped["time"], wrapped["order"]) == (event["id"], 5, event["sequence"])
    assert wrapped["properties"] == opencode_payload_from_runtime_event(event)["properties"]
    assert wrapped["properties"]["api_key"] == "[redacted]"
    assert properties["api_key"] == "k-1"


def test_an_opencode_payload_without_a_type_gives_none_and_wraps_without_an_envelope() -> None:
    assert runtime_event_from_opencode({"properties": {"sessionID": "s1"}}) is None
    assert runtime_event_from_opencode({"type": "", "properties": {}}) is None
    assert wrap_opencode_event("", {"sessionID": "s1"}) == {
        "type": "",
        "properties": {"sessionID": "s1"},
    }


# normalize -----------------------------------------------------------------------------------


def test_normalize_keeps_a_given_privacy_block_when_nothing_needed_redaction() -> None:
    odd_privacy = {"classification": "sensitive", "redacted": True, "redacted_fields": ["gone"]}
    event = {**_event(payload={"sessionID": "s"}), "privacy": odd_privacy}
    normalized = normalize_runtime_event(event)
    assert normalized is not None
    assert normalized["privacy"] == odd_privacy


def test_normalize_redacts_and_recomputes_privacy_when_something_leaked() -> None:
    event = {**_event(payload={"sessionID": "s"}), "payload": {"sessionID": "s", "password": "p"}}
    normalized = normalize_runtime_event(event)
    assert normalized is not None
    assert normalized["payload"]["password"] == "[redacted]"
    assert normalized["privacy"]["redacted_fields"] == ["password"]
    assert list(normalized) == KEY_ORDER
    assert normalized["id"] == event["id"]


def test_normalize_keeps_extra_keys_in_place_but_redacted() -> None:
    event = {"id": "evt:x:1", "note": "kept", "type": "x.y", "payload": {}, "api_key": "k-1"}
    normalized = normalize_runtime_event(event, now_ms=1)
    assert normalized is not None
    assert list(normalized)[:4] == ["id", "note", "type", "payload"]
    assert (normalized["note"], normalized["api_key"]) == ("kept", "[redacted]")
    assert normalized["privacy"]["redacted_fields"] == ["@api_key"]


def test_a_non_string_directory_does_not_stop_the_search_but_a_blank_string_does() -> None:
    assert (
        extract_runtime_scope({"directory": {"x": 1}, "info": {"cwd": "/w"}})["directory"] == "/w"
    )
    assert "directory" not in extract_runtime_scope({"directory": " ", "info": {"cwd": "/w"}})


def test_normalize_keeps_an_empty_string_stream_id_as_penguin_does() -> None:
    event = {"id": "e1", "type": "x.y", "payload": {"sessionID": "s"}, "stream_id": ""}
    normalized = normalize_runtime_event(event, now_ms=1)
    assert normalized is not None
    assert normalized["stream_id"] == ""


def test_building_envelopes_does_not_load_the_ledgers_database_layer() -> None:
    code = "import pentrace.compat.penguin as c; c.wrap_opencode_event('x.y', {}, now_ms=1)"
    assert loaded_by(code, "sqlalchemy") == []


@pytest.mark.parametrize(
    ("properties", "filled"),
    [
        ({"sessionID": "s1", "directory": "/srv/app"}, {}),
        # The projection lifts the nested session id to the top; as overlay it is filled in.
        (
            {"part": {"sessionID": "s2", "type": "text", "id": "p1"}, "directory": "/srv/app"},
            {"sessionID": "s2"},
        ),
        ({"sessionID": "s3"}, {}),
        ({}, {}),
    ],
)
def test_an_envelope_penguin_published_comes_back_as_penguin_returns_it(
    properties: dict[str, Any], filled: dict[str, Any]
) -> None:
    published = wrap_opencode_event("message.updated", properties, now_ms=5)
    envelope = copy.deepcopy(published["runtime_event"])
    # The envelope alone comes back unchanged.
    alone = {"type": "", "properties": {}, "runtime_event": envelope}
    assert runtime_event_from_opencode(alone) == envelope
    # With the properties it was published with: only what they add to its payload.
    expected = {**envelope, "payload": {**envelope["payload"], **filled}}
    assert runtime_event_from_opencode(published) == expected


def test_an_attached_scope_without_its_workspace_is_completed_as_penguin_completes_it() -> None:
    # Penguin derives the scope from the payload and lays the envelope's own scope over it,
    # so a directory in the payload brings its workspace back (recorded_calls.json holds
    # Penguin's own result for this envelope).
    event = build_runtime_event(
        event_type="message.updated",
        payload={"sessionID": "s1", "directory": "/srv/app"},
        time_ms=5,
        sequence=1,
    )
    event["scope"] = {"session_id": "s1", "conversation_id": "s1", "directory": "/srv/app"}
    for properties in ({}, {"sessionID": "s1", "directory": "/srv/app"}):
        data = {"type": "message.updated", "properties": properties, "runtime_event": event}
        result = runtime_event_from_opencode(data)
        assert result == {**event, "scope": {**event["scope"], "workspace": "/srv/app"}}
