"""Derived stores under concurrent first use (issue #32): the analytics read models, the search
index and the catalog cache are built or caught up once, by one owner, whoever asks at the same
time - threads of one process and separate processes on one data root - and nobody gets an
error.  Real threads, real processes, real SQLite files; PostgreSQL for the read models when
configured."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from pentrace import testing as pt
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.builtin.sessions import SessionActivity
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.builtin.tools import ToolCalls
from pentrace.infrastructure.analytics.cold import ColdReport, cold_build
from pentrace.infrastructure.analytics.examples import dump
from pentrace.infrastructure.analytics.runner import catch_up
from pentrace.infrastructure.catalog.listing import list_sessions
from pentrace.infrastructure.operations.stats import StatsQuery, stats_document
from pentrace.infrastructure.search.index import SearchIndex, SearchQuery
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef
from tests.integration.sse_harness import Server
from tests.support import clean_env, run_pentrace, sync_ledger

BUILTINS: tuple[type[AnalyticsProjection], ...] = (TokenUse, ToolCalls, SessionActivity)
THREADS = 8
T = TypeVar("T")


def _corpus(root: Path, sessions: int = 4) -> None:
    for number in range(sessions):
        commands: list[pt.Command] = [
            pt.StartSession(model_id=f"model-{number % 2}"),
            pt.UserInput(f"find the foo number {number}"),
        ]
        for turn in range(3):
            call = f"call_{number}_{turn}"
            commands += [
                pt.BeginRequest(),
                pt.ToolCall(call, "read_file", '{"path": "foo.txt"}'),
                pt.ToolOutput(call, f"foo bar {turn}"),
                pt.EndRequest("completed"),
                pt.TokenUsage(pt.TokenCounts(0, 0, 0, 0), pt.TokenCounts(10, 2, 3, 40 + turn)),
            ]
        pt.write_trace(
            root,
            commands,
            project="proj",
            agent=f"agent{number % 2}",
            session_id=f"session-2026-07-18-11-10-22-{number:08x}",
        )


def _at_once(work: Callable[[int], T], count: int = THREADS) -> list[T]:
    """``work(i)`` in ``count`` threads released together; every result, or the first error."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def _ledger_only(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    return {**env, "PENTRACE_ANALYTICS_URL": f"sqlite:///{tmp_path / 'reference.db'}"}


def test_concurrent_cold_builds_in_threads_build_each_read_model_once(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _corpus(tmp_path)
    for each in BUILTINS:

        def build(_index: int, each: type[AnalyticsProjection] = each) -> ColdReport | None:
            return cold_build(each, data_root=tmp_path, env=env)

        reports = _at_once(build)
        built = [report for report in reports if report is not None]
        assert len(built) == 1, each.name  # one owner built it; the others found it built
        assert built[0].sessions == 4
    cold = {each.name: dump(each, tmp_path, env) for each in BUILTINS}
    sync_ledger(tmp_path, env)
    reference = _ledger_only(tmp_path, env)
    for each in BUILTINS:
        catch_up(each, data_root=tmp_path, env=reference)
    assert {each.name: dump(each, tmp_path, reference) for each in BUILTINS} == cold


def test_concurrent_stats_in_threads_catch_up_once_and_agree(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _corpus(tmp_path)
    sync_ledger(tmp_path, env)  # a ledger that holds events: every stats call catches up
    kinds = ("tokens", "tools", "requests", "sessions", "tree", "cost")
    documents = _at_once(
        lambda i: stats_document(tmp_path, StatsQuery(kinds[i % len(kinds)]), env=env), 12
    )
    for index, found in enumerate(documents):
        again = stats_document(tmp_path, StatsQuery(kinds[index % len(kinds)]), env=env)
        assert found == again
    positions = _at_once(lambda _i: catch_up(TokenUse, data_root=tmp_path, env=env))
    assert len(set(positions)) == 1
    assert positions[0]


def test_concurrent_search_refreshes_in_threads_index_each_record_once(tmp_path: Path) -> None:
    _corpus(tmp_path)
    root = DataRoot(tmp_path)

    def search(_index: int) -> list[tuple[str, int]]:
        with SearchIndex(root) as index:
            index.refresh()
            return [(hit.session_id, hit.position) for hit in index.search(SearchQuery("foo"))]

    found = _at_once(search)
    assert all(hits == found[0] for hits in found)
    with SearchIndex(root) as index:
        again = index.refresh()
        hits = index.search(SearchQuery("foo", limit=1000))
    assert (again.updated, again.documents, again.failures) == (0, 0, [])
    assert len(hits) == len(set((h.session_id, h.position) for h in hits)) > 0


def test_concurrent_listings_in_threads_agree_and_fill_the_cache(tmp_path: Path) -> None:
    _corpus(tmp_path)
    root = DataRoot(tmp_path)
    listed = _at_once(lambda _i: [row.session_id for row in list_sessions(root)])
    assert all(ids == listed[0] for ids in listed)
    assert len(listed[0]) == 4
    read: list[SessionRef] = []

    def spy(refs: Sequence[SessionRef]) -> Iterable[SessionRef]:
        read.extend(refs)
        return refs

    list_sessions(root, progress=spy)
    assert read == []  # every row came from the cache the concurrent listings filled


_COLD_BUILD = """
import json, sys
from pathlib import Path
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.cold import ColdReport, cold_build
report = cold_build(TokenUse, data_root=Path(sys.argv[1]))
print(json.dumps(None if report is None else report.sessions))
"""


def _processes(args_list: list[list[str]], env: dict[str, str]) -> list[tuple[int, str, str]]:
    children = [
        subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for args in args_list
    ]
    done = []
    for child in children:
        out, err = child.communicate(timeout=300)
        done.append((child.returncode, out, err))
    return done


def test_concurrent_processes_build_the_read_models_once(tmp_path: Path) -> None:
    _corpus(tmp_path)
    env = clean_env()
    runs = _processes([[sys.executable, "-c", _COLD_BUILD, str(tmp_path)]] * 4, env)
    assert [code for code, _, _ in runs] == [0] * 4, [err for _, _, err in runs]
    built = sorted(json.loads(out) for _, out, _ in runs if json.loads(out) is not None)
    assert built == [4]  # exactly one process built it

    # Stats, search and the listing at once from separate processes: no error, one answer.
    command = [sys.executable, "-m", "pentrace", "--data-root", str(tmp_path)]
    for args in (["stats", "tools", "--json"], ["search", "foo", "--json"], ["sessions", "list"]):
        runs = _processes([[*command, *args]] * 4, env)
        assert [code for code, _, _ in runs] == [0] * 4, [err for _, _, err in runs]
        assert len({out for _, out, _ in runs}) == 1, args
    final = run_pentrace(tmp_path, "stats", "tokens", "--json", env=env)
    assert final.returncode == 0, final.stderr


def test_two_services_on_one_root_answer_concurrent_first_requests_without_an_error(
    tmp_path: Path,
) -> None:
    _corpus(tmp_path, sessions=6)
    sync_ledger(tmp_path, {})  # the read models must catch up from the ledger on first use
    servers = [Server(tmp_path).start(), Server(tmp_path).start()]
    try:
        paths = ("/web/usage?range=all", "/web/traces?q=foo", "/api/v1/stats/tokens?catch_up=1")

        def get(index: int) -> int:
            server = servers[index % 2]
            path = paths[(index // 2) % len(paths)]
            return httpx.get(server.url + path, timeout=300).status_code

        statuses = _at_once(get, 24)
    finally:
        for server in servers:
            server.stop()
    assert statuses == [200] * 24
