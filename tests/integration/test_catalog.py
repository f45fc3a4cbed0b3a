"""The session catalog and its derived cache on real files: reuse, invalidation, damage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pentrace.errors import AmbiguousIdError, NotFoundError, UsageError
from pentrace.infrastructure.catalog.listing import (
    SessionFilter,
    cache_path,
    list_sessions,
    resolve_session,
    short_id,
)
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from pentrace.testing import BeginRequest, EndRequest, StartSession, UserInput, render_shards
from tests.integration.cli_sessions_corpus import SID_A, SID_B, SID_C, build_corpus


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    build_corpus(tmp_path / "data")
    return DataRoot(tmp_path / "data")


def _cached_ids(root: DataRoot) -> list[str]:
    with sqlite3.connect(cache_path(root)) as db:
        return sorted(row[0] for row in db.execute("SELECT session_id FROM sessions"))


def test_a_cold_listing_fills_the_cache_and_a_warm_one_reads_nothing(root: DataRoot) -> None:
    read: list[str] = []

    def spy(refs: list[SessionRef]) -> list[SessionRef]:
        read.extend(ref.session_id for ref in refs)
        return refs

    cold = list_sessions(root, progress=spy)  # type: ignore[arg-type]
    assert read == [SID_A, SID_B, SID_C]
    assert _cached_ids(root) == [SID_A, SID_B, SID_C]

    read.clear()
    warm = list_sessions(root, progress=spy)  # type: ignore[arg-type]
    assert read == []
    assert warm == cold


def test_an_appended_shard_is_read_again(root: DataRoot) -> None:
    before = {row.session_id: row for row in list_sessions(root)}
    shard = root.find_shards("p1", "a1", SID_B)[-1].path
    extra = render_shards([StartSession(), UserInput("more"), BeginRequest(), EndRequest()])[0][2:]
    with shard.open("ab") as handle:
        handle.write(b"".join(line + b"\n" for line in extra))

    after = {row.session_id: row for row in list_sessions(root)}

    assert after[SID_B].summary.records == before[SID_B].summary.records + 3
    assert after[SID_B].status == "completed"
    assert after[SID_A] == before[SID_A]


def test_a_deleted_session_leaves_the_cache(root: DataRoot) -> None:
    list_sessions(root)
    for shard in root.find_shards("p2", "a2", SID_C):
        shard.path.unlink()

    assert [row.session_id for row in list_sessions(root)] == [SID_A, SID_B]
    assert _cached_ids(root) == [SID_A, SID_B]


def test_a_listing_of_one_project_keeps_the_other_projects_cached(root: DataRoot) -> None:
    list_sessions(root)
    list_sessions(root, SessionFilter(project="p2"))

    assert _cached_ids(root) == [SID_A, SID_B, SID_C]


@pytest.mark.parametrize(
    "damage", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\xff" * 4000]
)
def test_a_corrupt_cache_is_rebuilt_never_a_crash(root: DataRoot, damage: bytes) -> None:
    expected = list_sessions(root)
    cache_path(root).write_bytes(damage)
    for suffix in ("-wal", "-shm"):
        Path(f"{cache_path(root)}{suffix}").unlink(missing_ok=True)

    assert list_sessions(root) == expected
    assert _cached_ids(root) == [SID_A, SID_B, SID_C]


def test_a_cache_folder_that_cannot_be_created_only_costs_speed(root: DataRoot) -> None:
    (root.path / ".pentrace").write_bytes(b"a file where the cache folder should be")

    assert [row.session_id for row in list_sessions(root)] == [SID_A, SID_B, SID_C]


def test_an_unreadable_session_is_listed_with_its_problem(root: DataRoot) -> None:
    shard = root.find_shards("p2", "a2", SID_C)[0].path
    stray = shard.parent.parent / "2026-07-21" / shard.name
    stray.parent.mkdir()
    stray.write_bytes(shard.read_bytes())  # two shards _001: their order is unknowable

    rows = {row.session_id: row for row in list_sessions(root)}

    problem = rows[SID_C].problem
    assert problem is not None
    assert problem.startswith("expected one shard with index 001, found two")
    assert rows[SID_C].has_errors is True
    assert _cached_ids(root) == [SID_A, SID_B]  # a broken session is never cached


def test_resolve_prefers_an_exact_id_and_reports_ambiguity_and_absence(root: DataRoot) -> None:
    assert resolve_session(root, SID_A).session_id == SID_A
    assert resolve_session(root, "7777").session_id == SID_C
    with pytest.raises(AmbiguousIdError, match="matches 2 sessions") as info:
        resolve_session(root, "3f8")
    assert info.value.candidates == [f"p1/a1/{SID_A}", f"p1/a1/{SID_B}"]
    with pytest.raises(NotFoundError, match="starts with 'abc'"):
        resolve_session(root, "abc")
    with pytest.raises(NotFoundError, match=r"\(p2\)"):
        resolve_session(root, "3f8a", project="p2")
    with pytest.raises(UsageError, match="found an empty string"):
        resolve_session(root, "  ")


def test_short_ids_are_the_token_of_native_ids_only() -> None:
    assert short_id(SID_A) == "3f8a1c2d"
    assert short_id("imported-session") == "imported-session"
