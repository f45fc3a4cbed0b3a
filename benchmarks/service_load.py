"""The event service under load (issue #32): SSE clients and page requests from loopback.

    python -m benchmarks.service_load                      # 200 streams, 50 requests/s, 60 s
    python -m benchmarks.service_load --seconds 20 --sse 100 --rate 30
    python -m benchmarks.service_load --root /path/to/root # an existing data root

A real ``pentrace serve`` (uvicorn, in a subprocess) reads a data root of demo sessions
(``pentrace demo``, run ``--demos`` times; recorded through the ledger hook).  The load:

- ``--sse`` concurrent streams on ``/api/v1/events/sse`` (all events, one session's, and a
  cursor the ledger never held, which gives a replay gap), held for the whole run;
- ``--rate`` page requests a second, open loop, each on its own connection, cycling through
  ``/web/traces``, ``/web/traces?q=foo``, ``/web/usage``, session pages, ``/api/v1/sessions``,
  ``/api/v1/sessions/{ref}`` and ``/api/v1/stats/tokens``.

Reported: answers by status (5xx counted), client-side failures, resident memory and open
descriptors of the server when idle (after one warm request of each kind), at peak and
``--settle`` seconds after the last connection closed, and the time from SIGTERM (sent with
``--open-at-sigterm`` streams open) to the process's exit.  The issue's targets: 0 server
errors, memory within 1.5x idle and descriptors back to idle 10 s after the last close,
exit within 2 s of SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.integration.service_load import Figures, Load, build_root, measure


def _report(figures: Figures, load: Load) -> bool:
    mib = 1024
    times = sorted(figures.page_seconds) or [0.0]
    p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95)]
    rows = [
        ("answers by status", dict(sorted(figures.statuses.items()))),
        ("HTTP 5xx", figures.server_errors),
        ("client-side failures", dict(figures.failures) or 0),
        ("streams opened", figures.sse_opened),
        ("page p50 / p95 / max s", f"{p50:.2f} / {p95:.2f} / {times[-1]:.2f}"),
        (
            "RSS cold / idle MiB",
            f"{figures.rss_cold_kib / mib:.1f} / {figures.rss_idle_kib / mib:.1f}",
        ),
        ("RSS peak MiB", f"{figures.rss_peak_kib / mib:.1f}"),
        (f"RSS {load.settle:g} s after close MiB", f"{figures.rss_after_kib / mib:.1f}"),
        ("RSS after / idle", f"{figures.rss_after_kib / figures.rss_idle_kib:.2f}x"),
        ("fds cold / idle / peak", f"{figures.fds_cold} / {figures.fds_idle} / {figures.fds_peak}"),
        (f"fds {load.settle:g} s after close", figures.fds_after),
        (
            "fds back to idle after",
            "never" if figures.fds_back_after is None else f"{figures.fds_back_after:.2f} s",
        ),
        (
            f"SIGTERM to exit ({load.open_at_sigterm} streams open)",
            f"{figures.sigterm_seconds:.2f} s",
        ),
        ("exit code", figures.exit_code),
    ]
    for name, value in rows:
        print(f"{name:<40} {value}")
    for line in figures.errors_in_log[:10]:
        print(f"server log: {line}")
    return (
        figures.server_errors == 0
        and figures.rss_after_kib <= 1.5 * figures.rss_idle_kib
        and figures.fds_after <= figures.fds_idle
        and figures.sigterm_seconds <= 2
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sse", type=int, default=200, help="concurrent SSE streams")
    parser.add_argument("--rate", type=float, default=50.0, help="page requests a second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load runs")
    parser.add_argument("--settle", type=float, default=10.0, help="watching after the close")
    parser.add_argument("--open-at-sigterm", type=int, default=50)
    parser.add_argument("--demos", type=int, default=3, help="pentrace demo runs (2 sessions)")
    parser.add_argument("--root", type=Path, help="an existing data root instead")
    args = parser.parse_args()
    load = Load(args.sse, args.rate, args.seconds, args.settle, args.open_at_sigterm)
    with tempfile.TemporaryDirectory(prefix="pentrace-load-") as scratch:
        root = args.root
        if root is None:
            root = Path(scratch)
            print(f"building a root of {2 * args.demos} demo sessions ...", flush=True)
            build_root(root, args.demos)
        print(
            f"{load.sse_clients} streams, {load.rate:g} requests/s for {load.seconds:g} s ...",
            flush=True,
        )
        figures = measure(root, load, lambda text: print(text, flush=True))
    met = _report(figures, load)
    print("targets met" if met else "targets NOT met")
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
