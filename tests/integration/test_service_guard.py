"""Host, Origin and CORS checks and the security headers, against real ``pentrace serve``
processes, with hostile headers sent by httpx and by a raw socket."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from pentrace.service.app import create_app
from pentrace.service.settings import ServiceSettings
from tests.integration.sse_harness import (
    REPO,
    Server,
    child_env,
    free_port,
    session_id,
    write_session,
)
from tests.support import run_pentrace, served_in_thread

SID = session_id(0xC1)
TRACE = f"/api/v1/sessions/{SID}/trace"
TOKEN = "tok-Hx4mL8pQ2sW6vZ1cN5bR9tY3"
ANY_HOST = "0.0.0.0"  # noqa: S104  # the wildcard bind is the case under test
APP = "https://viewer.example:8443"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("guard-root")
    write_session(root, SID, 1)
    running = Server(root, args=["--allowed-host", "pentrace.lan", "--test-page"]).start()
    yield running
    running.stop()


def get(server: Server, path: str, **headers: str) -> httpx.Response:
    return httpx.get(server.url + path, headers=headers, timeout=10)


def raw_request(server: Server, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (no client fills in a Host) and read the whole answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    return int(answer.split(b" ", 2)[1]), answer


@pytest.mark.parametrize(
    "host",
    ["attacker.example", "attacker.example:8765", "localhost.attacker.example", "10.1.2.3"],
)
def test_a_foreign_host_gets_a_421_naming_it_and_how_to_allow_it(server: Server, host: str) -> None:
    # Before the fix: 200 and the verbatim trace (DNS rebinding).
    for path in ("/api/v1/sessions", TRACE, "/openapi.json", "/api/v1/events/sse", "/nowhere"):
        response = get(server, path, Host=host)
        assert response.status_code == 421, (path, response.text)
        error = response.json()["error"]
        name = host.split(":")[0]
        assert f"does not answer for Host {name!r}" in error["message"]
        assert f"--allowed-host {name} (or set PENTRACE_ALLOWED_HOSTS={name})" in error["hint"]
        assert "session_meta" not in response.text


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8765", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:8765"]
)
def test_loopback_names_with_or_without_a_port_are_answered(server: Server, host: str) -> None:
    assert get(server, "/api/v1/sessions", Host=host).status_code == 200


def test_a_name_the_operator_allowed_is_answered(server: Server) -> None:
    assert get(server, "/api/v1/sessions", Host="pentrace.lan:8765").status_code == 200
    assert get(server, "/api/v1/sessions", Host="PENTRACE.LAN").status_code == 200


def test_a_missing_or_garbled_host_is_a_400(server: Server) -> None:
    status, answer = raw_request(server, b"GET /api/v1/sessions HTTP/1.0\r\n\r\n")
    assert status == 400
    assert b"the request has no Host header" in answer
    status, answer = raw_request(
        server, b"GET /api/v1/sessions HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n"
    )
    assert status == 400
    assert b"is not a host name or address" in answer
    assert b"session-2026" not in answer
    status, answer = raw_request(
        server,
        b"GET /api/v1/sessions HTTP/1.1\r\nHost: localhost\r\nHost: attacker.example\r\n"
        b"Connection: close\r\n\r\n",
    )
    assert status == 400  # h11 refuses two Hosts itself; the guard would too
    assert b"session-2026" not in answer


def test_the_raw_socket_with_a_rebinding_host_gets_no_trace(server: Server) -> None:
    request = (
        f"GET {TRACE}?shard=all HTTP/1.1\r\nHost: attacker.example:{server.port}\r\n"
        "Origin: http://attacker.example\r\nConnection: close\r\n\r\n"
    ).encode()
    status, answer = raw_request(server, request)
    assert status == 421
    assert b"session_meta" not in answer


@pytest.mark.parametrize(
    "origin", ["http://attacker.example", "null", "http://localhost:1", "http://127.0.0.1"]
)
def test_a_foreign_origin_is_refused_with_a_403(server: Server, origin: str) -> None:
    for path in ("/api/v1/sessions", TRACE, "/api/v1/events/sse"):
        response = get(server, path, Origin=origin)
        assert response.status_code == 403, (path, origin)
        error = response.json()["error"]
        assert "not an allowed origin" in error["message"]
        assert "--allowed-origin" in error["hint"]
        assert "access-control-allow-origin" not in response.headers


def test_same_origin_and_no_origin_pass(server: Server) -> None:
    assert get(server, "/api/v1/sessions").status_code == 200
    own = f"http://127.0.0.1:{server.port}"
    same = get(server, "/api/v1/sessions", Origin=own)
    assert same.status_code == 200
    assert "access-control-allow-origin" not in same.headers  # no CORS unless configured
    named = get(server, "/api/v1/sessions", Host="pentrace.lan", Origin="http://pentrace.lan")
    assert named.status_code == 200


def test_a_cross_site_load_without_origin_is_refused_but_a_navigation_passes(
    server: Server,
) -> None:
    # <script src> from another site: no Origin on a no-cors GET, but Sec-Fetch-Site says so.
    script = get(server, "/api/v1/sessions", **{"Sec-Fetch-Site": "cross-site"})
    assert script.status_code == 403
    assert "cross-site request" in script.json()["error"]["message"]
    link = get(
        server,
        "/api/v1/sessions",
        **{
            "Sec-Fetch-Site": "cross-site",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Dest": "document",
        },
    )
    assert link.status_code == 200
    assert get(server, "/api/v1/sessions", **{"Sec-Fetch-Site": "same-origin"}).status_code == 200


def test_preflight_from_a_foreign_origin_is_refused(server: Server) -> None:
    response = httpx.request(
        "OPTIONS",
        server.url + "/api/v1/sessions",
        headers={"Origin": APP, "Access-Control-Request-Method": "GET"},
        timeout=10,
    )
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers


@pytest.fixture(scope="module")
def cors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("cors-root")
    token_file = root / "token"
    token_file.write_text(TOKEN)
    args = ["--host", ANY_HOST, "--token-file", str(token_file), "--allowed-origin", APP]
    running = Server(root, args=args).start(token=TOKEN)
    yield running
    running.stop()


def test_an_allowed_origin_gets_cors_headers_and_a_preflight_before_the_token(
    cors: Server,
) -> None:
    preflight = httpx.request(
        "OPTIONS",
        cors.url + "/api/v1/sessions",
        headers={
            "Origin": APP,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization",
        },
        timeout=10,
    )
    assert preflight.status_code == 204  # answered although it carries no token
    assert preflight.headers["access-control-allow-origin"] == APP
    assert "Authorization" in preflight.headers["access-control-allow-headers"]
    assert preflight.headers["access-control-allow-methods"] == "GET, HEAD"
    headers = {"Origin": APP, "Authorization": f"Bearer {TOKEN}"}
    read = httpx.get(cors.url + "/api/v1/sessions", headers=headers, timeout=10)
    assert read.status_code == 200
    assert read.headers["access-control-allow-origin"] == APP
    assert "Origin" in read.headers["vary"]
    no_token = httpx.get(cors.url + "/api/v1/sessions", headers={"Origin": APP}, timeout=10)
    assert no_token.status_code == 401
    other = httpx.get(
        cors.url + "/api/v1/sessions",
        headers={"Origin": "https://other.example", "Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    assert other.status_code == 403


def test_bound_to_every_interface_ip_literals_pass_and_unlisted_names_do_not(
    cors: Server,
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for host in ("192.0.2.7:8765", "[2001:db8::1]", "localhost"):
        response = httpx.get(
            cors.url + "/api/v1/sessions", headers={**headers, "Host": host}, timeout=10
        )
        assert response.status_code == 200, host
    named = httpx.get(
        cors.url + "/api/v1/sessions", headers={**headers, "Host": "box.example"}, timeout=10
    )
    assert named.status_code == 421  # even with the token: the name must be allowed


SECURITY = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/api/v1/sessions", {}),
        (TRACE, {}),
        (f"/api/v1/sessions/{SID}", {}),
        ("/api/v1/sessions?limit=x", {}),
        ("/nowhere", {}),
        ("/openapi.json", {}),
        ("/api/v1/stats/tokens", {}),
        ("/api/v1/sessions", {"Host": "attacker.example"}),
        ("/api/v1/sessions", {"Origin": "http://attacker.example"}),
        ("/_test/sse.js", {}),
    ],
)
def test_every_response_carries_the_security_headers(
    server: Server, path: str, headers: dict[str, str]
) -> None:
    response = get(server, path, **headers)
    for name, value in SECURITY.items():
        assert response.headers[name] == value, (path, name)
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["cross-origin-resource-policy"] == "same-origin"
    assert "server" not in response.headers


def test_the_event_stream_carries_them_too(server: Server) -> None:
    with httpx.stream("GET", server.url + "/api/v1/events/sse", timeout=10) as response:
        assert response.status_code == 200
        for name, value in SECURITY.items():
            assert response.headers[name] == value, name


def test_html_gets_a_policy_without_inline_script_and_the_page_has_none(server: Server) -> None:
    page = get(server, "/_test/sse.html")
    policy = page.headers["content-security-policy"]
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    body = page.text
    assert '<script src="/_test/sse.js"></script>' in body
    assert body.count("<script") == 1  # the only script is the served asset
    script = get(server, "/_test/sse.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert "new EventSource" in script.text


def test_a_route_added_later_is_guarded_and_a_crash_is_a_bare_json_500(tmp_path: Path) -> None:
    settings = ServiceSettings(data_root=tmp_path, port=free_port())
    app = create_app(settings)

    async def page(request: Request) -> Response:
        return HTMLResponse("<p>viewer</p>")

    async def crash(request: Request) -> Response:
        raise RuntimeError(f"boom in {tmp_path}/secret.db")

    # What the web viewer will do: mount more routes on the same app.
    app.router.routes.extend([Route("/viewer", page), Route("/crash", crash)])
    with served_in_thread(app, settings.port, log_level="critical") as base:
        viewer = httpx.get(base + "/viewer", timeout=10)
        rebound = httpx.get(base + "/viewer", headers={"Host": "attacker.example"}, timeout=10)
        foreign = httpx.get(base + "/viewer", headers={"Origin": "http://a.example"}, timeout=10)
        crashed = httpx.get(base + "/crash", timeout=10)
    assert viewer.status_code == 200
    assert "script-src 'self'" in viewer.headers["content-security-policy"]
    assert viewer.headers["x-frame-options"] == "DENY"
    assert rebound.status_code == 421
    assert foreign.status_code == 403
    assert crashed.status_code == 500
    assert crashed.json()["error"]["message"] == "internal error while answering GET /crash"
    assert "boom" not in crashed.text
    assert str(tmp_path) not in crashed.text
    for name, value in SECURITY.items():
        assert crashed.headers[name] == value, name


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--allowed-host", "box.lan:8765"], "expected a host name or address without a port"),
        (["--allowed-origin", "*"], "expected scheme://host[:port]"),
    ],
)
def test_a_malformed_allowed_value_is_a_clear_error_at_start(
    tmp_path: Path, option: list[str], message: str
) -> None:
    result = run_pentrace(tmp_path, "serve", *option, env=child_env(tmp_path), timeout=60, cwd=REPO)
    assert result.returncode == 2
    stderr = result.stderr
    assert message in stderr
    assert "hint: for example" in stderr
    assert "Traceback" not in stderr
