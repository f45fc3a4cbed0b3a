"""Images of the Session page over a real HTTP server: served same-origin, checked by their
bytes, capped, cached per session and position, and refused clearly when hostile (ADR 0056);
the raw record and the raw image answer 403 without the token."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from pentrace.cli.app import app
from pentrace.service.edge.headers import HTML_POLICY
from tests.integration.sse_harness import Server
from tests.integration.web_image_corpus import (
    AGENT,
    CAP_MIB,
    OTHER_AGENT,
    PROJECT,
    SECRET,
    ImageCorpus,
    build_image_corpus,
)

TOKEN = "tok-Img7nQ2wE9rT4yU6iO1pA3sD5"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> ImageCorpus:
    return build_image_corpus(tmp_path_factory.mktemp("webimg") / "data")


@pytest.fixture(scope="module")
def plain(corpus: ImageCorpus) -> Iterator[Server]:
    server = Server(corpus.root.path, args=["--image-max-mib", str(CAP_MIB)]).start()
    yield server
    server.stop()


def _error(answer: httpx.Response) -> str:
    assert answer.headers["content-type"] == "application/json", answer.text[:200]
    return str(answer.json()["error"]["message"])


def test_the_page_draws_same_origin_images_and_names_the_ones_it_will_not_ask_for(
    corpus: ImageCorpus, plain: Server
) -> None:
    answer = httpx.get(f"{plain.url}/web/sessions/{PROJECT}/{AGENT}/{corpus.session_id}")
    assert answer.status_code == 200
    assert answer.headers["content-security-policy"] == HTML_POLICY  # img-src 'self', no data:
    page = answer.text
    sources = set(re.findall(r'<img src="([^"]+)"', page))
    for name in ("png", "jpeg", "gif", "cut", "file", "symlink", "webp"):
        assert corpus.url(name) in sources, name
    for name in ("svg", "magic", "big", "web", "redacted"):  # refused from what the page sees
        assert corpus.url(name) not in sources, name
    assert "data:image" not in page.replace("[image", "")  # no image bytes in the page
    assert re.search(r"image too large \(0\.2 MB\): image/png, 19\d\.\d KB", page)
    assert "found an SVG document (never shown: it can carry script)" in page
    assert "found unknown bytes starting 4d 5a 90 00" in page
    assert "image not shown: its data is not base64" in page  # the redacted one
    assert SECRET not in page
    assert "external image, not loaded" in page
    assert 'href="https://example.org/cat.png"' in page
    assert "data-raw-note" in page
    assert "needs the bearer token" in page


@pytest.mark.parametrize(("name", "media_type"), [("png", "image/png"), ("jpeg", "image/jpeg"),
                                                  ("gif", "image/gif"), ("webp", "image/webp"),
                                                  ("file", "image/png")])  # fmt: skip
def test_an_image_is_served_as_its_type_with_safe_headers_and_a_cache_key(
    corpus: ImageCorpus, plain: Server, name: str, media_type: str
) -> None:
    answer = httpx.get(plain.url + corpus.url(name))
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == media_type
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cross-origin-resource-policy"] == "same-origin"
    assert re.fullmatch(
        r'inline; filename="record-\d+-image-\d+\.(png|jpg|gif|webp)"',
        answer.headers["content-disposition"],
    )
    assert answer.headers["cache-control"] == "no-cache"  # kept, but asked again (ADR 0064)
    assert answer.headers["x-pentrace-redacted"] == "true"
    if name in ("png", "file"):
        assert answer.content == corpus.png
    again = httpx.get(
        plain.url + corpus.url(name), headers={"If-None-Match": answer.headers["etag"]}
    )
    assert again.status_code == 304
    assert again.content == b""


def test_the_same_id_under_another_agent_is_another_session_with_its_own_images(
    corpus: ImageCorpus, plain: Server
) -> None:
    alpha = httpx.get(plain.url + corpus.url("png"))
    beta = httpx.get(plain.url + corpus.url("png", agent=OTHER_AGENT))
    assert (alpha.content, beta.content) == (corpus.png, corpus.other_png)
    assert alpha.headers["etag"] != beta.headers["etag"]
    # The cache key is the session and position, not the bytes alone: the same JPEG at the same
    # place under two agents has two keys.
    jpeg_a = httpx.get(plain.url + corpus.url("jpeg"))
    jpeg_b = httpx.get(plain.url + corpus.url("jpeg", agent=OTHER_AGENT))
    assert jpeg_a.content == jpeg_b.content == corpus.jpeg
    assert jpeg_a.headers["etag"] != jpeg_b.headers["etag"]
    # beta has no scratchpad: alpha's file is not reachable through beta's session.
    missing = httpx.get(plain.url + corpus.url("file", agent=OTHER_AGENT))
    assert missing.status_code == 404
    assert f"session {PROJECT}/{OTHER_AGENT}/{corpus.session_id}" in _error(missing)


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("svg", 415, "found an SVG document"),
        ("magic", 415, "expected a PNG, JPEG, GIF or WebP image, found unknown bytes"),
        ("cut", 422, "do not decode (cut short, or not base64)"),
        ("big", 413, "image too large (0.2 MB), over the cap of 0.1 MB"),
        ("redacted", 422, "the redaction policy changed this image's data"),
        ("symlink", 403, "goes through a symlink"),
        ("absolute", 403, "outside the session's scratchpad"),
        ("traversal", 403, "leaves the session's scratchpad"),
        ("web", 404, "the viewer loads nothing from other sites"),
    ],
)
def test_a_hostile_or_unservable_image_is_refused_with_a_clear_message(
    corpus: ImageCorpus, plain: Server, name: str, status: int, message: str
) -> None:
    answer = httpx.get(plain.url + corpus.url(name))
    assert answer.status_code == status, answer.text
    position, index = corpus.at[name]
    shown = _error(answer)
    assert f"session {PROJECT}/{AGENT}/{corpus.session_id}, record {position}, image {index}" in (
        shown
    )
    assert message in shown
    assert SECRET not in answer.text
    assert "/etc/" not in shown  # neither host paths nor the record's path reach the message
    assert str(corpus.root.path) not in answer.text


@pytest.mark.parametrize(
    "tail",
    ["images/0/0", "images/x/0", "images/4/-1", "images/4/9", "images/99999/0",
     "images/4/0%2F..%2F..", "images/..%2F..%2F/0"],
)  # fmt: skip
def test_bad_positions_and_indexes_are_refused(
    corpus: ImageCorpus, plain: Server, tail: str
) -> None:
    answer = httpx.get(f"{plain.url}/web/sessions/{PROJECT}/{AGENT}/{corpus.session_id}/{tail}")
    assert answer.status_code in (400, 404), answer.text
    assert answer.headers["content-type"] == "application/json"


def test_raw_images_and_raw_records_answer_403_without_the_token_and_serve_with_it(
    corpus: ImageCorpus, plain: Server
) -> None:
    base = f"/web/sessions/{PROJECT}/{AGENT}/{corpus.session_id}"
    position = corpus.at["redacted"][0]
    record = httpx.get(f"{plain.url}{base}/records/{position}")
    raw_record = httpx.get(f"{plain.url}{base}/records/{position}?raw=1")
    raw_image = httpx.get(plain.url + corpus.url("png") + "?raw=1")
    assert record.status_code == 200
    assert record.json()["redacted"] is True
    assert SECRET not in record.text
    for refused in (raw_record, raw_image):
        assert refused.status_code == 403
        assert "needs the bearer token" in _error(refused)
        assert SECRET not in refused.text
    assert "verbatim record (raw=1)" in _error(raw_record)
    # Each refusal's hint names what can be had without the token, not the export.
    hints = [refused.json()["error"]["hint"] for refused in (raw_record, raw_image)]
    assert hints[0].startswith("open the record without raw=1, redacted, or start the server")
    assert hints[1].startswith("load the image without raw=1, from the redacted record, or ")
    assert not any("export" in hint for hint in hints)

    guarded = Server(
        corpus.root.path,
        env={"PENTRACE_API_TOKEN": TOKEN},
        args=["--image-max-mib", str(CAP_MIB)],
    ).start(token=TOKEN)
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    try:
        raw_record = httpx.get(f"{guarded.url}{base}/records/{position}?raw=1", headers=bearer)
        raw_image = httpx.get(guarded.url + corpus.url("png") + "?raw=1", headers=bearer)
        raw_changed = httpx.get(guarded.url + corpus.url("redacted") + "?raw=1", headers=bearer)
        page = httpx.get(guarded.url + base, headers=bearer).text
    finally:
        guarded.stop()
    assert raw_record.status_code == 200
    assert raw_record.json()["redacted"] is False
    assert SECRET in raw_record.text  # the verbatim record, to the token holder only
    assert raw_image.status_code == 200
    assert raw_image.content == corpus.png
    assert raw_image.headers["cache-control"] == "private, no-cache"
    assert raw_image.headers["x-pentrace-redacted"] == "false"
    # As recorded, that data is not a whole PNG either: still refused, by its bytes.
    assert raw_changed.status_code == 422
    assert "data-raw-note" not in page


def test_replay_and_the_page_describe_every_image_alike(corpus: ImageCorpus, plain: Server) -> None:
    reference = f"{PROJECT}/{AGENT}/{corpus.session_id}"
    result = CliRunner().invoke(
        app,
        ["--data-root", str(corpus.root.path), "replay", reference, "--include-uncommitted"],
    )
    assert result.exit_code == 0, result.output
    page = httpx.get(f"{plain.url}/web/sessions/{reference}").text
    captions = re.findall(r"<figcaption>([^<]+)</figcaption>", page)
    named = re.findall(r"<p class=\"image-ref refused\" data-image-refused>([^<]+)</p>", page)
    # The chart's own, then png, jpeg, gif, cut, the four paths (the route judges them), webp.
    assert len(captions) == 10
    for caption in captions[1:]:
        assert html.unescape(caption) in result.stdout
    # Where the page names an image instead of drawing it for its kind, replay says the same
    # (replay lists five images of an output; the sixth, the redacted one, is "1 more").
    agreed = []
    for line in map(html.unescape, named):
        refusal, _, what = line.partition(": image/")
        if refusal.startswith("image not shown: "):
            reason = refusal.removeprefix("image not shown: ")
            if f"image/{what}" in result.stdout:
                assert f"image/{what}; not an image: {reason}" in result.stdout
                agreed.append(reason)
    assert len(agreed) == 2  # the SVG and the wrong magic number
    assert "found an SVG document (never shown: it can carry script)" in agreed[0]
