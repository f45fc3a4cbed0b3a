"""The service under a bounded load from loopback (issue #32, ``benchmarks/service_load.py``
at full size): SSE streams held open while pages, searches, usage and the API are asked
for, then every connection closed, then SIGTERM with streams and requests still open.

Nothing here measures speed: the time limits are safety nets.  What is checked is that
no answer is a server error, that the server gives back its descriptors and most of its
memory once the clients are gone, and that SIGTERM ends it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.service_load import Load, build_root, measure

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

LOAD = Load(sse_clients=40, rate=10.0, seconds=10.0, settle=10.0, open_at_sigterm=20)


def test_streams_and_pages_under_load_then_quiet_then_sigterm(tmp_path: Path) -> None:
    build_root(tmp_path, demos=1)
    figures = measure(tmp_path, LOAD)
    report = (
        f"statuses {dict(figures.statuses)}, failures {dict(figures.failures)}, "
        f"RSS idle/peak/after {figures.rss_idle_kib}/{figures.rss_peak_kib}/"
        f"{figures.rss_after_kib} KiB, fds idle/peak/after {figures.fds_idle}/"
        f"{figures.fds_peak}/{figures.fds_after}, log {figures.errors_in_log[:3]}"
    )
    print(report)
    # Every stream and every page was answered, none with a server error.
    assert figures.server_errors == 0, report
    assert not figures.failures, report
    assert figures.sse_opened == LOAD.sse_clients + LOAD.open_at_sigterm, report
    assert sum(figures.statuses.values()) >= LOAD.sse_clients + LOAD.rate * LOAD.seconds, report
    assert not figures.errors_in_log, report
    # The load was real: the streams held descriptors while they were open.
    assert figures.fds_peak >= figures.fds_idle + LOAD.sse_clients, report
    # Once everyone left, the descriptors are back to idle and memory near it.
    assert figures.fds_after <= figures.fds_idle, report
    assert figures.rss_after_kib <= 1.5 * figures.rss_idle_kib, report
    # SIGTERM ended the server (the harness waits at most 30 s for it).
    assert figures.exit_code is not None, report
