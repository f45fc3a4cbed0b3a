"""``pentrace otel export`` into Arize Phoenix, a real OpenTelemetry receiver (issue #29).

Phoenix runs from ``PENTRACE_PHOENIX`` (``.ci/run`` installs it in a virtualenv
of its own); without it these tests are skipped with the reason.  One Phoenix
serves the module, each test writing into a project of its own
(``openinference.project.name``).  Phoenix acknowledges a batch before it has
stored it, so the tests wait for the spans to show up, and they check "nothing
added" by sending a marker after the repeat and waiting for the marker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pentrace import testing as pt
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.export import export_sessions
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.reader import read_session
from tests.otel_support import (
    NEEDS_PHOENIX,
    Phoenix,
    memory_sender,
    rich_root,
    turns,
    write_slowly,
)
from tests.support import cli_json, cli_ok

pytestmark = [NEEDS_PHOENIX, pytest.mark.slow, pytest.mark.usefixtures("own_stores")]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    server = Phoenix(tmp_path_factory.mktemp("phoenix")).start()
    yield server
    server.stop()


def _project(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={name}")


def _expected(root: Path, *, content: bool = False) -> dict[str, Any]:
    sender, exporter = memory_sender()
    data = DataRoot(root)
    export_sessions(data, data.iter_sessions(), sender, content=content, settle_s=0)
    return {f"{s.context.span_id:016x}": s for s in exporter.get_finished_spans()}


def _records(root: Path) -> list[TraceRecord]:
    data = DataRoot(root)
    return [r for ref in data.iter_sessions() for r in read_session(ref.shards)]


def _marker(tmp: Path) -> Path:
    root = tmp / "marker"
    marker: list[pt.Command] = [
        pt.StartSession(),
        pt.UserInput("marker"),
        pt.BeginRequest(),
        pt.EndRequest(),
    ]
    pt.write_trace(
        root, marker, project="marker", agent="m", session_id="session-2026-07-18-11-10-22-0000ffff"
    )
    return root


def test_a_batch_export_is_whole_in_phoenix_and_a_repeat_adds_nothing(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "data"
    rich_root(root)
    cli_ok(root, "demo")
    _project(monkeypatch, "batch")
    want = _expected(root)
    cli_ok(root, "otel", "export", "--endpoint", phoenix.url, "--settle", "0")
    spans = phoenix.wait_for("batch", len(want))
    assert {s["context"]["span_id"] for s in spans} == set(want)
    recs = _records(root)
    kinds = [s["span_kind"] for s in spans]
    assert kinds.count("LLM") == sum(r.ptype == "request_begin" for r in recs)
    calls = sum(r.ptype == "tool_call" and not r.has_origin for r in recs)
    assert kinds.count("TOOL") == calls
    assert kinds.count("AGENT") == sum(1 for s in want.values() if s.name.startswith("invoke"))
    # Every parent is there, in the same trace.
    by_id = {s["context"]["span_id"]: s for s in spans}
    for span in spans:
        parent = span["parent_id"]
        assert parent is None or by_id[parent]["context"]["trace_id"] == span["context"]["trace_id"]
    # The token counts add up to what `pentrace stats tokens` shows.
    stats = cli_json(root, "stats", "tokens")["rows"]
    attrs = [s["attributes"] for s in spans if s["span_kind"] == "LLM"]
    total = {
        name: sum(int(a.get(f"gen_ai.usage.{name}", 0)) for a in attrs)
        for name in ("input_tokens", "output_tokens", "cache_read.input_tokens",
                     "cache_creation.input_tokens")
    }  # fmt: skip
    assert total["output_tokens"] == sum(row["output"] for row in stats)
    assert total["cache_read.input_tokens"] == sum(row["cache_read"] for row in stats)
    assert total["cache_creation.input_tokens"] == sum(row["cache_write"] for row in stats)
    fresh = sum(row["input"] for row in stats)
    assert (
        total["input_tokens"]
        == fresh + total["cache_read.input_tokens"] + total["cache_creation.input_tokens"]
    )
    assert any(s["status_code"] == "ERROR" for s in spans)
    # Again, then a marker: once the marker is in, the repeat was taken in before it.
    cli_ok(root, "otel", "export", "--endpoint", phoenix.url, "--settle", "0")
    marker = _marker(tmp_path)
    extra = len(_expected(marker))
    cli_ok(marker, "otel", "export", "--endpoint", phoenix.url, "--settle", "0")
    after = phoenix.wait_for("batch", len(want) + extra)
    assert len(after) == len(want) + extra
    assert len({s["context"]["span_id"] for s in after}) == len(after)


def test_content_reaches_phoenix_only_when_asked_and_redacted(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "xoxb-" + "1234567890-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
    commands: list[pt.Command] = [
        pt.StartSession(system_prompt=f"token {secret}"), pt.UserInput(f"use {secret}"),
        pt.BeginRequest(), pt.ToolCall("c1", "exec_command", json.dumps({"cmd": secret})),
        pt.ToolOutput("c1", secret), pt.AssistantText(f"done with {secret}"),
        pt.EndRequest("completed"),
    ]  # fmt: skip
    # Two sessions: a receiver that keeps one span per id would keep the first export's
    # spans, with or without content (docs/otel.md).
    plain_root, content_root = tmp_path / "plain", tmp_path / "content"
    pt.write_trace(plain_root, commands, session_id="session-2026-07-18-11-10-22-00001111")
    pt.write_trace(content_root, commands, session_id="session-2026-07-18-11-10-22-00003333")
    count = len(_expected(plain_root))
    _project(monkeypatch, "plain")
    cli_ok(plain_root, "otel", "export", "--endpoint", phoenix.url, "--settle", "0")
    _project(monkeypatch, "content")
    cli_ok(content_root, "otel", "export", "--endpoint", phoenix.url, "--settle", "0", "--content")
    plain, full = phoenix.wait_for("plain", count), phoenix.wait_for("content", count)
    assert len(plain) == len(full) == count
    assert not any("gen_ai.input.messages" in s["attributes"] for s in plain)
    assert any("gen_ai.input.messages" in s["attributes"] for s in full)
    everything = json.dumps([plain, full])
    assert secret not in everything
    assert "[redacted:slack_token]" in everything


def _exporter(root: Path, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=live",
           "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}  # fmt: skip
    command = [sys.executable, "-m", "pentrace", "--data-root", str(root), "otel", "export",
               "--follow", "--endpoint", url, "--settle", "2", "--interval", "0.1"]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_live_export_arrives_whole_after_phoenix_restarted_and_the_exporter_was_killed(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    root = tmp_path / "data"
    key = SessionKey("live", "assistant", "session-2026-07-18-11-10-22-00002222")
    log = tmp_path / "exporter.log"
    process = _exporter(root, phoenix.url, log)
    writer = threading.Thread(
        target=write_slowly, args=(root, key, turns(12, failing_every=4, compaction_at=6), 0.05)
    )
    writer.start()
    try:
        time.sleep(1.0)
        phoenix.stop()  # the receiver goes away while the harness writes on
        time.sleep(1.0)
        process.send_signal(signal.SIGKILL)  # and the exporter dies mid-way
        process.wait()
        process = _exporter(root, phoenix.url, log)
        phoenix.start()
        writer.join()
        want = _expected(root)
        spans = phoenix.wait_for("live", len(want), timeout=180)
        assert {s["context"]["span_id"] for s in spans} == set(want), log.read_text()
        assert len(spans) == len(want)
        names = {s["context"]["span_id"]: s["name"] for s in spans}
        assert names == {span_id: span.name for span_id, span in want.items()}
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert process.returncode == 0, log.read_text()
