"""The Usage page's minute and hour buckets agree with `pentrace stats --by minute|hour`, over
real HTTP, on SQLite and PostgreSQL; and the per-minute tables agree with the per-day ones.

The corpus is written just before the test's own "now" (the page's last hour and last 24
hours are relative to the server's clock); nothing asserts a time.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.sse_harness import Server
from tests.integration.usage_corpus import REVIEWER, REVIEWER_MODEL, build_recent_corpus
from tests.support import cli_json, sync_ledger

_ROW = re.compile(
    r'<tr data-bucket="([^"]+)" data-requests="(\d+)" data-completed="(\d+)" '
    r'data-tokens="(\d+)" data-cost="([0-9.]+)" data-calls="(\d+)" data-failures="(\d+)">'
)
_AXIS = re.compile(
    r'data-size="(\w+)" data-buckets="(\d+)" data-active="(\d+)" '
    r'data-since="([^"]+)" data-until="([^"]+)"'
)


@pytest.fixture
def served(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Server, Path]]:
    root = tmp_path / "data"
    build_recent_corpus(root, datetime.now(UTC))
    sync_ledger(root, env)
    for name, value in env.items():  # the in-process `pentrace stats` reads the same stores
        monkeypatch.setenv(name, value)
    server = Server(root, env=env).start()
    try:
        yield server, root
    finally:
        server.stop()


def _page(server: Server, query: str) -> str:
    answer = httpx.get(f"{server.url}/web/usage?{query}", timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.text


def _buckets(page: str) -> tuple[tuple[str, str, str], dict[str, tuple[Any, ...]]]:
    axis = _AXIS.search(page)
    assert axis is not None
    rows = {
        m[0]: (int(m[1]), int(m[2]), int(m[3]), float(m[4]), int(m[5]), int(m[6]))
        for m in _ROW.findall(page)
    }
    assert len(rows) == int(axis[3])
    return (axis[1], axis[4], axis[5]), rows


def _stats_buckets(root: Path, by: str, since: str, until: str) -> dict[str, tuple[Any, ...]]:
    """What `pentrace stats ... --by minute|hour` says per bucket inside since..until."""
    requests = {r["key"]: r for r in cli_json(root, "stats", "requests", "--by", by)["rows"]}
    tokens = {r["key"]: r for r in cli_json(root, "stats", "tokens", "--by", by)["rows"]}
    cost = {r["key"]: r["cost"] for r in cli_json(root, "stats", "cost", "--by", by)["rows"]}
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for row in cli_json(root, "stats", "tools", "--by", by)["rows"]:
        calls[row["key"]] += row["calls"]
        failures[row["key"]] += row["failures"]
    width = 16 if by == "minute" else 13
    inside = {
        key
        for key in (*requests, *tokens, *calls)
        if since[:width] <= key <= until[:width]
        and (
            requests.get(key, {}).get("requests")
            or tokens.get(key, {}).get("total")
            or tokens.get(key, {}).get("requests")
            or calls[key]
        )
    }
    return {
        key: (
            requests.get(key, {}).get("requests", 0),
            requests.get(key, {}).get("completed", 0),
            tokens.get(key, {}).get("total", 0),
            round(cost.get(key, 0.0), 6),
            calls[key],
            failures[key],
        )
        for key in inside
    }


@pytest.mark.parametrize(("preset", "size"), [("1h", "minute"), ("24h", "hour")])
def test_the_last_hour_and_day_buckets_agree_with_pentrace_stats(
    served: tuple[Server, Path], preset: str, size: str
) -> None:
    server, root = served
    page = _page(server, f"range={preset}")
    (found_size, since, until), rows = _buckets(page)
    assert found_size == size
    expected = _stats_buckets(root, size, since, until)
    assert len(expected) >= 3  # the corpus spreads over several buckets of either size
    assert {key: (*row[:3], round(row[3], 6), *row[4:]) for key, row in rows.items()} == expected
    # The demo session 40 minutes back and the reviewer's last minutes leave empty minutes
    # between them: skipped, with a break mark on the shared axis.
    if size == "minute":
        assert page.count('<g class="break">') == 5 * (len(rows) - 1 - _adjacent(rows))


@pytest.mark.parametrize(("back", "size"), [(timedelta(minutes=50), "minute"), (None, "hour")])
def test_a_custom_range_in_minutes_gets_its_bucket_from_its_length_and_agrees_with_stats(
    served: tuple[Server, Path], back: timedelta | None, size: str
) -> None:
    server, root = served
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    # 50 minutes back, or from the whole hour six hours back (so its first bucket is a
    # whole hour, as `stats --by hour` counts it), to the end of the current minute.
    start = now - back if back else (now - timedelta(hours=6)).replace(minute=0)
    end = now + timedelta(minutes=1)
    query = f"range=custom&since={start:%Y-%m-%dT%H:%M}&until={end:%Y-%m-%dT%H:%M}"
    page = _page(server, query)
    (found_size, since, until), rows = _buckets(page)
    assert (found_size, since, until) == (size, f"{start:%Y-%m-%dT%H:%M}", f"{now:%Y-%m-%dT%H:%M}")
    assert f'value="{start:%Y-%m-%dT%H:%M}"' in page  # the form shows the range it drew
    expected = _stats_buckets(root, size, since, until)
    assert len(expected) >= 3
    assert {key: (*row[:3], round(row[3], 6), *row[4:]) for key, row in rows.items()} == expected


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [
        ("2026-11-28T10:00", "2026-11-28T09:00", "expected the end after the start"),
        ("2026-11-28T10:00", "2026-11-28T10:00", "expected the end after the start"),
        ("yesterday", "2026-11-28T09:00", "since: expected a UTC time YYYY-MM-DDTHH:MM"),
        ("2026-11-28T10:00", "2026-02-30T09:00", "until: expected a UTC time YYYY-MM-DDTHH:MM"),
    ],
)
def test_a_bad_custom_range_is_explained_on_the_page_with_the_input_kept(
    served: tuple[Server, Path], since: str, until: str, message: str
) -> None:
    server, _root = served
    answer = httpx.get(
        f"{server.url}/web/usage",
        params={"range": "custom", "since": since, "until": until},
        timeout=60,
    )
    assert answer.status_code == 400
    page = answer.text
    assert 'role="alert" aria-label="refused range"' in page
    assert message in page
    assert "Traceback" not in page
    assert _AXIS.search(page) is None  # no chart of a range that is not one
    assert 'data-card="all time"' in page  # the rest of the page still shows
    for value in (since, until):
        assert f'value="{value}"' in page  # kept as typed, to be corrected


def _adjacent(rows: dict[str, tuple[Any, ...]]) -> int:
    """How many kept minutes directly follow the kept minute before them."""
    keys = sorted(datetime.fromisoformat(key).replace(tzinfo=UTC) for key in rows)
    return sum(1 for a, b in itertools.pairwise(keys) if (b - a).total_seconds() == 60)


def test_the_model_filter_gives_the_requests_and_success_rate_stats_gives_per_model(
    served: tuple[Server, Path],
) -> None:
    server, root = served
    per_model = {r["key"]: r for r in cli_json(root, "stats", "requests", "--by", "model")["rows"]}
    reviewer = per_model[REVIEWER_MODEL]
    assert reviewer["requests"] > reviewer["completed"] > 0
    page = _page(server, f"range=all&model={REVIEWER_MODEL}")
    card = re.search(r'data-card="all time" data-requests="(\d+)".*?data-completed="(\d+)"', page)
    assert card is not None
    assert (int(card[1]), int(card[2])) == (reviewer["requests"], reviewer["completed"])
    assert f"{reviewer['success_rate'] * 100:.1f}% completed" in page
    by_agent = {r["key"]: r for r in cli_json(root, "stats", "requests", "--by", "agent")["rows"]}
    assert by_agent[REVIEWER[1]]["requests"] == reviewer["requests"]  # one model per agent here


def test_the_model_filter_gives_the_tool_calls_stats_tools_counts_per_model(
    served: tuple[Server, Path],
) -> None:
    server, root = served
    per_model: dict[str, Counter[str]] = {}
    for row in cli_json(root, "stats", "tools", "--by", "model")["rows"]:
        counts = per_model.setdefault(row["key"], Counter())
        counts.update(calls=row["calls"], failures=row["failures"])
    # The demo's model has a failed call, the reviewer's model only calls that succeed.
    assert per_model[REVIEWER_MODEL]["calls"] > 0 == per_model[REVIEWER_MODEL]["failures"]
    assert sum(c["failures"] for c in per_model.values()) > 0
    # The last 24 hours hold every call of the corpus; the page keeps one model's calls in
    # each bucket, and the models' buckets add up to the unfiltered ones.
    _axis, whole = _buckets(_page(server, "range=24h"))
    summed: Counter[str] = Counter()
    for name, counts in per_model.items():
        _axis, rows = _buckets(_page(server, f"range=24h&model={name}"))
        assert sum(row[4] for row in rows.values()) == counts["calls"], name
        assert sum(row[5] for row in rows.values()) == counts["failures"], name
        for key, row in rows.items():
            summed.update({f"{key} calls": row[4], f"{key} failures": row[5]})
    expected: Counter[str] = Counter()
    for key, row in whole.items():
        expected.update({f"{key} calls": row[4], f"{key} failures": row[5]})
    assert +summed == +expected


def test_the_minute_tables_add_up_to_the_day_tables(served: tuple[Server, Path]) -> None:
    _server, root = served
    by_status = cli_json(root, "stats", "requests")["requests"]
    per_minute: Counter[str] = Counter()
    for row in cli_json(root, "stats", "requests", "--by", "minute")["rows"]:
        per_minute.update(row["statuses"])
    assert dict(per_minute) == by_status
    days = cli_json(root, "stats", "tokens", "--by", "day")["rows"]
    minutes = cli_json(root, "stats", "tokens", "--by", "minute")["rows"]
    for name in ("requests", "usage_records", "input", "output", "cache_read", "total"):
        assert sum(r[name] for r in minutes) == sum(r[name] for r in days) > 0, name
    tools = cli_json(root, "stats", "tools", "--by", "minute")
    for name in ("calls", "failures"):
        assert sum(r[name] for r in tools["rows"]) == sum(r[name] for r in tools["tools"]) > 0
