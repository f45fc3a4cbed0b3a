"""The images of a trace record: what an image item is, for every reader of a trace.

OmniMessage carries images three ways (``docs/trace-format.md``):

- an ``image_url`` message: a data URL (``data:image/png;base64,...``), a web
  URL, or, in traces other writers made, a file path or ``file://`` URL;
- an ``inline_data`` message whose ``mime_type`` is ``image/*``: base64 ``data``;
- ``tool_call_output.images``: data URLs.

:func:`record_images` lists them as :class:`ImageRef` values numbered within
their record; :func:`describe` names one for a reader (type and size, or the
address; never the bytes).  Whether bytes may be shown as an image is decided
from the bytes, never from the declared type: :func:`check_image` accepts PNG,
JPEG, GIF and WebP by their magic numbers, whole (a cut-off file is refused),
and nothing else.  SVG is never accepted: it is a document that can carry
script.  Pure: no files, no clock.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, unquote_to_bytes

from pentrace.errors import ImageDataError, ImageTooLargeError, ImageTypeError

__all__ = [
    "ALLOWED_TYPES",
    "ImageRef",
    "check_image",
    "decode_image",
    "describe",
    "kind_refusal",
    "megabytes",
    "parse_image_url",
    "preview_refusal",
    "record_images",
    "sniff",
    "summary",
    "too_large",
]

ALLOWED_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
_NAMES: Final = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
_EXPECTED: Final = "expected a PNG, JPEG, GIF or WebP image"
_SPACE: Final = re.compile(r"\s")
_HEAD: Final = 384  # bytes enough to tell an SVG's prolog from an image's magic number


@dataclass(frozen=True, slots=True)
class ImageRef:
    """One image of a record: ``index`` within the record, ``source`` ``inline`` (the bytes
    are in the record: ``data``, base64 or percent-encoded), ``web`` (an http(s) URL) or
    ``path`` (a file named by ``address``); ``media_type`` is what the record declares."""

    index: int
    source: str
    media_type: str = ""
    data: str = ""
    base64: bool = True
    address: str = ""

    @property
    def size(self) -> int:
        """The decoded size in bytes of inline data (from its length; 0 for other sources)."""
        if self.source != "inline":
            return 0
        if not self.base64:
            return len(self.data)
        padding = len(self.data) - len(self.data.rstrip("="))
        return max(len(self.data) * 3 // 4 - padding, 0)


def parse_image_url(url: str, index: int) -> ImageRef:
    """The :class:`ImageRef` of an ``image_url`` value or a ``tool_call_output.images`` entry."""
    if url[:5].lower() == "data:":
        head, _, body = url[5:].partition(",")
        params = [part.strip().lower() for part in head.split(";")]
        return ImageRef(index, "inline", params[0], body, "base64" in params[1:])
    if url[:8].lower().startswith(("http://", "https://")):
        return ImageRef(index, "web", address=url)
    if url[:7].lower() == "file://":
        after = url[7:]  # host (usually empty), then the path; urlsplit would refuse "[" hosts
        return ImageRef(
            index, "path", address=unquote(after[after.find("/") :] if "/" in after else "")
        )
    return ImageRef(index, "path", address=url)


def record_images(ptype: Any, payload: dict[str, Any]) -> list[ImageRef]:
    """The images of a model message payload (``ptype`` is its ``type``), in record order."""
    if ptype == "image_url":
        url = payload.get("image_url")
        return [parse_image_url(url, 0)] if isinstance(url, str) else []
    if ptype == "inline_data":
        mime, data = payload.get("mime_type"), payload.get("data")
        if isinstance(mime, str) and mime.lower().startswith("image/") and isinstance(data, str):
            return [ImageRef(0, "inline", mime.lower(), data)]
        return []
    if ptype == "tool_call_output":
        images = payload.get("images")
        listed = images if isinstance(images, list) else []
        return [parse_image_url(url, n) for n, url in enumerate(listed) if isinstance(url, str)]
    return []


def megabytes(size: int) -> str:
    """``7.2 MB`` (MB of 2**20 bytes), the unit of the size cap."""
    return f"{size / 2**20:.1f} MB"


def _size_text(size: int) -> str:
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"


def describe(ref: ImageRef) -> str:
    """``image/png, 12.0 KB`` for inline bytes, the URL of a web image, ``file <path>``."""
    if ref.source == "inline":
        return f"{ref.media_type or 'unknown type'}, {_size_text(ref.size)}"
    if ref.source == "web":
        return ref.address[:200] or "no address"
    return f"file {ref.address[:200]}"


def sniff(head: bytes) -> str | None:
    """The allowed image type the bytes start with (their magic number), else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _found(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if b"<svg" in head[:_HEAD].lower():
        return "an SVG document (never shown: it can carry script)"
    if text.startswith(b"<"):
        return "markup (HTML or XML)"
    if not head:
        return "no bytes"
    return f"unknown bytes starting {head[:4].hex(' ')}"


def _whole(data: bytes, media_type: str) -> bool:
    """Whether the bytes reach the end their format marks (a cut-off file does not)."""
    if media_type == "image/png":
        return data.endswith(b"IEND\xaeB`\x82")
    if media_type == "image/jpeg":
        return b"\xff\xd9" in data[-64:]  # the end-of-image marker; some writers pad after it
    if media_type == "image/gif":
        return data.rstrip(b"\x00").endswith(b";")
    return len(data) >= 12 and int.from_bytes(data[4:8], "little") + 8 <= len(data)


def check_image(data: bytes, where: str) -> str:
    """The type of ``data`` when it is a whole PNG, JPEG, GIF or WebP image; raises
    :class:`ImageTypeError` or :class:`ImageDataError` naming ``where`` otherwise."""
    media_type = sniff(data)
    if media_type is None:
        raise ImageTypeError(
            f"{where}: {_EXPECTED}, found {_found(data)}",
            hint="the raw record shows what the trace holds",
        )
    if not _whole(data, media_type):
        raise ImageDataError(
            f"{where}: the {_NAMES[media_type]} data ends before the image does "
            f"({len(data)} bytes: cut short)",
            hint="the raw record shows what the trace holds",
        )
    return media_type


def too_large(where: str, size: int, cap: int) -> ImageTooLargeError:
    """The error for an image of ``size`` bytes over the ``cap``, at ``where``."""
    return ImageTooLargeError(
        f"{where}: image too large ({megabytes(size)}), over the cap of {megabytes(cap)}",
        hint="the cap is a setting of the viewer (pentrace serve --image-max-mib)",
    )


def decode_image(ref: ImageRef, cap: int, where: str) -> tuple[bytes, str]:
    """The bytes and type of inline image data, checked (:func:`check_image`) and no larger
    than ``cap`` (judged from the length before anything is decoded)."""
    if ref.size > cap:
        raise too_large(where, ref.size, cap)
    if ref.base64:
        text = "".join(ref.data.split()) if _SPACE.search(ref.data) else ref.data
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):  # ValueError: a non-ASCII character
            raise ImageDataError(
                f"{where}: expected base64 image data, found {len(text)} characters that do "
                "not decode (cut short, or not base64)",
                hint="the raw record shows what the trace holds",
            ) from None
    else:
        data = unquote_to_bytes(ref.data)
    if len(data) > cap:
        raise too_large(where, len(data), cap)
    return data, check_image(data, where)


