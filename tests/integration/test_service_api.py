"""The read-only session API and the OpenAPI document, against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import msgspec
import pytest

from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.service.app import create_app
from pentrace.service.openapi import openapi_document
from pentrace.service.settings import ServiceSettings
from pentrace.testing.files import write_shards
from pentrace.testing.render import envelope_line
from tests.integration.sse_harness import (
    AGENT,
    PROJECT,
    Server,
    SseClient,
    event_ids,
    session_id,
    write_session,
)

SECRET = "Bearer sk-proj-Abc123def456ghi789jkl012mno345"
LEAKY = "session-2026-11-29-09-00-00-5ec2e700"
TOKEN = "tok-Vb7nQ2wE9rT4yU6iO1pA3sD5"


def _leaky_session(root: Path) -> None:
    """A session whose user text and tool arguments hold credentials."""
    stamp = "2026-11-29T09:00:00.000Z"
    meta = {
        "session_id": LEAKY,
        "provider": "anthropic",
        "model_id": "claude-x",
        "model_context_window": 200000,
        "system_prompt": "hi",
        "agent_state": "/tmp/state",
        "workspace": "/srv/leaky",
    }
    text = {"type": "text", "role": "user", "text": f"use Authorization: {SECRET} please"}
    call = {
        "type": "tool_call",
        "tool_call_id": "c1",
        "name": "http",
        "arguments": {"api_key": "k"},
    }
    shard_one = [
        envelope_line(stamp, "session_meta", meta),
        envelope_line(stamp, "model_msg", text),
    ]
    shard_two = [
        envelope_line(stamp, "session_meta", meta),
        envelope_line(stamp, "model_msg", call),
    ]
    write_shards(root, PROJECT, "auditor", LEAKY, [shard_one, shard_two])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("api-root")
    write_session(root, session_id(0xA1), 3)
    write_session(root, session_id(0xA2), 1, agent="reviewer")
    write_session(root, session_id(0xB3), 2)
    _leaky_session(root)
    running = Server(root).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def guarded(server: Server) -> Iterator[Server]:
    """A second server on the same root that requires the bearer token."""
    token_file = server.root / "token"
    token_file.write_text(TOKEN)
    running = Server(server.root, args=["--token-file", str(token_file)]).start(token=TOKEN)
    yield running
    running.stop()


def get(server: Server, path: str, **params: str) -> httpx.Response:
    return httpx.get(server.url + path, params=params, timeout=10)


def get_with_token(server: Server, path: str, **params: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.get(server.url + path, params=params, headers=headers, timeout=10)


def test_the_list_has_one_row_per_session_with_its_counters(server: Server) -> None:
    body = get(server, "/api/v1/sessions", sort="id").json()
    assert body["total"] == 4
    by_id = {row["id"]: row for row in body["sessions"]}
    row = by_id[session_id(0xA1)]
    assert row["project"] == PROJECT
    assert row["agent"] == AGENT
    assert row["model"] == "gpt-5"
    assert row["turns"] == 3
    assert row["last_status"] == "completed"
    assert row["start"] == "2026-11-29T10:00:00.000Z"
    assert by_id[LEAKY]["last_status"] == "none"


def test_the_list_filters_sorts_and_limits(server: Server) -> None:
    reviewer = get(server, "/api/v1/sessions", agent="reviewer").json()
    assert [row["id"] for row in reviewer["sessions"]] == [session_id(0xA2)]
    by_turns = get(server, "/api/v1/sessions", sort="turns", reverse="true", limit="2").json()
    assert by_turns["total"] == 4
    assert [row["turns"] for row in by_turns["sessions"]] == [3, 2]
    claude = get(server, "/api/v1/sessions", model="anthropic/claude-x").json()
    assert [row["id"] for row in claude["sessions"]] == [LEAKY]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sort": "size"}, "expected one of start, tokens, turns, id"),
        ({"has_errors": "maybe"}, "expected true or false"),
        ({"limit": "0"}, "expected an integer from 1 to 1000000"),
        ({"since": "last tuesday"}, "expected a date"),
        ({"status": "exploded"}, "expected a status among"),
    ],
)
def test_bad_list_parameters_are_a_400_with_a_hint(
    server: Server, params: dict[str, str], message: str
) -> None:
    response = get(server, "/api/v1/sessions", **params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error["message"]
    assert error["hint"]


def test_a_session_is_found_by_its_short_token_and_shows_its_summary(server: Server) -> None:
    body = get(server, "/api/v1/sessions/000000a1").json()
    assert body["id"] == session_id(0xA1)
    assert body["summary"]["records"] == 14
    assert body["summary"]["requests"]["completed"] == 3
    assert body["torn_tails"] == 0


def test_an_unknown_session_is_a_404_and_an_ambiguous_prefix_a_400(server: Server) -> None:
    missing = get(server, "/api/v1/sessions/ffffffff")
    assert missing.status_code == 404
    assert "pentrace list" in missing.json()["error"]["hint"]  # was `sessions list` (ADR 0092)
    ambiguous = get(server, "/api/v1/sessions/000000a")
    assert ambiguous.status_code == 400
    assert "matches 2 sessions" in ambiguous.json()["error"]["message"]


def test_the_verbatim_trace_goes_to_a_token_holder_latest_shard_by_default(
    guarded: Server,
) -> None:
    # Before ADR 0012 any loopback client got these bytes by default, without a token.
    shards = DataRoot(guarded.root).find_shards(PROJECT, "auditor", LEAKY)
    path = f"/api/v1/sessions/{LEAKY}/trace"
    latest = get_with_token(guarded, path, redacted="false")
    assert latest.headers["content-type"] == "application/x-ndjson"
    assert latest.headers["x-pentrace-redacted"] == "false"
    assert latest.content == shards[-1].path.read_bytes()
    every = get_with_token(guarded, path, shard="all", redacted="false")
    assert every.content == b"".join(shard.path.read_bytes() for shard in shards)
    assert get_with_token(guarded, path, shard="1", redacted="false").content == (
        shards[0].path.read_bytes()
    )
    assert get_with_token(guarded, path, shard="7").status_code == 404
    assert get_with_token(guarded, path, shard="x").status_code == 400


def test_the_trace_is_redacted_by_default_even_for_a_token_holder(guarded: Server) -> None:
    response = get_with_token(guarded, f"/api/v1/sessions/{LEAKY}/trace", shard="all")
    assert response.status_code == 200
    assert response.headers["x-pentrace-redacted"] == "true"
    assert "sk-proj-Abc123" not in response.text


def test_without_a_token_the_verbatim_trace_is_refused_with_a_403_and_a_hint(
    server: Server,
) -> None:
    refused = get(server, f"/api/v1/sessions/{LEAKY}/trace", shard="all", redacted="false")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert "expected a request with the bearer token" in error["message"]
    assert "PENTRACE_API_TOKEN" in error["hint"]
    assert "sk-proj-Abc123" not in refused.text
    default = get(server, f"/api/v1/sessions/{LEAKY}/trace", shard="all")
    assert default.status_code == 200
    assert default.headers["x-pentrace-redacted"] == "true"
    assert "sk-proj-Abc123" not in default.text


def test_the_redacted_trace_hides_credentials_and_stays_jsonl(
    server: Server, guarded: Server
) -> None:
    path = f"/api/v1/sessions/{LEAKY}/trace"
    verbatim = get_with_token(guarded, path, shard="all", redacted="false").text
    assert "sk-proj-Abc123" in verbatim
    redacted = get(server, path, shard="all", redacted="true")
    assert redacted.headers["x-pentrace-redacted"] == "true"
    lines = [msgspec.json.decode(line) for line in redacted.content.splitlines()]
    assert len(lines) == 4
    assert "sk-proj-Abc123" not in redacted.text
    assert lines[3]["payload"]["arguments"]["api_key"] == "[redacted]"
    assert lines[0] == msgspec.json.decode(verbatim.splitlines()[0])


def test_the_archive_is_refused_to_a_server_without_a_token(server: Server) -> None:
    answer = get(server, f"/api/v1/sessions/{LEAKY}/archive")
    assert answer.status_code == 403
    error = answer.json()["error"]
    assert "the archive (every shard verbatim) holds unredacted credentials" in error["message"]
    assert "PENTRACE_API_TOKEN" in error["hint"]


def test_the_session_documents_match_the_published_schema(server: Server) -> None:
    schemas = get(server, "/openapi.json").json()["components"]["schemas"]
    resolver = {"components": {"schemas": schemas}}
    listing = get(server, "/api/v1/sessions").json()
    jsonschema.validate(listing, {**schemas["SessionList"], **resolver})
    detail = get(server, f"/api/v1/sessions/{session_id(0xA1)}").json()
    jsonschema.validate(detail, {**schemas["SessionDetail"], **resolver})
    assert set(detail) == set(schemas["SessionDetail"]["properties"])


def test_unknown_routes_and_writes_get_json_errors(server: Server) -> None:
    missing = get(server, "/api/v2/nothing")
    assert missing.status_code == 404
    assert "/openapi.json" in missing.json()["error"]["hint"]
    post = httpx.post(server.url + "/api/v1/sessions", timeout=10)
    assert post.status_code == 405
    assert "read-only" in post.json()["error"]["message"]


def test_the_openapi_document_lists_every_route_and_validates_real_frames(server: Server) -> None:
    document = get(server, "/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    app = create_app(ServiceSettings(data_root=server.root))
    for route in app.routes:
        assert getattr(route, "path", None) in document["paths"]
    schemas = document["components"]["schemas"]
    client = SseClient(
        server.url + "/api/v1/events/sse",
        {"session_id": session_id(0xA1), "last_event_id": event_ids(session_id(0xA1), 1, 1)[0]},
    )
    try:
        connected = client.next()
        event = client.events(1)[0]
    finally:
        client.close()
    resolver = {"components": {"schemas": schemas}}
    for frame, name in ((connected, "ConnectedFrame"), (event, "OpenCodeEvent")):
        jsonschema.validate(frame.data, {**schemas[name], **resolver})
    assert openapi_document() == document
