"""SessionApplication on real trace files: record, reload, resume, switch model, subagents."""

from __future__ import annotations

import json
import logging
import shutil
import stat
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError

from pentrace.domain.records import TraceRecord
from pentrace.domain.session.aggregate import Session
from pentrace.errors import NotFoundError, ResumeError
from pentrace.infrastructure.eventstore.application import SaveMode, SessionApplication
from pentrace.infrastructure.trace.durability import Durability

START = datetime(2026, 7, 18, 3, 10, 22, tzinfo=UTC)


class Clock:
    """A deterministic clock: each reading is one millisecond after the previous one."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> datetime:
        self.ticks += 1
        return START + timedelta(milliseconds=self.ticks)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def app(tmp_path: Path) -> Iterator[SessionApplication]:
    application = SessionApplication(
        tmp_path / "data", "proj", "agent", durability=Durability.NONE, clock=Clock()
    )
    yield application
    application.close()


def start(app: SessionApplication, workspace: Path, mode: SaveMode = SaveMode.REQUEST) -> Any:
    return app.start_session(
        provider="deepseek",
        model_id="deepseek-v4-pro",
        model_context_window=1_000_000,
        system_prompt="be careful",
        workspace=workspace,
        tools=[{"name": "exec_command", "description": "run"}],
        mode=mode,
    )


def one_request(handle: Any, call_id: str = "call_0", status: str = "completed") -> None:
    handle.record_user_input("Create hello.txt")
    handle.begin_request()
    handle.record_thinking("plan")
    handle.record_tool_call("exec_command", '{"cmd":"true"}', call_id)
    handle.decide_approval(call_id, "allow")
    handle.record_tool_output(call_id, "[no output]")
    handle.record_text("done")
    handle.end_request(status)


def positions_into(sink: list[list[int]]) -> Any:
    def hook(_session_id: str, lines: Sequence[tuple[int, TraceRecord]]) -> None:
        sink.append([position for position, _ in lines])

    return hook


def hooked_app(folder: Path, sink: list[list[int]]) -> SessionApplication:
    """An application whose on_recorded hook appends each save's positions to ``sink``."""
    return SessionApplication(
        folder,
        "proj",
        "agent",
        durability=Durability.NONE,
        clock=Clock(),
        on_recorded=positions_into(sink),
    )


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def kinds(path: Path) -> list[str]:
    return [r["payload"].get("type") or r["type"] for r in records(path)]


def test_a_recorded_session_reloads_from_its_trace(
    app: SessionApplication, workspace: Path
) -> None:
    handle = start(app, workspace)
    one_request(handle)
    one_request(handle, "call_1", status="failed")
    reloaded: Session = app.repository.get(handle.session_id)
    assert reloaded == handle.session
    assert (reloaded.version, reloaded.requests, reloaded.turns) == (18, 2, 1)
    assert handle.trace_path.name == f"{handle.session_id}_001.jsonl"
    assert kinds(handle.trace_path)[:4] == [
        "session_meta",
        "tool_list_ready",
        "text",
        "request_begin",
    ]
    assert records(handle.trace_path)[0]["payload"]["workspace"] == str(workspace)


def test_save_per_request_and_per_event_write_the_same_lines(
    tmp_path: Path, workspace: Path
) -> None:
    calls: dict[str, list[list[int]]] = {}
    traces = []
    for mode in (SaveMode.REQUEST, SaveMode.EVENT):
        sink = calls.setdefault(mode.value, [])
        with hooked_app(tmp_path / mode.value, sink) as application:
            handle = start(application, workspace, mode)
            one_request(handle)
            traces.append([r for r in records(handle.trace_path) if r["type"] != "session_meta"])
    assert traces[0] == traces[1]
    assert calls["request"] == [[1, 2], list(range(3, 11))]
    assert calls["event"] == [[1, 2], *([p] for p in range(3, 11))]


