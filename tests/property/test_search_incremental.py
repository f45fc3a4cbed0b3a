"""Property: indexing a growing trace in any number of refreshes equals one rebuild."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.infrastructure.search.index import SearchIndex, search_index_path
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.testing import Command, render_shards, session_commands
from pentrace.testing.files import DEFAULT_DAY

SID = "session-2026-07-18-11-10-22-3f8a1c2d"


def _documents(root: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(search_index_path(DataRoot(root))) as conn:
        return conn.execute(
            "SELECT rowid, body, kind, role, turn, time, shard, line FROM docs ORDER BY rowid"
        ).fetchall()


@settings(max_examples=15, deadline=None)
@given(
    commands=session_commands(max_episodes=5),
    cuts=st.lists(st.floats(min_value=0, max_value=1), max_size=4),
)
def test_refreshing_at_any_byte_boundaries_equals_a_rebuild(
    commands: list[Command], cuts: list[float]
) -> None:
    shards = [b"".join(line + b"\n" for line in shard) for shard in render_shards(commands)]
    with tempfile.TemporaryDirectory() as folder:
        root = DataRoot(Path(folder))
        paths = [
            root.shard_path("p", "a", SID, index, DEFAULT_DAY)
            for index in range(1, len(shards) + 1)
        ]
        paths[0].parent.mkdir(parents=True)
        index = SearchIndex(root)
        try:
            # Append each shard in pieces (cut anywhere, mid-line included), refreshing between.
            for path, data in zip(paths, shards, strict=True):
                offsets = sorted({int(len(data) * cut) for cut in cuts} | {len(data)})
                written = 0
                for offset in offsets:
                    with path.open("ab") as handle:
                        handle.write(data[written:offset])
                    written = offset
                    index.refresh()
            incremental = _documents(root.path)
            index.rebuild()
            assert _documents(root.path) == incremental
        finally:
            index.close()
