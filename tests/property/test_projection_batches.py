"""Any split of the event stream into batches (with restarts) gives the same read model,
and a rebuild from the traces gives it too."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pentrace.infrastructure.analytics.examples import dump, run_in_batches
from pentrace.infrastructure.analytics.rebuild import rebuild
from pentrace.infrastructure.analytics.registry import BUILTINS
from pentrace.infrastructure.analytics.runner import open_ledger
from pentrace.infrastructure.ledger.bulk import sync
from pentrace.testing import Command, session_commands, write_trace


def _analytics(root: Path, name: str) -> dict[str, str]:
    return {"PENTRACE_ANALYTICS_URL": f"sqlite:///{root / name}"}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sessions=st.lists(session_commands(max_episodes=4), min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=1, max_value=200), max_size=5),
)
def test_any_split_into_batches_and_a_rebuild_give_the_same_read_model(
    sessions: list[list[Command]], cuts: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for number, commands in enumerate(sessions):
            write_trace(root, commands, session_id=f"session-2026-07-18-11-10-22-{number:08x}")
        ledger = open_ledger(root)
        try:
            sync(ledger, root)
        finally:
            ledger.close()
        for projection in BUILTINS.values():
            whole, split, rebuilt = (
                _analytics(root, "whole.db"),
                _analytics(root, "split.db"),
                _analytics(root, "rebuilt.db"),
            )
            run_in_batches(projection, root, env=whole)
            run_in_batches(projection, root, cuts, env=split)
            rebuild(projection, data_root=root, env=rebuilt)
            expected = dump(projection, root, whole)
            if projection.name == "sessions":
                assert expected["act_sessions"], "every generated session has a row"
            assert dump(projection, root, split) == expected
            assert dump(projection, root, rebuilt) == expected