def test_the_ledger_hook_gets_positions_and_lines_and_its_failure_never_fails_a_save(
    tmp_path: Path, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(session_id: str, records: Sequence[tuple[int, TraceRecord]]) -> None:
        raise RuntimeError("ledger down: " + records[0][1].raw.decode())

    with (
        SessionApplication(
            tmp_path / "data",
            "p",
            "a",
            durability=Durability.NONE,
            clock=Clock(),
            on_recorded=broken,
        ) as application,
        caplog.at_level(logging.WARNING),
    ):
        handle = start(application, workspace)
        handle.record_user_input("SECRET-PAYLOAD-TEXT")
        handle.save()
        assert application.repository.get(handle.session_id).version == 3
    assert "on_recorded hook failed for session" in caplog.text
    assert "positions 3-3" in caplog.text
    assert "SECRET-PAYLOAD-TEXT" not in caplog.text


def test_a_stale_aggregate_cannot_overwrite_newer_records(
    app: SessionApplication, workspace: Path
) -> None:
    handle = start(app, workspace)
    stale = app.open_session(handle.session_id)
    handle.record_user_input("first")
    handle.save()
    size = handle.trace_path.stat().st_size
    stale.record_user_input("second")
    with pytest.raises(IntegrityError, match="expected the next record at position 4"):
        stale.save()
    assert handle.trace_path.stat().st_size == size
    assert stale.session.version == 3  # reloaded from the trace after the failed save


def test_resume_closes_a_dangling_compaction_once(app: SessionApplication, workspace: Path) -> None:
    handle = start(app, workspace)
    one_request(handle)
    handle.begin_compaction("context", "summarize", context=900, turns=1)
    handle.begin_request()
    handle.save()
    handle.close()  # the process "dies" here: compaction and request left open

    resumed = app.resume_session(handle.session_id)
    path = resumed.trace_path
    last = records(path)[-1]["payload"]
    assert (last["type"], last["status"], last["reason"], last["mode"]) == (
        "compaction_end",
        "failed",
        "context",
        "summarize",
    )
    assert resumed.result.dangling_compaction is None
    assert resumed.result.session_turns == 1
    resumed.handle.close()

    size = path.stat().st_size
    again = app.resume_session(handle.session_id)
    assert path.stat().st_size == size
    again.handle.record_user_input("carry on")
    again.handle.begin_request()
    again.handle.end_request("completed")
    assert again.trace_path == path
    assert kinds(path)[-3:] == ["text", "request_begin", "request_end"]


def test_after_a_completed_compaction_the_next_save_rotates_and_reload_spans_shards(
    app: SessionApplication, workspace: Path
) -> None:
    handle = start(app, workspace)
    one_request(handle)
    handle.begin_compaction("manual", "discard")
    handle.begin_request()
    handle.end_request("completed")
    handle.end_compaction("completed")
    first = handle.trace_path
    handle.record_user_input("fresh context")
    handle.save()
    second = handle.trace_path
    assert second.name == f"{handle.session_id}_002.jsonl"
    assert kinds(second) == ["session_meta", "tool_list_ready", "text"]
    assert records(second)[0]["payload"] == records(first)[0]["payload"]
    reloaded: Session = app.repository.get(handle.session_id)
    assert (reloaded.version, reloaded.shard_index) == (len(records(first)) + 3, 2)
    resumed = app.resume_session(handle.session_id)
    assert resumed.trace_path == second
    assert [r.raw for r in resumed.result.carry_over] == [second.read_bytes().splitlines()[2]]


def test_starting_a_session_lays_out_a_private_project_config_and_the_agent_folders(
    app: SessionApplication, workspace: Path
) -> None:
    start(app, workspace)
    config = app.root.project_config_path("proj")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    agent = app.root.agent_dir("proj", "agent")
    for folder in ("agent_state", "traces", "scratchpad", "workspaces", "benchmarks", "snapshots"):
        assert (agent / folder).is_dir(), folder


def test_model_switch_starts_a_new_session_pointing_at_the_source(
    app: SessionApplication, workspace: Path
) -> None:
    source = start(app, workspace)
    one_request(source)
    source_path = source.trace_path
    before = source_path.read_bytes()
    switched = app.switch_model(
        source.session_id,
        provider="openai",
        model_id="gpt-6",
        model_context_window=400_000,
        system_prompt="new model",
        text="please continue",
    )
    assert switched.session_id != source.session_id
    assert source_path.read_bytes() == before
    first_input = records(switched.trace_path)[2]["payload"]["text"]
    assert first_input == (
        "[model_switch_from]\n"
        f"session_id: {source.session_id}\n"
        f"trace: {source_path}\n"
        f"workspace: {workspace}\n"
        "previous_model: deepseek/deepseek-v4-pro\n"
        "[/model_switch_from]\n\n"
        "please continue"
    )
    meta = records(switched.trace_path)[0]["payload"]
    assert (meta["provider"], meta["model_id"], meta["workspace"]) == (
        "openai",
        "gpt-6",
        str(workspace),
    )


def test_a_subagent_gets_its_own_trace_and_the_parent_one_pointer(
    app: SessionApplication, workspace: Path
) -> None:
    parent = start(app, workspace)
    parent.record_user_input("delegate")
    parent.begin_request()
    child = app.spawn_subagent(parent, system_prompt="you are a helper")
    child.record_user_input("sub task")
    child.save()
    child_meta = records(child.trace_path)[0]["payload"]
    assert (child_meta["source"], child_meta["workspace"]) == ("subagent", str(workspace))
    pointers = [
        r["payload"] for r in records(parent.trace_path) if r["payload"].get("type") == "subagent"
    ]
    assert pointers == [{"type": "subagent", "session_id": child.session_id}]


def test_resume_refuses_a_latest_shard_without_session_meta(
    app: SessionApplication, workspace: Path
) -> None:
    handle = start(app, workspace)
    handle.close()
    path = handle.trace_path
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines[1:]) + b"\n")
    with pytest.raises(ResumeError, match="expected a session_meta record in the latest shard"):
        app.resume_session(handle.session_id)


