"""The data layout: paths, name validation, session ids and shard discovery."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

import pytest

from pentrace.errors import InvalidNameError, UsageError
from pentrace.infrastructure.storage.layout import (
    MAX_NAME_BYTES,
    DataRoot,
    ShardRef,
    is_session_id,
    iter_sessions,
    new_session_id,
    parse_session_id,
    parse_shard_name,
    validate_name,
)

SID = "session-2026-07-18-11-10-22-3f8a1c2d"
OTHER = "session-2026-07-19-08-00-00-0badc0de"


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "data")


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


# --- name validation -------------------------------------------------------------------------

BAD_NAMES = [
    ("", "empty"),
    (".", "relative path component"),
    ("..", "relative path component"),
    ("a/b", "path separator"),
    ("../../etc", "path separator"),
    ("/etc", "path separator"),
    ("a\\b", "path separator"),
    ("a\x00b", "NUL"),
    ("a\nb", "control character"),
    ("tab\there", "control character"),
    ("del\x7f", "control character"),
    ("c1\x85", "control character"),
    ("C:evil", "drive"),
    ("x" * (MAX_NAME_BYTES + 1), "longer than"),
    ("é" * (MAX_NAME_BYTES // 2 + 1), "longer than"),
]


@pytest.mark.parametrize(("value", "problem"), BAD_NAMES)
@pytest.mark.parametrize("kind", ["project", "agent", "session id", "workspace"])
def test_an_unsafe_name_is_refused_naming_its_kind_and_problem(
    kind: str, value: str, problem: str
) -> None:
    with pytest.raises(
        InvalidNameError, match=f"invalid {kind} name .*{re.escape(problem)}"
    ) as info:
        validate_name(kind, value)
    assert info.value.hint is not None
    assert "'..'" in info.value.hint


def test_a_long_offending_value_is_truncated_in_the_message() -> None:
    with pytest.raises(InvalidNameError) as info:
        validate_name("agent", "a" * 5000)
    assert len(str(info.value)) < 200
    assert "..." in str(info.value)


@pytest.mark.parametrize(
    "value", ["default_project", "agent-1", SID, "naïve", "a.b", "...", "x" * MAX_NAME_BYTES]
)
def test_ordinary_names_are_accepted_unchanged(value: str) -> None:
    assert validate_name("project", value) == value


@pytest.mark.parametrize(("value", "_problem"), BAD_NAMES[:8])
def test_nothing_is_written_when_a_name_is_refused(
    root: DataRoot, value: str, _problem: str
) -> None:
    root.path.mkdir()
    calls: list[Callable[[], object]] = [
        lambda: root.ensure_agent_dirs(value, "agent"),
        lambda: root.ensure_agent_dirs("project", value),
        lambda: root.ensure_project_config(value),
        lambda: root.new_temp_workspace("project", value),
        lambda: root.shard_path("project", "agent", value, 1, date(2026, 7, 18)),
        lambda: root.scratchpad_dir("project", "agent", value),
    ]
    for call in calls:
        with pytest.raises(InvalidNameError):
            call()
    assert list(root.path.iterdir()) == []


# --- the data root and its paths -------------------------------------------------------------


def test_the_root_comes_from_penguin_home(tmp_path: Path) -> None:
    assert DataRoot.from_env({"PENGUIN_HOME": str(tmp_path / "home")}).path == tmp_path / "home"


def test_the_root_defaults_to_dot_penguin_data_in_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert DataRoot.from_env({}).path == tmp_path / ".penguin" / "data"
    assert DataRoot.from_env({"PENGUIN_HOME": ""}).path == tmp_path / ".penguin" / "data"


def test_a_tilde_in_penguin_home_is_expanded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert DataRoot.from_env({"PENGUIN_HOME": "~/elsewhere"}).path == tmp_path / "elsewhere"


def test_paths_follow_the_penguinharness_layout(root: DataRoot) -> None:
    agent = root.path / "proj" / "agents" / "bot"
    assert root.project_config_path("proj") == root.path / "proj" / ".project_config.toml"
    assert root.agent_dir("proj", "bot") == agent
    assert root.agent_state_dir("proj", "bot") == agent / "agent_state"
    assert root.traces_dir("proj", "bot") == agent / "traces"
    assert root.scratchpad_dir("proj", "bot", SID) == agent / "scratchpad" / SID
    assert (
        root.truncated_output_dir("proj", "bot", SID)
        == agent / "scratchpad" / SID / "truncated-tool-output"
    )
    assert root.shared_env_dir("proj", "bot") == agent / "shared_env"
    assert root.benchmarks_dir("proj", "bot") == agent / "benchmarks"
    assert root.snapshots_dir("proj", "bot") == agent / "snapshots"
    assert (
        root.workspace_dir("proj", "bot", "tmp-0123abcd") == agent / "workspaces" / "tmp-0123abcd"
    )


@pytest.mark.parametrize(
    ("index", "suffix"), [(1, "_001"), (12, "_012"), (999, "_999"), (1000, "_1000")]
)
def test_a_shard_path_has_a_date_folder_and_a_three_digit_index(
    root: DataRoot, index: int, suffix: str
) -> None:
    path = root.shard_path("proj", "bot", SID, index, date(2026, 7, 8))
    assert path == root.traces_dir("proj", "bot") / "2026-07-08" / f"{SID}{suffix}.jsonl"
    assert parse_shard_name(path.name) == (SID, index)


@pytest.mark.parametrize("index", [0, -1, True])
def test_a_shard_index_below_one_is_refused(root: DataRoot, index: int) -> None:
    with pytest.raises(UsageError, match="shard index >= 1"):
        root.shard_path("proj", "bot", SID, index, date(2026, 7, 8))


def test_the_project_config_is_created_private_and_never_overwritten(root: DataRoot) -> None:
    path = root.ensure_project_config("proj")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_text('model = "x"\n')
    assert root.ensure_project_config("proj") == path
    assert path.read_text() == 'model = "x"\n'


def test_agent_dirs_are_created_except_shared_env(root: DataRoot) -> None:
    agent = root.ensure_agent_dirs("proj", "bot")
    created = sorted(p.name for p in agent.iterdir())
    assert created == [
        "agent_state",
        "benchmarks",
        "scratchpad",
        "snapshots",
        "traces",
        "workspaces",
    ]
    assert root.ensure_agent_dirs("proj", "bot") == agent


def test_a_temporary_workspace_is_a_fresh_tmp_hex_folder(root: DataRoot) -> None:
    first = root.new_temp_workspace("proj", "bot")
    second = root.new_temp_workspace("proj", "bot")
    assert re.fullmatch(r"tmp-[0-9a-f]{8}", first.name)
    assert first != second
    assert first.is_dir()
    assert second.is_dir()
    assert first.parent == root.workspaces_dir("proj", "bot")


def test_a_temporary_workspace_with_a_used_token_is_refused(root: DataRoot) -> None:
    made = root.new_temp_workspace("proj", "bot", "0123abcd")
    assert made.name == "tmp-0123abcd"
    with pytest.raises(UsageError, match="already exists"):
        root.new_temp_workspace("proj", "bot", "0123abcd")


@pytest.mark.parametrize("token", ["0123ABCD", "0123abc", "../../x", "0123abcde"])
def test_a_malformed_token_is_refused(root: DataRoot, token: str) -> None:
    with pytest.raises(InvalidNameError, match="8 lowercase hex"):
        root.new_temp_workspace("proj", "bot", token)
    with pytest.raises(InvalidNameError, match="8 lowercase hex"):
        new_session_id(datetime(2026, 7, 18), token)


# --- session ids and shard names -------------------------------------------------------------


def test_a_session_id_is_built_from_the_creation_time_and_a_token() -> None:
    assert new_session_id(datetime(2026, 7, 18, 11, 10, 22), "3f8a1c2d") == SID


def test_a_session_id_gets_a_random_token_by_default() -> None:
    made = new_session_id(datetime(2026, 7, 18, 11, 10, 22))
    assert is_session_id(made)
    assert made.startswith("session-2026-07-18-11-10-22-")


def test_a_session_id_parses_back_into_its_parts() -> None:
    parts = parse_session_id(SID)
    assert parts.created == datetime(2026, 7, 18, 11, 10, 22)
    assert parts.token == "3f8a1c2d"


@pytest.mark.parametrize(
    "value",
    [
        "imported-run-7",
        "session-2026-13-18-11-10-22-3f8a1c2d",
        "session-2026-07-18-11-10-22-3F8A1C2D",
        "session-2026-07-18-11-10-22-3f8a1c2",
        f"{SID}-extra",
        "",
    ],
)
def test_other_ids_are_not_native_session_ids(value: str) -> None:
    assert not is_session_id(value)
    with pytest.raises(InvalidNameError, match="expected a session id like"):
        parse_session_id(value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (f"{SID}_001.jsonl", (SID, 1)),
        ("my_import_007.jsonl", ("my_import", 7)),
        (f"{SID}_01.jsonl", None),
        (f"{SID}_0001.jsonl", None),
        (f"{SID}_000.jsonl", None),
        (f"{SID}_001.json", None),
        (f"{SID}.jsonl", None),
        ("_001.jsonl", None),
        (f"{SID}_00١.jsonl", None),
        (f"{SID}_001.jsonl.tmp", None),
    ],
)
def test_shard_names_parse_only_in_their_canonical_form(
    name: str, expected: tuple[str, int] | None
) -> None:
    assert parse_shard_name(name) == expected


# --- discovery -------------------------------------------------------------------------------


def test_shards_are_found_across_date_folders_sorted_by_index(root: DataRoot) -> None:
    third = touch(root.shard_path("proj", "bot", SID, 3, date(2026, 7, 20)))
    first = touch(root.shard_path("proj", "bot", SID, 1, date(2026, 7, 18)))
    second = touch(root.shard_path("proj", "bot", SID, 2, date(2026, 7, 19)))
    touch(root.shard_path("proj", "bot", OTHER, 1, date(2026, 7, 19)))
    assert root.find_shards("proj", "bot", SID) == [
        ShardRef(first, 1, date(2026, 7, 18)),
        ShardRef(second, 2, date(2026, 7, 19)),
        ShardRef(third, 3, date(2026, 7, 20)),
    ]


def test_the_latest_shard_may_sit_in_an_older_date_folder(root: DataRoot) -> None:
    # PenguinHarness PR #271: a rotated shard landed in a folder older than the first shard's.
    touch(root.shard_path("proj", "bot", SID, 1, date(2026, 7, 18)))
    rotated = touch(root.shard_path("proj", "bot", SID, 2, date(2026, 7, 17)))
    latest = root.latest_shard("proj", "bot", SID)
    assert latest == ShardRef(rotated, 2, date(2026, 7, 17))


def test_a_session_without_shards_has_no_latest_shard(root: DataRoot) -> None:
    assert root.find_shards("proj", "bot", SID) == []
    assert root.latest_shard("proj", "bot", SID) is None


def test_discovery_ignores_what_is_not_a_shard(root: DataRoot) -> None:
    traces = root.traces_dir("proj", "bot")
    shard = touch(root.shard_path("proj", "bot", SID, 1, date(2026, 7, 18)))
    touch(traces / "2026-07-18" / "notes.txt")
    touch(traces / "2026-07-18" / f"{SID}_002.jsonl.partial")
    (traces / "2026-07-18" / f"{SID}_003.jsonl").mkdir()
    touch(traces / "not-a-date" / f"{SID}_004.jsonl")
    touch(traces / "2026-02-30" / f"{SID}_005.jsonl")
    touch(traces / f"{SID}_006.jsonl")
    assert root.find_shards("proj", "bot", SID) == [ShardRef(shard, 1, date(2026, 7, 18))]


def test_sessions_are_listed_per_project_and_agent_in_name_order(root: DataRoot) -> None:
    touch(root.shard_path("beta", "bot", SID, 1, date(2026, 7, 18)))
    touch(root.shard_path("alpha", "zed", OTHER, 1, date(2026, 7, 19)))
    touch(root.shard_path("alpha", "bot", OTHER, 1, date(2026, 7, 19)))
    touch(root.shard_path("alpha", "bot", SID, 2, date(2026, 7, 17)))
    touch(root.shard_path("alpha", "bot", SID, 1, date(2026, 7, 18)))
    found = [
        (s.project, s.agent, s.session_id, [x.index for x in s.shards]) for s in iter_sessions(root)
    ]
    assert found == [
        ("alpha", "bot", SID, [1, 2]),
        ("alpha", "bot", OTHER, [1]),
        ("alpha", "zed", OTHER, [1]),
        ("beta", "bot", SID, [1]),
    ]


def test_sessions_can_be_listed_for_one_project_or_agent(root: DataRoot) -> None:
    touch(root.shard_path("alpha", "bot", SID, 1, date(2026, 7, 18)))
    touch(root.shard_path("alpha", "zed", OTHER, 1, date(2026, 7, 19)))
    touch(root.shard_path("beta", "bot", OTHER, 1, date(2026, 7, 18)))
    assert [s.session_id for s in iter_sessions(root.path, project="alpha", agent="zed")] == [OTHER]
    assert [(s.project, s.agent) for s in root.iter_sessions(agent="bot")] == [
        ("alpha", "bot"),
        ("beta", "bot"),
    ]
    assert list(root.iter_sessions(project="missing")) == []


def test_listing_skips_folders_whose_names_are_unsafe(root: DataRoot) -> None:
    touch(root.shard_path("alpha", "bot", SID, 1, date(2026, 7, 18)))
    touch(
        root.path
        / "bad\x01project"
        / "agents"
        / "bot"
        / "traces"
        / "2026-07-18"
        / f"{SID}_001.jsonl"
    )
    touch(root.path / "a-file-not-a-project")
    assert [s.project for s in iter_sessions(root)] == ["alpha"]


def test_listing_a_missing_root_finds_nothing(tmp_path: Path) -> None:
    assert list(iter_sessions(tmp_path / "nowhere")) == []


def test_listing_refuses_an_unsafe_filter(root: DataRoot) -> None:
    with pytest.raises(InvalidNameError, match="invalid project name"):
        list(iter_sessions(root, project=".."))


def test_discovery_scans_each_date_folder_once(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    for day in range(1, 6):
        touch(root.shard_path("proj", "bot", SID, day, date(2026, 7, day)))
    calls: list[str] = []
    real = os.scandir

    def counting(path: str | os.PathLike[str]) -> object:
        calls.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    assert [s.index for s in root.find_shards("proj", "bot", SID)] == [1, 2, 3, 4, 5]
    assert len(calls) == len(set(calls)) == 6
