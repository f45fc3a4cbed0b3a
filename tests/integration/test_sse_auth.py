"""Binding and bearer-token rules of ``pentrace serve``, against real processes."""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from pentrace.errors import ConfigError
from pentrace.service.edge.auth import token_matches
from pentrace.service.settings import ServiceSettings, is_loopback, read_token
from tests.integration.sse_harness import REPO, Server, child_env, free_port
from tests.support import run_pentrace

TOKEN = "tok-Zq8vW3mN5pL2xR7sK4jH9dF6"
# Binding every interface is the case under test; the token guards it.
ANY_HOST = "0.0.0.0"  # noqa: S104


def test_binding_off_loopback_without_a_token_is_refused_with_a_hint(tmp_path: Path) -> None:
    serve = ("serve", "--host", ANY_HOST, "--port", str(free_port()))
    result = run_pentrace(tmp_path, *serve, env=child_env(tmp_path), timeout=60, cwd=REPO)
    assert result.returncode == 2
    stderr = result.stderr
    assert "expected a bearer token for a non-loopback address" in stderr
    assert "hint: set PENTRACE_API_TOKEN" in stderr
    assert "Traceback" not in stderr


def test_the_settings_refuse_an_off_loopback_bind_without_a_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="non-loopback address"):
        ServiceSettings(data_root=tmp_path, host="10.0.0.5").check_binding()
    ServiceSettings(data_root=tmp_path, host="10.0.0.5", token=SecretStr(TOKEN)).check_binding()
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback(ANY_HOST)


def test_a_short_token_is_refused_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="at least 16 characters") as caught:
        read_token(environ={"PENTRACE_API_TOKEN": "short-secret"})
    assert "short-secret" not in str(caught.value)
    assert "short-secret" not in (caught.value.hint or "")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    read = read_token(token_file, environ={})
    assert read is not None
    assert read.get_secret_value() == TOKEN
    assert TOKEN not in repr(read)


def test_the_token_is_compared_with_hmac_compare_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(left: bytes, right: bytes) -> bool:
        calls.append((left, right))
        return real(left, right)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    expected = TOKEN.encode()
    assert token_matches(b"Bearer " + expected, expected)
    assert not token_matches(b"Bearer wrong-token-wrong-token", expected)
    assert not token_matches(b"Basic abc", expected)
    assert not token_matches(None, expected)
    assert len(calls) == 4  # every path compares, so timing does not tell them apart


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("auth-root")
    token_file = root / "token"
    token_file.write_text(TOKEN)
    server = Server(root, args=["--host", ANY_HOST, "--token-file", str(token_file)])
    server.start(token=TOKEN)
    yield server
    server.stop()


def test_off_loopback_with_a_token_every_route_needs_it(guarded: Server) -> None:
    for path in ("/api/v1/sessions", "/openapi.json", "/api/v1/events/sse"):
        missing = httpx.get(guarded.url + path, timeout=5)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        assert "found no Authorization header" in missing.json()["error"]["message"]
        wrong = httpx.get(
            guarded.url + path, headers={"Authorization": "Bearer not-the-token-at-all"}, timeout=5
        )
        assert wrong.status_code == 401
        assert "found a different one" in wrong.json()["error"]["message"]
    good = httpx.get(
        guarded.url + "/api/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
    )
    assert good.status_code == 200
    assert good.json() == {"sessions": [], "total": 0}


def test_the_token_never_appears_in_the_server_output(guarded: Server) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", guarded.url + "/api/v1/events/sse", headers=headers, timeout=5) as r:
        assert r.status_code == 200
        next(r.iter_lines())
    httpx.get(guarded.url + "/api/v1/sessions/nope", headers=headers, timeout=5)
    httpx.get(guarded.url + "/nowhere", headers={"Authorization": "Bearer " + TOKEN[::-1]})
    output = guarded.output()
    assert "GET /api/v1/sessions/nope" in output  # the access log is on and was captured
    assert TOKEN not in output
    assert TOKEN[::-1] not in output