def test_resume_refuses_a_meta_without_provider(app: SessionApplication, workspace: Path) -> None:
    handle = start(app, workspace)
    handle.close()
    path = handle.trace_path
    text = path.read_text().replace('"provider":"deepseek",', "", 1)
    path.write_text(text)
    with pytest.raises(ResumeError, match=r"expected session_meta.provider .* found nothing"):
        app.resume_session(handle.session_id)


def test_resume_refuses_when_the_workspace_is_gone(
    app: SessionApplication, workspace: Path
) -> None:
    handle = start(app, workspace)
    handle.close()
    shutil.rmtree(workspace)
    with pytest.raises(ResumeError, match="which no longer exists") as caught:
        app.resume_session(handle.session_id)
    assert caught.value.hint is not None
    assert "switch_model" in caught.value.hint


def test_resume_refuses_when_the_model_is_gone(app: SessionApplication, workspace: Path) -> None:
    handle = start(app, workspace)
    handle.close()
    with pytest.raises(ResumeError, match="deepseek/deepseek-v4-pro, which is no longer"):
        app.resume_session(handle.session_id, model_available=lambda p, m: p != "deepseek")


def test_resuming_an_unknown_session_says_it_is_not_found(app: SessionApplication) -> None:
    with pytest.raises(NotFoundError, match="session session-nope has no trace"):
        app.resume_session("session-nope")


def test_a_foreign_trace_with_unknown_records_still_loads(
    app: SessionApplication, workspace: Path
) -> None:
    handle = start(app, workspace)
    handle.close()
    with handle.trace_path.open("ab") as trace:
        trace.write(b'{"timestamp":"odd","type":"event_msg","payload":{"type":"future_thing"}}\n')
        trace.write(b"[1,2,3]\n")
        trace.write(b"{broken\n")
        trace.write(b'{"type":"event_msg","payload":{"type":"request_begin"}}\n')
    session: Session = app.repository.get(handle.session_id)
    # Two records of ours, two foreign ones, the malformed line skipped, then request_begin.
    assert (session.version, session.requests, session.open_request) == (5, 1, True)
    events = list(app.events.get(handle.session_id, gt=2))
    assert [type(e).__name__ for e in events] == [
        "RecordAppended",
        "RecordAppended",
        "RequestBegan",
    ]
    assert events[0].timestamp == datetime(1970, 1, 1, tzinfo=UTC)  # type: ignore[attr-defined]


def test_a_missing_workspace_is_refused_at_start(app: SessionApplication, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        start(app, tmp_path / "missing")


def test_a_subagent_can_be_spawned_from_a_parent_id(
    app: SessionApplication, workspace: Path
) -> None:
    parent = start(app, workspace)
    parent.close()
    child = app.spawn_subagent(parent.session_id, system_prompt="helper", model_id="small")
    meta = records(child.trace_path)[0]["payload"]
    assert (meta["provider"], meta["model_id"], meta["source"]) == ("deepseek", "small", "subagent")
    assert records(parent.trace_path)[-1]["payload"] == {
        "type": "subagent",
        "session_id": child.session_id,
    }


def test_the_ledger_hook_hears_nothing_from_a_save_that_failed(
    tmp_path: Path, workspace: Path
) -> None:
    heard: list[list[int]] = []
    with SessionApplication(
        tmp_path / "data",
        "p",
        "a",
        durability=Durability.NONE,
        clock=Clock(),
        on_recorded=positions_into(heard),
    ) as application:
        handle = start(application, workspace)
        stale = application.open_session(handle.session_id)
        handle.record_user_input("first")
        handle.save()
        stale.record_user_input("second")
        with pytest.raises(IntegrityError):
            stale.save()
    assert heard == [[1, 2], [3]]


def test_the_direct_save_and_the_library_save_write_the_same_shards(
    tmp_path: Path, workspace: Path
) -> None:
    shards, heard = [], []
    for name in ("direct", "library"):
        sink: list[list[int]] = []
        with hooked_app(tmp_path / name, sink) as application:
            handle = start(application, workspace, SaveMode.MANUAL)
            one_request(handle)
            for compaction in range(2):  # two rotations in one save
                handle.begin_compaction("manual", "discard")
                handle.end_compaction("completed")
                handle.record_user_input(f"fresh context {compaction}")
            if name == "direct":
                handle.save()
            else:
                application.save(handle.session, None)  # two objects: the library's path
            found = application.root.find_shards("proj", "agent", handle.session_id)
            own = (str(tmp_path / name).encode(), handle.session_id.encode())
            shards.append(
                [
                    ref.path.read_bytes().replace(own[0], b"ROOT").replace(own[1], b"SID")
                    for ref in found
                ]
            )
            heard.append(sink)
            assert application.repository.get(handle.session_id) == handle.session
    assert [len(found) for found in shards] == [3, 3]
    assert shards[0] == shards[1]
    total = len(b"".join(shards[0]).splitlines())
    assert heard[0] == heard[1] == [[1, 2], list(range(3, total + 1))]
