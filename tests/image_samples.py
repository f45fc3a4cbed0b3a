"""Real image bytes for the image tests, made by Pillow (in ``dev``)."""

from __future__ import annotations

import base64
import io
from typing import Final

from PIL import Image

SVG_WITH_SCRIPT: Final = (
    b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    b"<script>alert(document.cookie)</script></svg>"
)


def image_bytes(kind: str, width: int = 40, height: int = 30) -> bytes:
    """A ``width`` x ``height`` picture as ``kind`` (PNG, JPEG, GIF or WEBP)."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 30)).save(out, kind)
    return out.getvalue()


def data_url(data: bytes, media_type: str) -> str:
    """``data:<media_type>;base64,<data>``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"
