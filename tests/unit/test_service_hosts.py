"""The Host and Origin rules, the allowed-name settings and the error-body path rewrite."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.errors import ConfigError
from pentrace.service.edge.errors import ErrorWriter
from pentrace.service.edge.hosts import HostPolicy, normalize_origin, split_host
from pentrace.service.settings import ServiceSettings, read_list

ANY = "0.0.0.0"  # noqa: S104  # the wildcard bind is a case under test


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        ("localhost", ("localhost", None)),
        ("LocalHost:8765", ("localhost", 8765)),
        ("localhost.", ("localhost", None)),
        ("[::1]:80", ("::1", 80)),
        ("127.0.0.1", ("127.0.0.1", None)),
        ("::1", None),  # IPv6 must be bracketed
        ("[localhost]", None),
        ("a b", None),
        ("host:0", None),
        ("host:99999", None),
        ("host:²", None),
        ("host:" + "9" * 5000, None),  # int() would raise on 5000 digits
        ("", None),
    ],
)
def test_host_values_are_split_or_refused(value: str, parts: tuple[str, int | None] | None) -> None:
    assert split_host(value) == parts


def test_origins_are_normalized_and_odd_ones_refused() -> None:
    assert normalize_origin("HTTPS://Viewer.Example:443") == "https://viewer.example"
    assert normalize_origin("http://localhost:8765/") == "http://localhost:8765"
    assert normalize_origin("http://[::1]:8765") == "http://[::1]:8765"
    for bad in ("null", "file://", "http://a/b", "http://user@a", "ftp://a", "*"):
        assert normalize_origin(bad) is None


def test_a_loopback_bind_answers_loopback_names_and_allowed_ones_only() -> None:
    policy = HostPolicy.of("127.0.0.1", ["pentrace.lan"])
    for host in ("localhost", "127.0.0.1:9", "127.8.0.1", "[::1]", "pentrace.lan:1"):
        assert policy.host_refusal(host) is None, host
    assert policy.host_refusal("attacker.example") == (
        421,
        "this server does not answer for Host 'attacker.example'",
    )
    assert policy.host_refusal("192.0.2.1") is not None  # not bound there
    assert policy.host_refusal(None) == (400, "the request has no Host header")
    assert HostPolicy.of("127.0.0.1", ["*"]).host_refusal("anything.example") is None


def test_a_wildcard_bind_answers_ip_literals_but_not_unlisted_names() -> None:
    policy = HostPolicy.of(ANY)
    assert policy.host_refusal("192.0.2.1:8765") is None
    assert policy.host_refusal("[2001:db8::1]") is None
    assert policy.host_refusal("box.example") is not None
    assert HostPolicy.of("10.0.0.5").host_refusal("10.0.0.5") is None
    assert HostPolicy.of("10.0.0.5").host_refusal("10.0.0.6") is not None


def test_origin_rules() -> None:
    policy = HostPolicy.of("127.0.0.1", origins=["https://app.example"])
    assert policy.origin_refusal(None, "localhost:8765", None, False) is None
    assert policy.origin_refusal("http://localhost:8765", "localhost:8765", None, False) is None
    assert policy.origin_refusal("http://localhost", "localhost:80", None, False) is None
    assert (
        policy.origin_refusal("https://app.example", "localhost:8765", "cross-site", False) is None
    )
    assert policy.origin_refusal("http://localhost:9", "localhost:8765", None, False) is not None
    assert policy.origin_refusal("null", "localhost:8765", None, False) is not None
    assert policy.origin_refusal(None, "localhost", "cross-site", False) is not None
    assert policy.origin_refusal(None, "localhost", "same-site", False) is not None
    assert policy.origin_refusal(None, "localhost", "cross-site", True) is None
    assert policy.cors_allowed("https://APP.example") == "https://app.example"
    assert policy.cors_allowed("http://localhost:8765") is None


def test_the_settings_refuse_malformed_allowed_hosts_and_origins(tmp_path: Path) -> None:
    ServiceSettings(data_root=tmp_path, allowed_hosts=("box.lan", "*")).check_binding()
    with pytest.raises(ConfigError, match="expected a host name or address without a port"):
        ServiceSettings(data_root=tmp_path, allowed_hosts=("box.lan:8765",)).check_binding()
    with pytest.raises(ConfigError, match=r"expected scheme://host\[:port\]"):
        ServiceSettings(data_root=tmp_path, allowed_origins=("*",)).check_binding()
    assert read_list([], "X", {"X": " a.lan, ,b.lan "}) == ("a.lan", "b.lan")
    assert read_list(["c.lan"], "X", {"X": "a.lan"}) == ("c.lan",)


def test_error_text_names_paths_relative_to_the_data_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    writer = ErrorWriter(root)
    assert writer.scrub(f"no session under {root} (any project)") == (
        "no session under <data root> (any project)"
    )
    assert writer.scrub(f"file {root}/demo/a.jsonl: line 3") == "file demo/a.jsonl: line 3"
    assert writer.scrub(f"ledger at {tmp_path}/elsewhere.db") == "ledger at <host path>"
    assert writer.scrub("no route for GET /api/v2/x, see /openapi.json") == (
        "no route for GET /api/v2/x, see /openapi.json"
    )
    body = writer.response(404, f"gone: {root}/x", hint=f"look in {root}").body
    assert str(tmp_path).encode() not in body
