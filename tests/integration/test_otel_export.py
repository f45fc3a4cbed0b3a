"""``pentrace otel export`` against a real OTLP/HTTP receiver on a loopback port.

The receiver decodes what the SDK's exporter sends and keeps every copy, so the
tests see what a receiver that keeps one span per id would hold, and whether a
span ever came twice with different content.  The live exporter runs on a
thread and, for the crash test, as a real process killed with SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.export import (
    SpanSender,
    export_sessions,
    open_sender,
    session_records,
)
from pentrace.infrastructure.otel.live import CursorStore, LiveExporter, cursor_path
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import clean_text
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.ingest_harness import (
    AGENT,
    PROJECT,
    SESSION,
    FollowerProcess,
    append,
    held_positions,
    shard,
)
from tests.integration.sse_harness import Server
from tests.otel_support import (
    CHILD_ID,
    FIXTURES,
    PARENT_ID,
    ReceivedSpan,
    Receiver,
    memory_sender,
    rich_root,
    sdk_shape,
    turns,
    write_slowly,
)
from tests.support import assert_clean_error, clean_env, cli_ok, run_pentrace

pytestmark = pytest.mark.usefixtures("own_stores")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    rich_root(data)
    return data


def expected(root: Path, *, content: bool = False) -> dict[str, tuple[Any, ...]]:
    """What a batch export of the root sends, span by span (through the SDK, in memory)."""
    sender, exporter = memory_sender()
    data = DataRoot(root)
    export_sessions(data, data.iter_sessions(), sender, content=content, settle_s=0)
    return {f"{s.context.span_id:016x}": sdk_shape(s) for s in exporter.get_finished_spans()}


def held_shapes(receiver: Receiver) -> dict[str, tuple[Any, ...]]:
    return {span_id: sdk_shape(span) for span_id, span in receiver.held().items()}


def assert_copies_agree(receiver: Receiver) -> None:
    """Every copy of a span id the receiver got is the same span: keeping one loses nothing."""
    first: dict[str, tuple[Any, ...]] = {}
    for span in receiver.copies:
        shape = sdk_shape(span)
        assert first.setdefault(span.span_id, shape) == shape


def test_export_sends_every_span_and_exporting_again_sends_the_same_ids(
    root: Path, receiver: Receiver
) -> None:
    report = json.loads(
        cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0", "--json").stdout
    )
    want = expected(root)
    assert report["spans"] == len(want) == len(receiver.copies)
    assert held_shapes(receiver) == want
    assert report["failed_sessions"] == []
    # one session per fixture trace, plus the generated parent and its subagent
    assert report["sessions"] == len(list(FIXTURES.glob("*.jsonl"))) + 2
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    assert len(receiver.copies) == 2 * len(want)
    assert held_shapes(receiver) == want
    assert_copies_agree(receiver)
    assert {span.resource for span in receiver.copies} == {receiver.copies[0].resource}
    assert dict(receiver.copies[0].resource)["service.name"] == "pentrace"


def test_a_subagent_session_is_a_child_of_the_call_that_started_it(
    root: Path, receiver: Receiver
) -> None:
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    held = receiver.held()
    child_tasks = [
        s
        for s in held.values()
        if s.attributes.get("gen_ai.conversation.id") == f"generated/reviewer/{CHILD_ID}"
        and s.name.startswith("invoke_agent")
    ]
    (task,) = child_tasks
    spawner = held[task.parent_id]
    assert spawner.name == "execute_tool run_subagent"
    assert spawner.attributes["gen_ai.conversation.id"] == f"generated/assistant/{PARENT_ID}"
    assert task.trace_id == spawner.trace_id
    root_task = held[spawner.parent_id]
    assert root_task.parent_id == ""
    assert task.attributes["session.id"] == f"generated/assistant/{PARENT_ID}"
    # Every parent of every span is held.
    assert all(s.parent_id == "" or s.parent_id in held for s in held.values())


def test_naming_a_subagent_alone_still_places_it_under_its_parent(
    root: Path, receiver: Receiver
) -> None:
    cli_ok(root, "otel", "export", CHILD_ID, "--endpoint", receiver.url, "--settle", "0")
    parents = {s.parent_id for s in receiver.held().values() if s.name.startswith("invoke")}
    want = expected(root)
    assert parents <= set(want)  # the parent's spawning span, though it was not sent now
    assert len(parents) == 1


def test_content_only_with_the_option_and_redacted(root: Path, receiver: Receiver) -> None:
    secret = "ghp_" + "Zy9Xw8Vu7Ts6Rq5Po4Nm" + "3Lk2Ji1Hg0FeDcBa9876"
    pt.write_trace(
        root,
        [pt.StartSession(), pt.UserInput(f"deploy with {secret}"), pt.BeginRequest(),
         pt.ToolCall("c1", "exec_command", json.dumps({"cmd": f"login {secret}"})),
         pt.ToolOutput("c1", f"logged in as {secret}"), pt.EndRequest("completed")],
        project="secret", agent="a", session_id="session-2026-07-18-11-10-22-0000cccc",
    )  # fmt: skip
    cli_ok(root, "otel", "export", "-p", "secret", "--endpoint", receiver.url, "--settle", "0")
    plain = list(receiver.copies)
    assert not any(k.endswith(".messages") for s in plain for k in s.attributes)
    receiver.copies.clear()
    cli_ok(root, "otel", "export", "-p", "secret", "--content", "--endpoint", receiver.url,
           "--settle", "0")  # fmt: skip
    full = list(receiver.copies)
    keys = {k for s in full for k in s.attributes}
    assert {
        "gen_ai.input.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    } <= keys
    everything = repr([(s.name, s.attributes, s.status_message) for s in plain + full])
    assert secret not in everything
    assert "[redacted:github_token]" in everything


def test_since_and_until_pick_traces_by_when_their_task_began(
    root: Path, receiver: Receiver
) -> None:
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0",
           "--since", "2026-07-18T03:10:22.540Z")  # fmt: skip
    starts = {s.trace_id: s.start for s in receiver.held().values() if s.parent_id == ""}
    assert starts
    assert min(starts.values()) >= 1784344222540 * 10**6
    receiver.copies.clear()
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0",
           "--until", "2000-01-01")  # fmt: skip
    assert receiver.copies == []


def test_a_receiver_that_refuses_ends_the_export_with_one_clear_error(
    root: Path, receiver: Receiver
) -> None:
    receiver.refuse = True
    env = clean_env(OTEL_EXPORTER_OTLP_TIMEOUT="1")
    done = run_pentrace(
        root, "otel", "export", "--endpoint", receiver.url, "--settle", "0", env=env
    )
    assert_clean_error(done, 1, f"the receiver at {receiver.url}/v1/traces did not accept")
    assert receiver.copies == []


def test_a_bad_endpoint_or_protocol_is_a_usage_error(root: Path) -> None:
    done = run_pentrace(root, "otel", "export", "--endpoint", "ftp://user:hunter2@example/")
    assert_clean_error(done, 2, "--endpoint: expected an http:// or https:// URL")
    assert "hunter2" not in done.stderr
    env = clean_env(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc")
    done = run_pentrace(root, "otel", "export", env=env)
    assert_clean_error(done, 2, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc")


def _wait_until(check: Any, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return bool(check())


def test_live_export_catches_up_after_the_receiver_refused_and_went_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    root = tmp_path / "data"
    rich_root(root)
    receiver = Receiver().start()
    sender = open_sender(receiver.url)
    store = CursorStore(cursor_path(root), sender.where)
    # The exporter's clock stands still while the harness writes: nothing settles early,
    # however slowly a loaded machine runs the writer.
    now = [0.0]
    exporter = LiveExporter(
        DataRoot(root), sender, store, settle_s=1.0, interval=0.05, clock=lambda: now[0]
    )
    thread = exporter.start()
    key = SessionKey("live", "assistant", "session-2026-07-18-11-10-22-0000dddd")
    try:
        writer = threading.Thread(target=write_slowly, args=(root, key, turns(6), 0.02))
        writer.start()
        assert _wait_until(lambda: len(receiver.copies) > 3)
        receiver.refuse = True
        time.sleep(0.3)
        receiver.stop()  # gone while the harness keeps writing
        writer.join()
        time.sleep(0.3)
        receiver.refuse = False
        receiver.start()
        now[0] = time.time() + 3600
        want = expected(root)
        assert _wait_until(lambda: held_shapes(receiver) == want), "the live export fell short"
    finally:
        exporter.stop.set()
        thread.join(timeout=30)
        store.close()
        sender.close()
        receiver.stop()
    assert exporter.stats.refused >= 1
    assert_copies_agree(receiver)
    # Nothing was sent twice: the cursor moved only after each acknowledgement.
    assert len(receiver.copies) == len(want)


def _exporter_process(root: Path, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}
    command = [sys.executable, "-m", "pentrace", "--data-root", str(root), "otel", "export",
               "--follow", "--endpoint", url, "--settle", "3", "--interval", "0.05"]  # fmt: skip
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_sigkill_at_any_moment_loses_nothing_and_a_copy_never_differs(tmp_path: Path) -> None:
    root = tmp_path / "data"
    rich_root(root)
    receiver = Receiver().start()
    key = SessionKey("live", "assistant", "session-2026-07-18-11-10-22-0000eeee")
    log = tmp_path / "exporter.log"
    writer = threading.Thread(target=write_slowly, args=(root, key, turns(6), 0.03))
    process = _exporter_process(root, receiver.url, log)
    writer.start()
    kills = 0
    try:
        while writer.is_alive() or kills < 3:
            time.sleep(0.4 + 0.2 * kills)
            process.send_signal(signal.SIGKILL)
            process.wait()
            assert process.returncode == -signal.SIGKILL
            kills += 1
            process = _exporter_process(root, receiver.url, log)
        writer.join()
        # Every span, by id: a session the killed exporters settled early (the writer paused
        # past --settle on a loaded machine) is held with the end it had then.
        want = expected(root)
        assert _wait_until(lambda: set(receiver.held()) == set(want), 90), log.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        receiver.stop()
    assert_copies_agree(receiver)
    assert process.returncode == 0
    # Cursors are per receiver: the file names this one.
    assert clean_text(f"{receiver.url}/v1/traces") in {
        row[0] for row in _cursor_rows(cursor_path(root))
    }


def _cursor_rows(path: Path) -> list[tuple[Any, ...]]:
    import sqlite3

    with sqlite3.connect(path) as db:
        return list(db.execute("SELECT receiver, project, agent, session_id FROM otel_cursors"))


def test_received_spans_are_whole_otlp(root: Path, receiver: Receiver) -> None:
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    for span in receiver.copies:
        assert isinstance(span, ReceivedSpan)
        assert len(span.trace_id) == 32
        assert len(span.span_id) == 16
        assert span.start <= span.end
        assert span.attributes["gen_ai.conversation.id"].count("/") == 2


def test_ingest_follows_into_the_ledger_and_the_receiver_and_a_refusing_one_holds_up_neither(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    ledger = tmp_path / "ledger.db"
    receiver = Receiver().start()
    receiver.refuse = True
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    follower = FollowerProcess(root, ledger, "--otel", env=env)
    key = SessionKey(PROJECT, AGENT, SESSION)
    lines = pt.render_shards(turns(6), session_id=SESSION)[0]
    try:
        follower.ready()
        for line in lines:
            append(shard(root), line + b"\n")
        # The ledger takes every record while the receiver refuses every batch.
        follower.wait_until(
            lambda: held_positions(ledger) == list(range(1, len(lines) + 1)), "the ledger rows"
        )
        follower.wait_for_event("refused")
        assert receiver.copies == []
        receiver.refuse = False
        fold = SessionFold(key)
        finished = [s for n, r in enumerate(map(TraceRecord, lines), 1) for s in fold.feed(n, r)]
        want = {f"{s.span_id:016x}" for s in finished}
        follower.wait_until(lambda: set(receiver.held()) == want, "the finished spans")
        code, log = follower.stop()
    finally:
        follower.close()
        receiver.stop()
    assert code == 0, log
    assert_copies_agree(receiver)


def test_the_python_example_in_docs_otel_md_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "otel.md"
    (block,) = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exec(compile(block, f"{page}:python", "exec"), {"__name__": "docs"})  # noqa: S102  # running our own docs is the test
    printed = capsys.readouterr().out.strip()
    assert printed == repr(["chat deepseek-v4-pro", "execute_tool exec_command",
                            "invoke_agent default_agent"])  # fmt: skip
    assert printed in block


def test_serve_with_otel_sends_what_the_traces_finish(tmp_path: Path, root: Path) -> None:
    receiver = Receiver().start()
    server = Server(root, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, args=["--otel"])
    server.start()
    try:
        fold_ids: set[str] = set()
        for ref in DataRoot(root).iter_sessions():
            fold = SessionFold(ref.key)
            for number, record in session_records(ref.shards):
                fold_ids.update(f"{s.span_id:016x}" for s in fold.feed(number, record))
        # Finished spans go at once; the sessions' last tasks wait for --settle (300 s).
        assert _wait_until(lambda: fold_ids <= set(receiver.held())), server.output()
    finally:
        server.stop()
        receiver.stop()
    assert_copies_agree(receiver)


def test_a_model_switch_links_to_the_task_of_the_source_it_left(
    tmp_path: Path, receiver: Receiver
) -> None:
    root = tmp_path / "data"
    source_id, switched_id = (
        "session-2026-07-18-11-10-22-00005555",
        "session-2026-07-18-11-20-00-00006666",
    )
    turn: list[pt.Command] = [pt.BeginRequest(), pt.AssistantText("ok"), pt.EndRequest()]
    pt.write_trace(root, [pt.StartSession(), pt.UserInput("first"), *turn,
                          pt.UserInput("second"), *turn], session_id=source_id)  # fmt: skip
    block = f"[model_switch_from]\nsession_id: {source_id}\ntrace: /x\n[/model_switch_from]\n\ngo"
    later = datetime(2026, 7, 18, 4, 0, tzinfo=UTC)
    shards = pt.render_shards([pt.StartSession(model_id="other"), pt.UserInput(block), *turn],
                              session_id=switched_id, start=later)  # fmt: skip
    pt.write_shards(root, "default_project", "default_agent", switched_id, shards)
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    tasks = {s.attributes["gen_ai.conversation.id"].rsplit("/", 1)[1] + f"@{s.start}": s
             for s in receiver.held().values() if s.name.startswith("invoke_agent")}  # fmt: skip
    (switched,) = [s for name, s in tasks.items() if name.startswith(switched_id)]
    sources = sorted(
        (s for n, s in tasks.items() if n.startswith(source_id)), key=lambda s: s.start
    )
    assert len(sources) == 2
    assert switched.links == ((sources[-1].trace_id, sources[-1].span_id),)  # the last task it left
    assert switched.attributes["pentrace.model_switch.from"] == source_id


def test_subagent_pointers_in_a_cycle_make_a_tree_not_a_loop(
    tmp_path: Path, receiver: Receiver
) -> None:
    root = tmp_path / "data"
    one, two = "session-2026-07-18-11-10-22-00007777", "session-2026-07-18-11-10-22-00008888"
    for me, other in ((one, two), (two, one)):
        commands: list[pt.Command] = [
            pt.StartSession(),
            pt.UserInput("x"),
            pt.BeginRequest(),
            pt.SubagentPointer(other),
            pt.EndRequest(),
        ]
        shards = pt.render_shards(commands, session_id=me)
        first = json.loads(shards[0][0])
        first["payload"]["source"] = "subagent"
        shards[0][0] = pt.render.envelope_line(first["timestamp"], "session_meta", first["payload"])
        pt.write_shards(root, "default_project", "default_agent", me, shards)
    cli_ok(root, "otel", "export", "--endpoint", receiver.url, "--settle", "0")
    held = receiver.held()
    assert len(held) == 4
    for span in held.values():  # every chain of parents ends at a root, once
        seen = {span.span_id}
        while span.parent_id:
            span = held[span.parent_id]
            assert span.span_id not in seen
            seen.add(span.span_id)
    roots = [s for s in held.values() if s.parent_id == ""]
    assert len(roots) == 1  # one of the two is the other's parent


def test_a_subagent_written_before_its_parents_pointer_waits_for_it_live(
    tmp_path: Path, receiver: Receiver
) -> None:
    root = tmp_path / "data"
    full = tmp_path / "full"
    rich_root(full)  # the parent and its child, as they end up
    root.mkdir()
    sender = open_sender(receiver.url)
    store = CursorStore(cursor_path(root), sender.where)
    # The exporter's clock stands still until the end: no session settles before then.
    now = [0.0]
    exporter = LiveExporter(
        DataRoot(root), sender, store, settle_s=1.0, interval=0.05, clock=lambda: now[0]
    )
    exporter.start()
    try:
        # spawn_subagent writes the child first, then the parent's pointer.
        child = full / "generated" / "agents" / "reviewer"
        shutil.copytree(child, root / "generated" / "agents" / "reviewer")
        assert _wait_until(lambda: exporter.stats.waiting_for_parent == 1)
        assert receiver.copies == []
        shutil.copytree(full / "generated" / "agents" / "assistant",
                        root / "generated" / "agents" / "assistant")  # fmt: skip
        assert _wait_until(lambda: exporter.stats.waiting_for_parent == 0)
        now[0] = time.time() + 3600  # now everything settles
        want = expected(root)
        assert _wait_until(lambda: held_shapes(receiver) == want)
    finally:
        exporter.close()
    assert exporter.stats.waiting_for_parent == 0
    child_tasks = [s for s in receiver.held().values()
                   if s.name == "invoke_agent reviewer"]  # fmt: skip
    assert len(child_tasks) == 1
    assert receiver.held()[child_tasks[0].parent_id].name == "execute_tool run_subagent"


def test_the_sdk_exporter_sends_the_senders_encoding_and_keeps_its_limits(
    receiver: Receiver, tmp_path: Path
) -> None:
    """Through the SDK's OTLP/HTTP exporter the receiver gets the very spans of the SDK way;
    a request over the exporter's size limit is not sent, nor anything after a shutdown."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    rich_root(tmp_path)
    key = SessionKey("generated", "assistant", PARENT_ID)
    fold = SessionFold(key, content=True)
    records = session_records(DataRoot(tmp_path).find_shards(*key))
    spans = [span for position, record in records for span in fold.feed(position, record)]
    spans += fold.settle()
    memory, exporter = memory_sender()
    assert memory.send(spans)
    sender = open_sender(receiver.url)
    assert sender.send(spans)
    assert [sdk_shape(span) for span in receiver.copies] == [
        sdk_shape(span) for span in exporter.get_finished_spans()
    ]
    url = receiver.url + "/v1/traces"
    small = SpanSender(OTLPSpanExporter(endpoint=url, max_request_size=100), url)
    assert not small.send(spans)
    sender.close()
    assert not sender.send(spans)
    assert receiver.requests == 1
