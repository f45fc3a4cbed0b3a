"""Bad request values get a 400 naming the parameter, never a 500, and no error body
names a host path, on a real server: one test per class of bad value, then a walk of
every route of the OpenAPI document with bad inputs."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.sse_harness import (
    AGENT,
    PROJECT,
    Server,
    SseClient,
    session_id,
    write_session,
)

SID = session_id(0xD1)
BROKEN = session_id(0xD2)
SESSIONS = "/api/v1/sessions"
TRACE = f"/api/v1/sessions/{SID}/trace"
HUGE = "9" * 5000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("inputs-root")
    write_session(root, SID, 1)
    write_session(root, BROKEN, 1)
    # Two shards with one index: reading the session fails with a message naming both files.
    shard = DataRoot(root).find_shards(PROJECT, AGENT, BROKEN)[0].path
    twin = shard.parent.parent / "2026-11-30" / shard.name
    twin.parent.mkdir()
    shutil.copy(shard, twin)
    running = Server(root).start()
    yield running
    running.stop()


def get(server: Server, path: str, params: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(server.url + path, params=params, timeout=10)


def assert_400_naming(response: httpx.Response, name: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert name in error["message"]
    assert error["hint"]


@pytest.mark.parametrize("value", ["²", "٣", "-1", "0", HUGE, "1e3", "0x10", "abc", " 1"])
def test_a_bad_integer_is_a_400_naming_the_parameter(server: Server, value: str) -> None:
    # Before the fix, '²' and 5000 digits were a 500 with a traceback in the server log.
    assert_400_naming(get(server, SESSIONS, {"limit": value}), "query parameter limit")
    assert_400_naming(get(server, TRACE, {"shard": value}), "query parameter shard")
    assert "Traceback" not in server.output()


@pytest.mark.parametrize("value", ["maybe", "²", "2"])
def test_a_bad_flag_is_a_400_naming_the_parameter(server: Server, value: str) -> None:
    assert_400_naming(get(server, SESSIONS, {"has_errors": value}), "query parameter has_errors")
    assert_400_naming(get(server, TRACE, {"redacted": value}), "query parameter redacted")
    assert_400_naming(
        get(server, "/api/v1/stats/tokens", {"catch_up": value}), "query parameter catch_up"
    )


@pytest.mark.parametrize("value", ["99999999999d", "²d", HUGE + "d", "last tuesday", "2026-13-45"])
def test_a_bad_time_bound_is_a_400_naming_the_parameter(server: Server, value: str) -> None:
    assert_400_naming(get(server, SESSIONS, {"since": value}), "query parameter since")
    assert_400_naming(get(server, SESSIONS, {"until": value}), "query parameter until")
    assert "Traceback" not in server.output()


@pytest.mark.parametrize("value", ["9999-99-99", "2026-02-30", "²⁰²⁶-01-01", "yesterday"])
def test_a_bad_day_is_a_400_naming_the_parameter(server: Server, value: str) -> None:
    assert_400_naming(
        get(server, "/api/v1/stats/tokens", {"since": value}), "query parameter since"
    )


@pytest.mark.parametrize(("path", "name"), [(SESSIONS, "sort"), ("/api/v1/stats/cost", "by")])
def test_a_value_outside_the_choices_is_a_400_naming_the_parameter(
    server: Server, path: str, name: str
) -> None:
    assert_400_naming(get(server, path, {name: "nonsense"}), f"query parameter {name}")


@pytest.mark.parametrize("value", ["\x00", "a\nb", "x" * 201])
def test_text_with_control_characters_or_too_long_is_a_400(server: Server, value: str) -> None:
    for name in ("project", "agent", "model", "status"):
        assert_400_naming(get(server, SESSIONS, {name: value}), f"query parameter {name}")
    assert_400_naming(
        get(server, "/api/v1/events/sse", {"session_id": value}), "query parameter session_id"
    )
    assert_400_naming(get(server, SESSIONS + "/" + quote(value, safe="")), "path value session_id")


def test_a_parameter_given_twice_is_a_400(server: Server) -> None:
    response = httpx.get(server.url + SESSIONS + "?limit=1&limit=2", timeout=10)
    assert_400_naming(response, "query parameter limit: expected one value, found 2")


def raw_get(server: Server, path: str, header: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header + b"\r\n"
            b"Connection: close\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if answer.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in answer:
                break  # an accepted stream never ends: its head is enough
    return answer


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"Last-Event-ID: \xb2\xff", b"expected UTF-8 text"),
        (b"Last-Event-ID: " + b"a" * 2000, b"expected at most 1024 characters"),
        (b"Last-Event-ID: a\x7fb", b"expected text without control characters"),
        (b"Last-Event-ID: a\r\nLast-Event-ID: b", b"expected one value, found 2"),
    ],
)
def test_last_event_id_garbage_is_a_400_naming_the_header(
    server: Server, header: bytes, message: bytes
) -> None:
    answer = raw_get(server, "/api/v1/events/sse", header)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"header Last-Event-ID" in answer
    assert message in answer


def test_a_well_formed_unknown_cursor_is_the_documented_replay_gap(server: Server) -> None:
    client = SseClient(
        server.url + "/api/v1/events/sse", headers={"Last-Event-ID": "evt:session:nope:00000001"}
    )
    try:
        assert client.next().type == "server.connected"
        gap = client.next()
    finally:
        client.close()
    assert client.status == 200
    assert gap.type == "server.replay_gap"
    assert gap.data["properties"]["reason"] == "last_event_id_not_available"
    assert gap.data["properties"]["detail"] == "unknown_event_id"


def test_error_bodies_and_read_problems_name_files_relative_to_the_data_root(
    server: Server,
) -> None:
    root = str(server.root)
    missing = get(server, SESSIONS + "/ffffffff")
    assert missing.status_code == 404
    # Before the fix: "... starts with 'ffffffff' under /tmp/pytest-.../inputs-root0 ...".
    assert root not in missing.text
    assert "under <data root>" in missing.json()["error"]["message"]
    detail = get(server, SESSIONS + "/" + BROKEN).json()
    assert detail["problem"] is not None
    assert root not in detail["problem"]
    assert f"{PROJECT}/agents/{AGENT}/" in detail["problem"]


BAD_VALUES = ["²", "-1", HUGE, "\x00", "x" * 5000, "9999-99-99", "nonsense"]


def _paths(document: dict[str, object]) -> Iterator[tuple[str, dict[str, str]]]:
    """Every route of the document with each bad value in each parameter, one at a time."""
    paths = document["paths"]
    assert isinstance(paths, dict)
    for template, item in paths.items():
        if "get" not in item:
            continue  # the viewer's POST-only routes (import, logout): test_web_pages.py
        parameters = item["get"].get("parameters", [])
        path_values = {p["name"]: SID for p in parameters if p["in"] == "path"}
        if "kind" in path_values:
            path_values["kind"] = "tokens"
        base = template.format(**path_values)
        yield base, {}
        for parameter in parameters:
            for bad in BAD_VALUES:
                if parameter["in"] == "query":
                    yield base, {parameter["name"]: bad}
                elif parameter["in"] == "path":
                    encoded = quote(bad, safe="")
                    yield template.format(**{**path_values, parameter["name"]: encoded}), {}
        for unknown in ("ffffffff", "session-2026-11-29-10-00-00-000000d"):
            if "session_id" in path_values:
                yield template.format(**{**path_values, "session_id": unknown}), {}


def test_no_route_answers_bad_input_with_a_500_or_a_host_path(server: Server) -> None:
    document = get(server, "/openapi.json").json()
    root = Path(server.root)
    seen = 0
    for path, params in _paths(document):
        with httpx.stream("GET", server.url + path, params=params, timeout=30) as response:
            if response.status_code == 200 and "event-stream" in response.headers["content-type"]:
                continue  # an accepted stream never ends; its errors are frames, checked elsewhere
            body = response.read().decode("utf-8", "replace")
        assert response.status_code < 500, (path, params, body)
        if response.status_code >= 400:  # 200 bodies are trace data: they hold recorded paths
            assert str(root) not in body, (path, params)
            assert str(root.parent) not in body, (path, params)
            seen += 1
            assert set(response.json()["error"]) == {"status", "message", "hint"}
    assert seen > 50
    assert "Traceback" not in server.output()
