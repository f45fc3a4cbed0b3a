"""Server time of the web viewer's pages, as ratios to the JSON API answering the same question.

Run ``python -m benchmarks.web_pages`` (10,000 sessions, and one session of 100,000
records) or, for example, ``python -m benchmarks.web_pages --sessions 2000``.

A real ``pentrace serve`` process answers every request over loopback HTTP.  Each
figure is the median of ``--rounds`` warm requests (the catalog cache is built by a
first, untimed listing), and each page is set against a same-run baseline:

- the Traces page (first page of 50 rows, and a filtered one) against
  ``GET /api/v1/sessions?limit=50`` (the same catalog listing as JSON);
- the Session page of the 100,000-record session (its first window of 500 records,
  the tokens chart, the resume panel and the audit findings) against
  ``GET /api/v1/sessions/{id}/trace`` (the same file, redacted, streamed whole);
- with Debian's chromium present, the browser's first contentful paint of that page;
- with chromium, live latency (``--live-samples``): from just before a recorder
  process saves a request to the event's line appearing in the Session page's live
  panel, against the same events' arrival at the raw EventSource test page
  (``serve --test-page``) open in the same browser at the same time.

The requests are interleaved, one of each per round, so load from other processes
falls on the baseline and the page alike.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

from benchmarks._corpus import write_trace
from benchmarks.cli_corpus import write_corpus
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.sse_harness import (
    AGENT,
    PROJECT,
    Server,
    event_ids,
    finish,
    session_id,
    start_writer,
    write_session,
)

_CHROMIUM = Path("/usr/bin/chromium")
_BIG = ("bench", "reader", "session-2026-10-01-00-00-00-0b160000")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    env = {**os.environ, "PENGUIN_HOME": str(root)}
    for name in ("PENGUIN_RUNTIME_EVENT_LEDGER_PATH", "PENTRACE_LEDGER_URL", "PENTRACE_API_TOKEN"):
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "pentrace", "--data-root", str(root), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(url + "/openapi.json", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the server did not come up")


def _medians(urls: list[str], rounds: int) -> list[float]:
    """The median time of each URL, measured interleaved (one of each per round), so a
    slow phase of a busy machine falls on all of them alike."""
    times: list[list[float]] = [[] for _ in urls]
    for _ in range(rounds):
        for index, url in enumerate(urls):
            started = time.perf_counter()
            answer = httpx.get(url, timeout=600)
            answer.raise_for_status()
            times[index].append(time.perf_counter() - started)
    return [statistics.median(each) for each in times]


def _first_paint(url: str) -> float | None:
    if not _CHROMIUM.exists():
        return None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=str(_CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.goto(url, timeout=600_000, wait_until="load")
            page.wait_for_timeout(500)
            entries = page.evaluate(
                "performance.getEntriesByType('paint')"
                ".filter(e => e.name === 'first-contentful-paint').map(e => e.startTime)"
            )
        finally:
            browser.close()
    return float(entries[0]) / 1000 if entries else None


# Arrival times (ms since the epoch) in the page, by event id: the Session page's live panel
# (each <li> as it is added) and the test page's raw EventSource handler.
_WATCH_PANEL = """() => { window.benchSeen = {};
  new MutationObserver((changes) => { const now = performance.timeOrigin + performance.now();
    for (const change of changes) { for (const node of change.addedNodes) {
      const id = /[(]([^()]+)[)]$/.exec(node.textContent || "");
      if (id) { window.benchSeen[id[1]] = now; }
    } } }).observe(document.querySelector("[data-live-events]"), {childList: true}); }"""
_WATCH_RAW = """() => { window.benchSeen = {}; const events = window.pentrace.events;
  events.push = (id) => { window.benchSeen[id] = performance.timeOrigin + performance.now();
    return Array.prototype.push.call(events, id); }; }"""


def _live_latency(samples: int) -> tuple[list[float], list[float]] | None:
    """Milliseconds from save() in a recorder process to the Session page's live panel, and
    to the raw EventSource test page, for the same ``samples`` requests."""
    if not _CHROMIUM.exists() or samples <= 0:
        return None
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="pentrace-web-live-") as folder:
        root, sid = Path(folder), session_id(0x11FE)
        with contextlib.redirect_stdout(io.StringIO()):  # the recorder's "ready"/"done"
            write_session(root, sid, 1)  # the session exists before the page opens
        server = Server(root, args=["--test-page"]).start()
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(
                    executable_path=str(_CHROMIUM), headless=True, args=["--no-sandbox"]
                )
                panel, raw = browser.new_page(), browser.new_page()
                panel.goto(f"{server.url}/web/sessions/{PROJECT}/{AGENT}/{sid}")
                raw.goto(f"{server.url}/_test/sse.html?session_id={sid}")
                panel.wait_for_function("() => window.pentraceLive && window.pentraceLive.opens")
                raw.wait_for_function("() => window.pentrace && window.pentrace.opens")
                panel.evaluate(_WATCH_PANEL)
                raw.evaluate(_WATCH_RAW)
                writer = start_writer(root, sid, samples, delay=0.1, stamp=True)
                assert writer.stdout is not None
                lines = writer.stdout.read().decode().splitlines()
                finish(writer)
                saved = [line.split()[1:] for line in lines if line.startswith("saved ")]
                last = event_ids(sid, int(saved[-1][0]), int(saved[-1][0]))[0]
                for page in (panel, raw):
                    page.wait_for_function(f"() => window.benchSeen[{last!r}]", timeout=60_000)
                seen = [page.evaluate("window.benchSeen") for page in (panel, raw)]
                browser.close()
        finally:
            server.stop()
    ids = [(event_ids(sid, int(at), int(at))[0], float(before) * 1000) for at, before in saved]
    return [seen[0][i] - t for i, t in ids], [seen[1][i] - t for i, t in ids]


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


_OPTIONS = (
    ("--sessions", 10_000),
    ("--big-records", 100_000),
    ("--rounds", 5),
    ("--live-samples", 40),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for option, default in _OPTIONS:
        parser.add_argument(option, type=int, default=default)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "data"
        write_corpus(root, args.sessions, args.sessions * 5)
        project, agent, session = _BIG
        big = DataRoot(root).shard_path(project, agent, session, 1, date(2026, 10, 1))
        big.parent.mkdir(parents=True, exist_ok=True)
        write_trace(big, args.big_records, seed=7)
        text = big.read_bytes()
        old = text.split(b'"session_id":"', 1)[1].split(b'"', 1)[0]
        big.write_bytes(text.replace(old, session.encode(), 1))
        process, url = _serve(root)
        try:
            httpx.get(url + "/api/v1/sessions?limit=1", timeout=600)  # builds the catalog cache
            ref = "/".join(_BIG)
            listing, traces, filtered, trace, session_page = _medians(
                [
                    url + "/api/v1/sessions?limit=50",
                    url + "/web/traces",
                    url + "/web/traces?agent=coder&since=2026-11-01",
                    url + f"/api/v1/sessions/{ref}/trace",
                    url + f"/web/sessions/{ref}",
                ],
                args.rounds,
            )
            paint = _first_paint(url + f"/web/sessions/{ref}")
        finally:
            process.terminate()
            process.wait(30)
    print(f"sessions {args.sessions}, big session {args.big_records} records")
    print(f"GET /api/v1/sessions?limit=50 (baseline)   {listing:8.3f} s")
    print(f"GET /web/traces                            {traces:8.3f} s  x{traces / listing:.2f}")
    print(
        f"GET /web/traces?agent=coder&since=...      {filtered:8.3f} s  x{filtered / listing:.2f}"
    )
    print(f"GET /api/v1/sessions/<big>/trace (baseline) {trace:8.3f} s")
    ratio = session_page / trace
    print(f"GET /web/sessions/<big>                    {session_page:8.3f} s  x{ratio:.2f}")
    if paint is not None:
        print(f"first contentful paint of /web/sessions/<big> {paint:8.3f} s")
    live = _live_latency(args.live_samples)
    if live is not None:
        (panel50, panel95), (raw50, raw95) = (_percentiles(each) for each in live)
        print(
            f"save() -> raw EventSource page (baseline)  p50 {raw50:6.1f} ms  p95 {raw95:6.1f} ms"
        )
        print(
            f"save() -> Session page live panel          p50 {panel50:6.1f} ms  p95 {panel95:6.1f} "
            f"ms  x{panel50 / raw50:.2f} / x{panel95 / raw95:.2f}"
        )


if __name__ == "__main__":
    main()
