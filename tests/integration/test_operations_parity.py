"""The CLI and the service answer from one application layer (ADR 0036): for the same data
root, the same session document, the same stats document and the same export bytes.

The service is a real ``pentrace serve`` process; the CLI runs in this process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import pentrace
from pentrace.cli.app import app
from pentrace.cli.demo import AGENT, PROJECT, record_demo_session
from pentrace.infrastructure.operations.documents import (
    CLI_ALIASES,
    DETAIL_FIELDS,
    FIELDS,
    SERVICE_ALIASES,
)
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.sse_harness import Server

TOKEN = "tok-Parity7nQ2wE9rT4yU6iO1pA3"
DOCUMENT = [name for name, _, _ in FIELDS]
DETAIL = [*DOCUMENT, *(name for name, _, _ in DETAIL_FIELDS)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    path = tmp_path_factory.mktemp("parity") / "data"
    main, child = record_demo_session(DataRoot(path), datetime(2026, 11, 28, 9, tzinfo=UTC))
    return path, main, child


@pytest.fixture(scope="module")
def server(root: tuple[Path, str, str]) -> Iterator[Server]:
    token_file = root[0].parent / "token"
    token_file.write_text(TOKEN)
    running = Server(root[0], args=["--token-file", str(token_file)]).start(token=TOKEN)
    yield running
    running.stop()


def cli(root: Path, *args: str) -> bytes:
    result = CliRunner().invoke(app, ["--data-root", str(root), *args])
    assert result.exit_code == 0, result.output
    return result.stdout_bytes


def http(server: Server, path: str, **params: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answer = httpx.get(server.url + path, params=params, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer


def _canonical(document: dict[str, object], names: list[str]) -> dict[str, object]:
    return {name: document[name] for name in names}


def test_the_cli_and_the_service_list_the_same_session_documents(
    root: tuple[Path, str, str], server: Server
) -> None:
    path, main, child = root
    listed = json.loads(cli(path, "sessions", "list", "--json", "--sort", "id"))["sessions"]
    served = http(server, "/api/v1/sessions", sort="id").json()["sessions"]
    assert [row["session_id"] for row in listed] == sorted([main, child])
    assert [_canonical(row, DOCUMENT) for row in listed] == [
        _canonical(row, DOCUMENT) for row in served
    ]
    # The library's facade returns the document itself, without old names.
    assert pentrace.open_root(path).sessions(sort="id") == [
        _canonical(row, DOCUMENT) for row in listed
    ]
    # Nothing but the document and each surface's old names.
    assert [set(row) for row in listed] == [{*DOCUMENT, *CLI_ALIASES}] * 2
    assert [set(row) for row in served] == [{*DOCUMENT, *SERVICE_ALIASES}] * 2


def test_the_cli_and_the_service_show_the_same_session_detail(
    root: tuple[Path, str, str], server: Server
) -> None:
    path, main, _ = root
    shown = json.loads(cli(path, "show", main, "--json"))
    served = http(server, f"/api/v1/sessions/{main}").json()
    assert _canonical(shown, DETAIL) == _canonical(served, DETAIL)
    assert pentrace.open_root(path).session(main) == _canonical(shown, DETAIL)
    assert shown["turns"] > 0
    assert shown["shard_files"][0]["path"].startswith(f"{PROJECT}/agents/{AGENT}/traces/")
    assert set(served) == {*DETAIL, *SERVICE_ALIASES}


def test_each_surface_keeps_its_old_names_as_aliases_with_their_old_meaning(
    root: tuple[Path, str, str], server: Server
) -> None:
    path, main, _ = root
    shown = json.loads(cli(path, "show", main, "--json"))
    [listed] = json.loads(cli(path, "sessions", "list", "--json", "--sort", "id"))["sessions"][:1]
    served = http(server, f"/api/v1/sessions/{main}").json()
    for old, new in SERVICE_ALIASES.items():
        assert served[old] == served[new], old
    for old, new in CLI_ALIASES.items():
        assert listed[old] == listed[new], old
    # The names collide: `model` was provider/model_id in the CLI and the bare id in the service;
    # `show --json` `shards` was (and stays, deprecated) the files with absolute paths.
    assert (listed["model"], served["model"]) == ("deepseek/deepseek-v4-pro", "deepseek-v4-pro")
    assert [Path(shard["path"]) for shard in shown["shards"]] == [
        path / shard["path"] for shard in shown["shard_files"]
    ]
    assert served["shards"] == served["shard_count"] == len(shown["shards"])


# Each stat kind, with the grouping asked for (None: the kind does not group).
GROUPINGS = {"tokens": "session", "cost": "day", "tools": None, "requests": None,
             "sessions": "agent", "tree": None}  # fmt: skip


@pytest.mark.parametrize("kind", list(GROUPINGS))
def test_stats_via_the_cli_and_via_http_agree(
    root: tuple[Path, str, str], server: Server, kind: str
) -> None:
    path, by = root[0], GROUPINGS[kind]
    args = [] if by is None else ["--by", by]
    # The CLI indexes the traces first (--sync); the service then catches up on that ledger.
    by_cli = json.loads(cli(path, "stats", kind, *args, "--sync", "--json"))
    query = {} if by is None else {"by": by}
    by_http = http(server, f"/api/v1/stats/{kind}", catch_up="1", **query).json()
    assert by_http == by_cli
    assert any(by_cli.values()), "the demo session gives every stat some rows"


def test_projection_status_via_the_cli_and_via_http_agree(
    root: tuple[Path, str, str], server: Server
) -> None:
    cli(root[0], "stats", "tree", "--sync", "--json")  # every built-in has caught up once
    by_cli = json.loads(cli(root[0], "projections", "status", "--json"))["projections"]
    by_http = http(server, "/api/v1/projections").json()["projections"]
    assert [row.pop("failures") for row in by_http] == [[]] * len(by_cli)
    assert by_http == by_cli
    assert all(row["position"] > 0 for row in by_cli)


@pytest.mark.parametrize(
    ("args", "query"),
    [
        ([], {"redacted": "false"}),
        (["--redacted"], {}),
        (["--shard", "1", "--redacted"], {"shard": "1"}),
    ],
)
def test_a_trace_export_via_the_cli_and_via_http_is_byte_identical(
    root: tuple[Path, str, str], server: Server, args: list[str], query: dict[str, str]
) -> None:
    path, main, _ = root
    exported = cli(path, "export", main, *args)
    served = http(server, f"/api/v1/sessions/{main}/trace", **query).content
    assert exported == served
    assert exported.count(b"\n") > 5


def test_an_archive_via_the_cli_and_via_http_is_byte_identical(
    root: tuple[Path, str, str], server: Server
) -> None:
    path, main, _ = root
    exported = cli(path, "export", main, "--archive")
    # The owner-naming path (ADR 0023) serves the same bytes.
    answer = http(server, f"/api/v1/sessions/{PROJECT}/{AGENT}/{main}/archive")
    assert answer.headers["content-type"] == "application/gzip"
    assert exported == answer.content
    assert exported[:2] == b"\x1f\x8b"
