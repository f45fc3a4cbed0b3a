"""A data root whose session holds images in every shape, good and hostile, for the viewer's
image tests: PNG and JPEG input, tool-output images (GIF, SVG with script, wrong magic, cut
base64, one over the cap), scratchpad files by path (one good, one through a symlink, two
leaving the folder), a web URL, WebP inline data, and the same session id under a second
agent holding other pictures."""

from __future__ import annotations

import base64
import io
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from PIL import Image

from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.sessions.trace_import import import_session
from pentrace.infrastructure.storage.layout import DataRoot
from tests.image_samples import SVG_WITH_SCRIPT, data_url, image_bytes

PROJECT, AGENT, OTHER_AGENT = "shots", "alpha", "beta"
CAP_MIB: Final = 0.1  # the server's --image-max-mib in these tests
SECRET: Final = "sk-proj-Img123def456ghi789jkl012mno345"


def noise_png(side: int) -> bytes:
    """A PNG of random pixels (it does not compress): larger than the cap at 256 px."""
    rng = random.Random(7)
    picture = Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3))
    out = io.BytesIO()
    picture.save(out, "PNG")
    return out.getvalue()


@dataclass(frozen=True)
class ImageCorpus:
    """The root, the shared session id, and ``(position, index)`` of each named image."""

    root: DataRoot
    session_id: str
    at: dict[str, tuple[int, int]]
    png: bytes
    jpeg: bytes
    other_png: bytes

    def url(self, name: str, agent: str = AGENT) -> str:
        """The image route of the image called ``name``."""
        position, index = self.at[name]
        return f"/web/sessions/{PROJECT}/{agent}/{self.session_id}/images/{position}/{index}"


def _positions(shard: Path, names: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Where each image text (a URL, or inline base64) sits: record position, image index."""
    found: dict[str, tuple[int, int]] = {}
    for position, line in enumerate(shard.read_text().splitlines(), start=1):
        payload = json.loads(line)["payload"]
        urls = payload.get("images") or [payload.get("image_url") or payload.get("data") or ""]
        for index, url in enumerate(urls):
            for name, text in names.items():
                if text == url:
                    found[name] = (position, index)
    return found


def build_image_corpus(path: Path) -> ImageCorpus:
    """Write the corpus (module docstring) under ``path``."""
    root = DataRoot(path)
    png, jpeg, gif, webp = (image_bytes(kind) for kind in ("PNG", "JPEG", "GIF", "WEBP"))
    big = noise_png(256)
    cut = base64.b64encode(image_bytes("PNG", 64, 64)).decode()
    urls = {
        "png": data_url(png, "image/png"),
        "jpeg": data_url(jpeg, "image/jpeg"),
        "gif": data_url(gif, "image/gif"),
        "svg": data_url(SVG_WITH_SCRIPT, "image/svg+xml"),
        "magic": data_url(b"MZ\x90\x00" + bytes(300), "image/png"),
        "cut": "data:image/png;base64," + cut[: len(cut) // 2 + 1],
        "big": data_url(big, "image/png"),
        # A key after a space: the redaction policy replaces it (inside base64 it would not).
        "redacted": "data:image/png;base64,iVBORw0KGgo " + SECRET,
        "web": "https://example.org/cat.png",
    }
    with SessionApplication(root, PROJECT, AGENT) as app:
        handle = app.start_session(
            provider="p", model_id="m", model_context_window=1000, system_prompt="s"
        )
        sid = handle.session_id
        scratchpad = root.scratchpad_dir(PROJECT, AGENT, sid)
        (scratchpad / "pasted").mkdir(parents=True)
        (scratchpad / "pasted" / "shot.png").write_bytes(png)
        outside = path / "outside.png"
        outside.write_bytes(png)
        (scratchpad / "link.png").symlink_to(outside)
        urls |= {
            "file": str(scratchpad / "pasted" / "shot.png"),
            "symlink": f"file://{scratchpad / 'link.png'}",
            "absolute": "/etc/passwd",
            "traversal": "../../../../../../etc/passwd",
        }
        handle.record_user_input("look at these", images=[urls["png"], urls["jpeg"]])
        handle.begin_request()
        handle.record_tool_call("screenshot", "{}", "call-1")
        shots = [urls[name] for name in ("gif", "svg", "magic", "cut", "big", "redacted")]
        handle.record_tool_output("call-1", "captured", images=shots)
        handle.end_request("completed")
        for name in ("file", "symlink", "absolute", "traversal", "web"):
            handle.record_image_url(urls[name])
        handle.record_inline_data(base64.b64encode(webp).decode(), "image/webp", role="assistant")
        handle.save()
        shard = root.find_shards(PROJECT, AGENT, sid)[-1].path
    at = _positions(shard, urls | {"webp": base64.b64encode(webp).decode()})
    # The same id under another agent: the same records, another PNG at the same place.
    other_png = image_bytes("PNG", 80, 60)
    copy = path / "beta.jsonl"
    copy.write_text(shard.read_text().replace(urls["png"], data_url(other_png, "image/png")))
    import_session(root, PROJECT, OTHER_AGENT, copy)
    return ImageCorpus(root, sid, at, png, jpeg, other_png)
