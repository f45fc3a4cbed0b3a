"""A cold analytics build works in streaming memory (issue #32): the memory it holds does not grow
with the length of a session, here a shard of empty ``{}`` records and blank lines (each a
``trace.record`` event for the sessions projection, nothing for the others).  Measured with
tracemalloc's peak, which is deterministic for one input; never a time."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from pentrace import testing as pt
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.builtin.sessions import SessionActivity
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.cold import cold_build

MB = 1024 * 1024


def _hollow_session(root: Path, records: int) -> None:
    pt.write_trace(
        root,
        [pt.StartSession(model_id="m"), pt.UserInput("x")],
        project="p",
        agent="a",
        session_id="session-2026-07-18-11-10-22-0000abcd",
    )
    shard = next(root.rglob("*_001.jsonl"))
    with shard.open("ab") as handle:
        handle.write(b"\n" * records)
        handle.write(b"{}\n" * records)


def _peak(projection: type[AnalyticsProjection], root: Path) -> tuple[int, int]:
    """The build's traced peak (bytes) and the events it fed."""
    tracemalloc.start()
    try:
        report = cold_build(projection, data_root=root, env={})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report is not None
    return peak, report.events


def test_a_cold_build_holds_the_same_memory_for_a_session_twice_as_long(tmp_path: Path) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    _hollow_session(small, 12_000)
    _hollow_session(large, 24_000)
    for projection in (SessionActivity, TokenUse):
        small_peak, small_events = _peak(projection, small)
        large_peak, large_events = _peak(projection, large)
        if projection is SessionActivity:
            assert large_events - small_events == 12_000  # every `{}` line was fed
        # Holding each event's envelope (~1 KB) would add 12 MB; what is kept is per session.
        assert large_peak - small_peak < 2 * MB, projection.name
        assert large_peak < 12 * MB, projection.name
