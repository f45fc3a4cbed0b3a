"""Images of the Session page are revalidated, not kept for a time (ADR 0064), over a real HTTP
server: ``no-cache`` with a strong ETag that follows the bytes and the variant, 304 with no
body on a match, and an ``If-None-Match`` of any shape read without harm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from tests.image_samples import data_url, image_bytes
from tests.integration.sse_harness import Server
from tests.support import cli_ok

PROJECT, AGENT = "shots", "alpha"
TOKEN = "tok-Rev4kW8mQ2zX6cV1bN9hJ3gF5"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _one_image_session(root: DataRoot, png: bytes) -> tuple[str, Path]:
    """A session whose first record holds ``png``: its id and its shard."""
    with SessionApplication(root, PROJECT, AGENT) as app:
        handle = app.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s"
        )
        handle.record_user_input("look", images=[data_url(png, "image/png")])
        handle.save()
        return handle.session_id, root.find_shards(PROJECT, AGENT, handle.session_id)[-1].path


def _image_path(session_id: str, root: DataRoot) -> str:
    """The route of the first image in the session (found by the position the shard gives)."""
    shard = root.find_shards(PROJECT, AGENT, session_id)[-1].path
    for position, line in enumerate(shard.read_text().splitlines(), start=1):
        if "data:image/png" in line:
            return f"/web/sessions/{PROJECT}/{AGENT}/{session_id}/images/{position}/0"
    raise AssertionError("no image record")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[DataRoot, str]:
    root = DataRoot(tmp_path_factory.mktemp("revalidate") / "data")
    session_id, _ = _one_image_session(root, image_bytes("PNG"))
    return root, session_id


@pytest.fixture(scope="module")
def open_server(session: tuple[DataRoot, str]) -> Iterator[Server]:
    server = Server(session[0].path).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def guarded(session: tuple[DataRoot, str]) -> Iterator[Server]:
    server = Server(session[0].path, env={"PENTRACE_API_TOKEN": TOKEN}).start(token=TOKEN)
    yield server
    server.stop()


def _assert_not_modified(answer: httpx.Response, etag: str) -> None:
    assert answer.status_code == 304, answer.text[:200]
    assert answer.content == b""
    assert answer.headers.get("content-length", "0") == "0"
    assert answer.headers["etag"] == etag  # a 304 repeats the validator and the cache rule
    assert "no-cache" in answer.headers["cache-control"]


def test_a_session_deleted_and_imported_again_under_the_same_key_shows_its_new_picture(
    tmp_path: Path,
) -> None:
    root = DataRoot(tmp_path / "data")
    first, second = image_bytes("PNG", 40, 30), image_bytes("PNG", 64, 48)
    session_id, shard = _one_image_session(root, first)
    server = Server(root.path).start()
    try:
        url = server.url + _image_path(session_id, root)
        before = httpx.get(url)
        assert (before.status_code, before.content) == (200, first)
        assert before.headers["cache-control"] == "no-cache"  # asked again, never kept a day
        _assert_not_modified(httpx.get(url, headers={"If-None-Match": before.headers["etag"]}),
                             before.headers["etag"])  # fmt: skip

        again = tmp_path / "again.jsonl"
        again.write_text(shard.read_text().replace(data_url(first, "image/png"),
                                                   data_url(second, "image/png")))  # fmt: skip
        cli_ok(root.path, "delete", f"{PROJECT}/{AGENT}/{session_id}", "--yes")
        assert httpx.get(url).status_code == 404
        cli_ok(root.path, "import", str(again), "--project", PROJECT, "--agent", AGENT)
        assert server.url + _image_path(session_id, root) == url  # the same key and position

        # The browser revalidates with the old ETag: the server answers the new bytes.
        after = httpx.get(url, headers={"If-None-Match": before.headers["etag"]})
        assert (after.status_code, after.content) == (200, second)
        assert after.headers["etag"] != before.headers["etag"]
        _assert_not_modified(httpx.get(url, headers={"If-None-Match": after.headers["etag"]}),
                             after.headers["etag"])  # fmt: skip
    finally:
        server.stop()


def test_the_raw_and_redacted_variants_have_their_own_etags_and_never_answer_for_each_other(
    session: tuple[DataRoot, str], guarded: Server
) -> None:
    url = guarded.url + _image_path(session[1], session[0])
    redacted = httpx.get(url, headers=BEARER)
    raw = httpx.get(url + "?raw=1", headers=BEARER)
    assert redacted.status_code == raw.status_code == 200
    assert redacted.content == raw.content  # the policy leaves image data as it is
    assert redacted.headers["x-pentrace-redacted"] == "true"
    assert raw.headers["x-pentrace-redacted"] == "false"
    # The token was needed for both (a token is configured): kept by this browser only.
    assert redacted.headers["cache-control"] == raw.headers["cache-control"] == "private, no-cache"
    assert redacted.headers["etag"] != raw.headers["etag"]

    for variant, answer in ((url, redacted), (url + "?raw=1", raw)):
        etag = answer.headers["etag"]
        _assert_not_modified(httpx.get(variant, headers={**BEARER, "If-None-Match": etag}), etag)
    crossed = [
        httpx.get(url, headers={**BEARER, "If-None-Match": raw.headers["etag"]}),
        httpx.get(url + "?raw=1", headers={**BEARER, "If-None-Match": redacted.headers["etag"]}),
    ]
    assert [answer.status_code for answer in crossed] == [200, 200]
    assert crossed[0].headers["x-pentrace-redacted"] == "true"
    assert crossed[1].headers["x-pentrace-redacted"] == "false"
    assert crossed[0].content == crossed[1].content == redacted.content


def test_revalidating_a_raw_image_without_the_token_is_refused_not_answered_304(
    session: tuple[DataRoot, str], open_server: Server, guarded: Server
) -> None:
    path = _image_path(session[1], session[0]) + "?raw=1"
    etag = httpx.get(guarded.url + path, headers=BEARER).headers["etag"]
    # On the tokenless server the raw image needs the token: the validator opens nothing.
    refused = httpx.get(open_server.url + path, headers={"If-None-Match": etag})
    assert refused.status_code == 403
    assert "needs the bearer token" in refused.json()["error"]["message"]
    # On the guarded one, a request without the token never reaches the route: to the login.
    sent = httpx.get(guarded.url + path, headers={"If-None-Match": etag})
    assert (sent.status_code, sent.headers["location"]) == (303, "/web/login")
    assert "etag" not in sent.headers


def _tags(count: int) -> str:
    return ", ".join(f'"{n:032x}"' for n in range(count))


@pytest.mark.parametrize(
    ("label", "value", "matches"),
    [
        ("the ETag itself", "{etag}", True),
        ("the ETag, weak", "W/{etag}", True),
        ("the ETag among others", '"0", W/"1",{etag} , "2"', True),
        ("the ETag after 500 others", _tags(500) + ", {etag}", True),
        ("* (any current answer, RFC 9110)", "*", True),
        ("500 other tags", _tags(500), False),
        ("12 KB of one tag", '"' + "a" * 12_000 + '"', False),
        ("the digest unquoted", "{bare}", False),
        ("the ETag inside other text", "x{etag}x", False),
        ("the ETag cut short", "{cut}", False),
        ("a lone quote", '"', False),
        ("commas only", ",,,, ,", False),
        ("empty", "", False),
        ("* among tags", '"0", *', False),
        ("not ASCII", '"é∂ƒ"', False),
    ],
)
def test_if_none_match_of_any_shape_answers_304_only_when_it_names_the_current_etag(
    session: tuple[DataRoot, str], open_server: Server, label: str, value: str, matches: bool
) -> None:
    url = open_server.url + _image_path(session[1], session[0])
    fresh = httpx.get(url)
    etag = fresh.headers["etag"]
    sent = value.format(etag=etag, bare=etag.strip('"'), cut=etag[:-2] + '"')
    answer = httpx.get(url, headers={b"If-None-Match": sent.encode()})
    if matches:
        _assert_not_modified(answer, etag)
    else:
        assert answer.status_code == 200, label
        assert answer.content == fresh.content
        assert answer.headers["etag"] == etag


def test_several_if_none_match_headers_are_read_together(
    session: tuple[DataRoot, str], open_server: Server
) -> None:
    url = open_server.url + _image_path(session[1], session[0])
    etag = httpx.get(url).headers["etag"]
    both = [("If-None-Match", '"nope"'), ("If-None-Match", etag)]
    _assert_not_modified(httpx.get(url, headers=both), etag)
    neither = [("If-None-Match", '"nope"'), ("If-None-Match", "garbage")]
    assert httpx.get(url, headers=neither).status_code == 200


def test_an_if_none_match_of_60_kb_is_read_and_one_past_the_parsers_limit_is_dropped(
    session: tuple[DataRoot, str], open_server: Server
) -> None:
    url = open_server.url + _image_path(session[1], session[0])
    fresh = httpx.get(url)
    etag = fresh.headers["etag"]
    many = _tags(1_700)  # about 60 KB: the HTTP parser lets it through to the route
    _assert_not_modified(httpx.get(url, headers={"If-None-Match": many + ", " + etag}), etag)
    assert httpx.get(url, headers={"If-None-Match": many}).content == fresh.content
    # About 700 KB: uvicorn's parser refuses the request (400, or it closes the connection
    # while the client is still sending); the route never sees it and the server goes on.
    try:
        status = httpx.get(url, headers={"If-None-Match": _tags(20_000) + ", " + etag}).status_code
    except httpx.TransportError:
        status = 400
    assert status == 400
    assert httpx.get(url).content == fresh.content