def _head(ref: ImageRef) -> bytes | None:
    if not ref.base64:
        return unquote_to_bytes(ref.data[: _HEAD * 3])[:_HEAD]
    text = "".join(ref.data[: _HEAD * 2].split())
    text = text[: len(text) // 4 * 4]
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # ValueError: a non-ASCII character
        return None


def kind_refusal(ref: ImageRef) -> str | None:
    """Why inline data is not an allowed image, judged by its first bytes (not base64, or
    another kind); None when it may be one, and for web and path images."""
    if ref.source != "inline":
        return None
    head = _head(ref)
    if head is None:
        return "its data is not base64"
    if sniff(head) is None:
        return f"{_EXPECTED}, found {_found(head)}"
    return None


def summary(ref: ImageRef) -> str:
    """:func:`describe`, and why the bytes are not an image when their first bytes say so."""
    reason = kind_refusal(ref)
    return describe(ref) if reason is None else f"{describe(ref)}; not an image: {reason}"


def preview_refusal(ref: ImageRef, cap: int) -> str | None:
    """Why a page should not ask for this inline image (too large, or not an allowed type by
    its first bytes), without decoding it; None when it may (the server still checks it all)."""
    if ref.source != "inline":
        return None
    if ref.size > cap:
        return f"image too large ({megabytes(ref.size)})"
    reason = kind_refusal(ref)
    return None if reason is None else f"image not shown: {reason}"
