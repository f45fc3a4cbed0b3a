"""What an image item is (the model the viewer and ``pentrace replay`` share), and which bytes
count as an image: hostile input included (wrong magic, SVG with script, huge or cut base64)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pentrace.domain.omnimessage.images import (
    ALLOWED_TYPES,
    ImageRef,
    check_image,
    decode_image,
    describe,
    parse_image_url,
    preview_refusal,
    record_images,
    summary,
)
from pentrace.errors import ImageDataError, ImageError, ImageTooLargeError, ImageTypeError
from tests.image_samples import SVG_WITH_SCRIPT, data_url, image_bytes

CAP = 1024 * 1024
WHERE = "session p/a/s, record 3, image 0"


def test_a_record_lists_its_images_in_each_of_the_three_shapes() -> None:
    png = data_url(image_bytes("PNG"), "image/png")
    assert record_images("image_url", {"image_url": png})[0].source == "inline"
    assert record_images("image_url", {"image_url": "https://example.org/a.png"})[0] == (
        ImageRef(0, "web", address="https://example.org/a.png")
    )
    inline = record_images("inline_data", {"data": "AAAA", "mime_type": "IMAGE/PNG"})
    assert inline == [ImageRef(0, "inline", "image/png", "AAAA")]
    assert record_images("inline_data", {"data": "AAAA", "mime_type": "application/pdf"}) == []
    listed = record_images("tool_call_output", {"images": [png, 7, "file:///x/y%20z.png"]})
    assert [(i.index, i.source, i.address) for i in listed] == [
        (0, "inline", ""),
        (2, "path", "/x/y z.png"),
    ]
    assert record_images("text", {"text": png}) == []


def test_a_data_url_declares_its_type_and_encoding() -> None:
    ref = parse_image_url("data:Image/GIF;charset=x;BASE64,R0lG", 4)
    assert (ref.index, ref.media_type, ref.data, ref.base64) == (4, "image/gif", "R0lG", True)
    plain = parse_image_url("data:image/svg+xml,%3Csvg%3E", 0)
    assert (plain.media_type, plain.base64, plain.data) == ("image/svg+xml", False, "%3Csvg%3E")


def test_describe_names_type_and_size_or_the_address_never_the_bytes() -> None:
    png = image_bytes("PNG")
    shown = describe(parse_image_url(data_url(png, "image/png"), 0))
    assert shown == f"image/png, {len(png)} bytes"
    big = parse_image_url("data:image/jpeg;base64," + "A" * 4096, 0)
    assert describe(big) == "image/jpeg, 3.0 KB"
    assert describe(parse_image_url("/tmp/pasted.png", 0)) == "file /tmp/pasted.png"


@pytest.mark.parametrize(
    ("kind", "media_type"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
def test_each_allowed_type_decodes_and_is_typed_by_its_bytes(kind: str, media_type: str) -> None:
    data = image_bytes(kind)
    # The declared type is not believed: the bytes say what they are.
    ref = parse_image_url(data_url(data, "image/svg+xml"), 0)
    assert decode_image(ref, CAP, WHERE) == (data, media_type)
    assert preview_refusal(ref, CAP) is None


def test_bytes_with_the_wrong_magic_number_are_refused_naming_what_they_are() -> None:
    ref = parse_image_url(data_url(b"MZ\x90\x00" + bytes(200), "image/png"), 0)
    with pytest.raises(ImageTypeError, match=r"record 3, image 0: expected a PNG.*4d 5a 90 00"):
        decode_image(ref, CAP, WHERE)
    assert "unknown bytes starting 4d 5a 90 00" in str(preview_refusal(ref, CAP))


@pytest.mark.parametrize("encoded", ["base64", "percent"])
def test_an_svg_with_script_is_never_an_image(encoded: str) -> None:
    url = (
        data_url(SVG_WITH_SCRIPT, "image/svg+xml")
        if encoded == "base64"
        else "data:image/svg+xml," + SVG_WITH_SCRIPT.decode().replace("<", "%3C")
    )
    ref = parse_image_url(url, 0)
    with pytest.raises(ImageTypeError, match="an SVG document"):
        decode_image(ref, CAP, WHERE)
    assert "SVG" in str(preview_refusal(ref, CAP))
    with pytest.raises(ImageTypeError):
        check_image(b"\xef\xbb\xbf  " + SVG_WITH_SCRIPT, WHERE)


def test_huge_base64_is_refused_from_its_length_before_decoding() -> None:
    # Not valid base64 past the first characters: only the length can have refused it.
    ref = ImageRef(0, "inline", "image/png", "iVBORw0KGgo" + "!" * (8 * 1024 * 1024))
    with pytest.raises(ImageTooLargeError, match=r"image too large \(6\.0 MB\), over the cap"):
        decode_image(ref, CAP, WHERE)
    assert preview_refusal(ref, CAP) == "image too large (6.0 MB)"


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "GIF", "WEBP"])
def test_cut_short_base64_is_refused(kind: str) -> None:
    encoded = base64.b64encode(image_bytes(kind, 64, 64)).decode()
    odd = ImageRef(0, "inline", "image/png", encoded[: len(encoded) // 2 + 1])
    with pytest.raises(ImageDataError, match="do not decode"):
        decode_image(odd, CAP, WHERE)
    # Cut on a four-character boundary the base64 decodes, but the image ends early.
    even = ImageRef(0, "inline", "image/png", encoded[: len(encoded) // 8 * 4])
    with pytest.raises(ImageDataError, match="ends before the image does"):
        decode_image(even, CAP, WHERE)


def test_base64_wrapped_over_lines_still_decodes() -> None:
    data = image_bytes("PNG")
    encoded = base64.encodebytes(data).decode()  # 76-character lines
    assert "\n" in encoded
    assert decode_image(ImageRef(0, "inline", "image/png", encoded), CAP, WHERE)[0] == data


def test_data_that_is_not_base64_is_refused_on_the_page_and_by_the_decoder() -> None:
    ref = ImageRef(0, "inline", "image/png", "not*base64*at*all")
    assert preview_refusal(ref, CAP) == "image not shown: its data is not base64"
    with pytest.raises(ImageDataError):
        decode_image(ref, CAP, WHERE)


@given(
    st.one_of(
        st.text(max_size=300),
        st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode()),
        st.binary(max_size=200).map(lambda b: base64.b64encode(b"\x89PNG\r\n\x1a\n" + b).decode()),
    ),
    st.booleans(),
)
def test_any_data_is_an_allowed_image_or_refused_with_an_image_error(
    data: str, encoded: bool
) -> None:
    ref = ImageRef(0, "inline", "image/png", data, encoded)
    if preview_refusal(ref, CAP) is not None:  # what the page refuses, the route refuses too
        with pytest.raises(ImageError, match=f"^{WHERE}: "):
            decode_image(ref, CAP, WHERE)
        return
    try:
        _, media_type = decode_image(ref, CAP, WHERE)
    except ImageError as error:
        found = error.message  # passed the first bytes, failed later: named where
    else:
        found = media_type
    assert found in ALLOWED_TYPES or found.startswith(WHERE)


@given(st.text(max_size=200), st.sampled_from(["data:", "data:image/png;base64,", "file://", ""]))
def test_any_image_text_is_listed_described_and_judged_without_an_error(
    text: str, prefix: str
) -> None:
    for ptype, payload in (
        ("image_url", {"image_url": prefix + text}),
        ("tool_call_output", {"images": [prefix + text]}),
        ("inline_data", {"data": text, "mime_type": "image/png"}),
    ):
        (ref,) = record_images(ptype, payload)
        assert isinstance(describe(ref), str)
        assert isinstance(summary(ref), str)
        refusal = preview_refusal(ref, CAP)
        assert refusal is None or refusal.startswith("image ")
