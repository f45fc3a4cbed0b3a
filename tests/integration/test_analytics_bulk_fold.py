"""The token projection's bulk fold (ADR 0062) leaves exactly the rows its handlers leave.

Each data root is built cold twice into two analytics databases: once by
``TokenUse`` (its bulk fold) and once by a subclass that declares none (the
per-event path of ADR 0050: envelope, redaction, handlers).  Their tables,
trace marks and reports must be equal.  The traces are generated (hypothesis:
odd timestamps and counts, secrets in model, provider, agent and texts,
escapes, torn tails) and the PenguinHarness fixtures.  SQLite always;
PostgreSQL when configured.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.cold import ColdReport, cold_build
from pentrace.infrastructure.analytics.cold.bulkfold import ColdSession, bulk_fold_of
from pentrace.infrastructure.analytics.examples import dump
from pentrace.infrastructure.analytics.failures import read_failures
from pentrace.infrastructure.analytics.readmodel import read_marks
from pentrace.infrastructure.analytics.runner import open_projection
from pentrace.infrastructure.storage.layout import iter_sessions
from pentrace.infrastructure.trace.reader import read_session
from pentrace.testing.files import write_shards
from tests.integration.test_bulk_rows_reference import HARNESS_TRACES, NAMED_SECRETS, line
from tests.property.test_event_mapping_header import SECRETS
from tests.support import NO_POSTGRES, POSTGRES_URL

Urls = Callable[[], tuple[str, str]]


class _PerEventTokens(TokenUse):
    """The token projection without a bulk fold of its own: built by its handlers."""


def _urls_sqlite(root: Path) -> Urls:
    count = iter(range(1_000_000))

    def pair() -> tuple[str, str]:
        number = next(count)
        return (
            f"sqlite:///{root / f'bulk-{number}.db'}",
            f"sqlite:///{root / f'per-event-{number}.db'}",
        )

    return pair


@contextlib.contextmanager
def _urls_postgres() -> Iterator[Urls]:
    assert POSTGRES_URL
    plain = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://")
    made: list[str] = []

    def schema() -> str:
        name = f"bulk_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        made.append(name)
        return f"{POSTGRES_URL}?options=-csearch_path%3D{name}"

    def pair() -> tuple[str, str]:
        return schema(), schema()

    pair.postgres = True  # type: ignore[attr-defined]
    try:
        yield pair
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            for name in made:
                conn.execute(f"DROP SCHEMA {name} CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Urls]:
    if request.param == "sqlite":
        yield _urls_sqlite(tmp_path)
        return
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    with _urls_postgres() as pair:
        yield pair


def _built(root: Path, url: str, projection: type[TokenUse], workers: int) -> Any:
    env = {"PENTRACE_ANALYTICS_URL": url}
    report = cold_build(projection, data_root=root, env=env, workers=workers)
    assert report is not None
    view = open_projection(projection, root, env).view
    try:
        marks = read_marks(view.db, projection.name)
        failed = [
            (f.stream_id, f.sequence, f.event_type) for f in read_failures(view.db, projection.name)
        ]
    finally:
        view.db.close()
    return report, dump(projection, root, env), (marks, sorted(failed))


def assert_bulk_equals_per_event(root: Path, urls: Urls, workers: int = 1) -> ColdReport:
    """Build ``root`` both ways; returns the bulk fold's report."""
    bulk_url, per_event_url = urls()
    bulk, bulk_rows, bulk_marks = _built(root, bulk_url, TokenUse, workers)
    per_event, rows, marks = _built(root, per_event_url, _PerEventTokens, workers)
    # The bulk fold builds it unless the database refuses a value (PostgreSQL: a NUL in a
    # text): then the per-event path records the event it refuses (ADR 0032), as it would.
    assert (bulk.bulk, per_event.bulk) == (not marks[1], False)
    assert bulk_rows == rows
    assert bulk_marks == marks
    assert (bulk.sessions, bulk.events, bulk.failures) == (
        per_event.sessions,
        per_event.events,
        per_event.failures,
    )
    return bulk  # type: ignore[no-any-return]


