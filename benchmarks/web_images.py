"""Server time of the viewer's images, as ratios to same-run baselines (ADR 0056).

Run ``python -m benchmarks.web_images`` (a session of 2,000 records holding 100 PNG images
of about 60 KB each) or, for example, ``python -m benchmarks.web_images --records 20000``.

A real ``pentrace serve`` answers over loopback HTTP; each figure is the median of
``--rounds`` warm requests, interleaved one of each per round so load from other
processes falls on the baseline and the measured request alike:

- one image near the end of the trace (found, decoded, checked by its bytes) against
  the raw-record route's redacted JSON of the same record (the same read up to it);
- the Session page of the session with inline images (each image's size and first
  bytes judged for the ``<img>`` or its placeholder, the data redacted with the
  record) against the same session with each image a short web URL instead.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.storage.layout import DataRoot
from tests.image_samples import data_url
from tests.integration.sse_harness import Server

_PROJECT, _AGENT = "bench", "images"


def _picture(seed: int, side: int) -> bytes:
    import io

    from PIL import Image

    rng = random.Random(seed)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(out, "PNG")
    return out.getvalue()


def _session(root: DataRoot, records: int, images: int, inline: bool) -> tuple[str, int]:
    """A session of about ``records`` records with ``images`` images spread evenly; returns
    its id and the position of its last image record."""
    every = max(records // (2 * images), 1)
    with SessionApplication(root, _PROJECT, _AGENT) as app:
        handle = app.start_session(
            provider="p", model_id="m", model_context_window=100_000, system_prompt="s"
        )
        position, shown = 1, 0
        while position < records:
            if position % every == 0 and shown < images:
                url = data_url(_picture(shown, 140), "image/png")
                handle.record_image_url(url if inline else f"https://example.org/{shown}.png")
                shown += 1
            else:
                handle.record_user_input(f"message {position}")
            position += 1
        handle.save()
        shard = root.find_shards(_PROJECT, _AGENT, handle.session_id)[-1].path
    lines = shard.read_bytes().splitlines()
    last = max(n for n, line in enumerate(lines, start=1) if b'"image_url"' in line or n == 1)
    return handle.session_id, last


def _median_ms(client: httpx.Client, url: str, samples: list[float]) -> None:
    start = time.perf_counter()
    answer = client.get(url)
    samples.append((time.perf_counter() - start) * 1000)
    assert answer.status_code == 200, (url, answer.status_code, answer.text[:200])


def main() -> None:
    """Build the sessions, serve them, print the figures as Markdown rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = DataRoot(Path(folder) / "data")
        with_images, last = _session(root, args.records, args.images, inline=True)
        without, _ = _session(root, args.records, args.images, inline=False)
        server = Server(root.path).start()
        base = f"{server.url}/web/sessions/{_PROJECT}/{_AGENT}"
        urls = {
            "image": f"{base}/{with_images}/images/{last}/0",
            "record": f"{base}/{with_images}/records/{last}",
            "page with images": f"{base}/{with_images}",
            "page with web URLs": f"{base}/{without}",
        }
        samples: dict[str, list[float]] = {name: [] for name in urls}
        try:
            with httpx.Client(timeout=120) as client:
                for url in urls.values():
                    client.get(url)  # warm
                for _ in range(args.rounds):
                    for name, url in urls.items():
                        _median_ms(client, url, samples[name])
        finally:
            server.stop()
    median = {name: statistics.median(values) for name, values in samples.items()}
    load = os.getloadavg()[0]
    print(f"date {date.today()}, load {load:.2f}, {args.records} records, {args.images} images")
    print("| request | median ms | baseline | ratio |")
    print("| --- | --- | --- | --- |")
    for name, baseline in (("image", "record"), ("page with images", "page with web URLs")):
        ratio = median[name] / median[baseline]
        print(f"| {name} | {median[name]:.1f} | {baseline} {median[baseline]:.1f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