# -- generated traces ----------------------------------------------------------------------
_encode = msgspec.json.encode
_STAMPS = (
    "2026-11-30T08:00:01.250Z",
    "2026-11-30T23:59:59.999+00:00",
    "2026-12-01T01:30:00+02:00",  # the day before, in UTC
    "2026-11-30T08:00:01",  # naive: UTC
    "1969-12-31T23:59:59Z",  # before the epoch
    "yesterday",
    "",
)
_texts = st.sampled_from(SECRETS) | st.text(max_size=10) | st.sampled_from(["gpt-5", "unknown"])
_models = _texts | st.none() | st.integers(-3, 3) | st.just(["gpt"]) | st.just({"id": "m"})
_counts = (
    st.integers(0, 5000)
    | st.integers(-5, -1)
    | st.just(2**63)
    | st.floats(0, 1e6, allow_nan=False)
    | st.booleans()
    | st.sampled_from(["12", None, SECRETS[0]])
)
_requests = (
    st.fixed_dictionaries(
        {},
        optional={k: _counts for k in ("output", "cache_read", "cache_write", "total")},
    )
    | st.none()
    | st.just("request")
    | st.just([1, 2])
)


@st.composite
def _record(draw: st.DrawFn, second: int) -> bytes:
    stamp = draw(st.sampled_from(_STAMPS) | st.none() | st.just(42))
    kind = draw(st.sampled_from(["meta", "begin", "usage", "usage", "text", "end", "raw"]))
    value: dict[str, Any] = {} if stamp is None else {"timestamp": stamp}
    if kind == "meta":
        payload: Any = {"provider": draw(_models), "model_id": draw(_models)}
        if draw(st.booleans()):
            payload["workspace"] = draw(st.sampled_from(["/srv/app", f"/home/{SECRETS[1]}"]))
        payload = draw(st.just(payload) | st.none() | st.just("meta"))
        value.update(type="session_meta", payload=payload)
    elif kind == "begin":
        value.update(type="event_msg", payload={"type": "request_begin"})
    elif kind == "usage":
        payload = {"type": "token_usage", "request": draw(_requests)}
        if draw(st.booleans()):
            payload["note"] = draw(_texts)
        value.update(type="event_msg", payload=payload)
    elif kind == "text":
        text = {"type": "text", "role": "assistant", "text": draw(_texts)}
        value.update(type="model_msg", payload=text)
    elif kind == "end":
        value.update(type="event_msg", payload={"type": "request_end", "status": "completed"})
    else:  # lines as other writers spell them: escapes, numbers msgspec refuses, blanks
        return draw(
            st.sampled_from(
                [
                    b'{"type":"session_meta","payload":{"model_id":"gpt\\u002d5"}}',
                    b'{"type":"session_meta","payload":{"model_id":"sk-\\u0070roj-'
                    + b"a" * 40
                    + b'"}}',
                    b'{"timestamp":"2026-11-30T08:00:00Z","type":"event_msg",'
                    b'"payload":{"type":"token_usage","request":{"total":1e400,"output":3}}}',
                    b'{"type":"event_msg","payload":{"type":"token_usage","request":'
                    b'{"total":9,"output":1,"total":12}}}',
                    b'{"type":"event_msg","payload":{"type":"request_begin","x":"\\ud800"}}',
                    b"",
                    b"42",
                ]
            )
        )
    del second
    return _encode(value)


@st.composite
def _session(draw: st.DrawFn) -> tuple[list[bytes], bytes | None]:
    size = draw(st.integers(0, 14))
    lines = [draw(_record(second)) for second in range(size)]
    torn = draw(st.none() | st.just(b'{"timestamp":"2026-11-30T08:00:00Z","type":"event_msg","pa'))
    return lines, torn


_agents = st.sampled_from(["coder", "reviewer", "password", f"a-{NAMED_SECRETS[0]}"])
_layouts = st.lists(
    st.tuples(
        st.sampled_from(["acme", "token"]), _agents, st.sampled_from(["s1", "s2"]), _session()
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda item: item[:3],
)


def _write(
    root: Path, layout: list[tuple[str, str, str, tuple[list[bytes], bytes | None]]]
) -> None:
    for project, agent, session_id, (lines, torn) in layout:
        [path] = write_shards(root, project, agent, session_id, [lines])
        if torn is not None:
            with path.open("ab") as handle:
                handle.write(torn)


@pytest.mark.parametrize("workers", [1, 2])
def test_generated_traces_give_the_handlers_rows(tmp_path: Path, urls: Urls, workers: int) -> None:
    count = iter(range(1_000_000))

    @settings(
        max_examples=(8 if getattr(urls, "postgres", False) else 60) // workers,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(layout=_layouts)
    def check(layout: list[tuple[str, str, str, tuple[list[bytes], bytes | None]]]) -> None:
        root = tmp_path / f"root-{next(count)}"
        _write(root, layout)
        assert_bulk_equals_per_event(root, urls, workers)

    check()


# -- the PenguinHarness fixtures and named cases ----------------------------------------------
def test_penguin_harness_traces_give_the_handlers_rows(tmp_path: Path, urls: Urls) -> None:
    root = tmp_path / "root"
    for trace in HARNESS_TRACES:
        lines = trace.read_bytes().split(b"\n")
        write_shards(root, "harness", "coder", f"session-{trace.stem}", [lines])
        # The same session id under another agent is another session (ADR 0023).
        write_shards(
            root, "harness", "reviewer", f"session-{trace.stem}", [lines[: len(lines) // 2]]
        )
    [torn] = write_shards(
        root, "harness", "torn", "session-torn", [HARNESS_TRACES[0].read_bytes().split(b"\n")]
    )
    with torn.open("ab") as handle:
        handle.write(b'{"timestamp":"2026-11-30T08:00:00Z","type":"event_msg","payload":{"ty')
    report = assert_bulk_equals_per_event(root, urls)
    assert report.events > 0
    assert report.sessions == 2 * len(HARNESS_TRACES) + 1


def test_secrets_in_model_and_agent_are_redacted_in_the_read_model(
    tmp_path: Path, urls: Urls
) -> None:
    root = tmp_path / "root"
    secret = SECRETS[0]
    lines = [
        line("session_meta", {"provider": f"acme {secret}", "model_id": secret}, 0),
        line("event_msg", {"type": "request_begin"}, 1),
        line("event_msg", {"type": "token_usage", "request": {"total": 9, "output": 2}}, 2),
    ]
    agent = f"a-{NAMED_SECRETS[0]}"
    write_shards(root, "acme", agent, "s1", [lines])
    write_shards(root, "acme", "coder", "s1", [lines])
    assert_bulk_equals_per_event(root, urls)
    bulk_url, _ = urls()
    _built(root, bulk_url, TokenUse, 1)
    stored = repr(dump(TokenUse, root, {"PENTRACE_ANALYTICS_URL": bulk_url}))
    assert "[redacted:" in stored
    assert "sk-proj-Q7vX2mN9" in secret
    assert "sk-proj-Q7vX2mN9" not in stored
    token = NAMED_SECRETS[0].split()[-1]
    assert token[:20] not in stored


def test_a_session_reads_its_own_bytes_only_when_the_screen_clears_it(tmp_path: Path) -> None:
    clean = [
        line("session_meta", {"model_id": "gpt-5"}, 0),
        line("event_msg", {"type": "request_begin"}, 1),
    ]
    dirty = [line("session_meta", {"model_id": SECRETS[0]}, 0), *clean[1:]]
    write_shards(tmp_path, "acme", "coder", "clean", [clean])
    write_shards(tmp_path, "acme", "coder", "dirty", [dirty])
    write_shards(tmp_path, "acme", f"a-{NAMED_SECRETS[0]}", "named", [clean])
    untouched = {}
    for ref in iter_sessions(tmp_path):
        session = ColdSession(ref, TokenUse.topics)
        records = list(read_session(ref.shards))
        session.see(1, records[0])
        untouched[ref.key.agent[:5], ref.key.session_id] = [session.untouched(r) for r in records]
    assert untouched == {
        ("coder", "clean"): [True, True],
        ("coder", "dirty"): [False, True],
        (f"a-{NAMED_SECRETS[0]}"[:5], "named"): [False, False],  # its key holds a secret
    }


def test_only_the_class_that_declares_a_bulk_fold_has_one() -> None:
    assert bulk_fold_of(TokenUse) is not None
    assert bulk_fold_of(_PerEventTokens) is None  # its handlers may differ
