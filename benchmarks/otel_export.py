"""OpenTelemetry export (#29): span building and OTLP encoding on one core, the export rate
into Phoenix, and the lag from a trace write to the span being queryable there.

    python -m benchmarks.otel_export                      # the one-core stages, 200k records
    python -m benchmarks.otel_export --records 20000      # smaller
    python -m benchmarks.otel_export --http               # + batch export to loopback
    PENTRACE_PHOENIX=~/.cache/pentrace-tests/phoenix-venv/bin/phoenix \\
        python -m benchmarks.otel_export --phoenix        # and the two Phoenix figures

One core, in process, on the realistic corpus (``benchmarks/_corpus.py``), each
stage timed alone, best of ``--repeat``, as CPU time (``time.process_time``: the
figure for one core, steady on a machine other work shares) and wall time:

* **fold**: trace records to finished spans (``SessionFold``), redaction screen included;
* **sdk encode**: the reference way, spans to SDK spans (``ReadableSpan``) and the
  SDK's OTLP encoder, ``encode_spans(...).SerializeToString()``, in batches of 512;
* **encode**: what the exporter sends, ``SpanSender.encode`` (ADR 0105): the same bytes;
* **build+encode**: fold and encode, records in, OTLP bytes out: the issue's 50k spans/s
  target; **build+sdk encode** the same the reference way, and the ratio of the two.

With ``--phoenix``: a Phoenix on loopback receives a batch export of the corpus
(``export_sessions`` through the SDK's OTLP/HTTP exporter); the rate is spans over
the time until Phoenix counts them all (its GraphQL API).  Then the lag: a
writer appends a session line by line (a tool call and its output each turn);
``pentrace otel export --follow`` runs beside it; the lag of a span is from the
write of the record that finished it to the first poll (every 20 ms) that finds
it in Phoenix; p50 and p95.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf.internal import api_implementation  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks._corpus import generate_records
from pentrace.domain.records import TraceRecord
from pentrace.domain.session.key import SessionKey
from pentrace.infrastructure.otel.export import SpanSender
from pentrace.infrastructure.otel.mapping import SessionFold
from pentrace.infrastructure.otel.spans import Span

KEY = SessionKey("bench", "agent", "session-2026-07-18-11-10-22-0be0c4aa")
BATCH = 512


def _best(repeat: int, run: Callable[[], Any]) -> tuple[float, float]:
    """The least CPU seconds and the least wall seconds of ``repeat`` runs."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        started, ticks = time.perf_counter(), time.process_time()
        run()
        cpu = min(cpu, time.process_time() - ticks)
        wall = min(wall, time.perf_counter() - started)
    return cpu, wall


def _fold(records: list[TraceRecord]) -> list[Span]:
    fold = SessionFold(KEY)
    spans = [span for number, record in enumerate(records, 1) for span in fold.feed(number, record)]
    return spans + fold.settle()


def one_core(records: int, repeat: int) -> None:
    lines = list(generate_records(records, seed=29))
    sender = SpanSender(InMemorySpanExporter(), "memory")
    spans = _fold([TraceRecord(line) for line in lines])

    def sdk_encode(spans: list[Span]) -> list[bytes]:
        return [
            encode_spans(
                [sender.sdk_span(span) for span in spans[i : i + BATCH]]
            ).SerializeToString()
            for i in range(0, len(spans), BATCH)
        ]

    def encode(spans: list[Span]) -> list[bytes]:
        return [sender.encode(spans[i : i + BATCH]) for i in range(0, len(spans), BATCH)]

    if encode(spans) != sdk_encode(spans):  # the property tests hold it; checked here again
        raise SystemExit("SpanSender.encode differs from the SDK encoder on the corpus")

    def records_of() -> list[TraceRecord]:
        return [TraceRecord(line) for line in lines]  # decoded lazily, as read

    stages = {
        "fold": _best(repeat, lambda: _fold(records_of())),
        "sdk encode": _best(repeat, lambda: sdk_encode(spans)),
        "encode": _best(repeat, lambda: encode(spans)),
        "build+sdk encode": _best(repeat, lambda: sdk_encode(_fold(records_of()))),
        "build+encode": _best(repeat, lambda: encode(_fold(records_of()))),
    }
    size = sum(map(len, encode(spans)))
    print(f"{records} records -> {len(spans)} spans ({size / len(spans):.0f} OTLP bytes each); "
          f"protobuf {api_implementation.Type()}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    print("| stage | CPU s | spans/s (CPU) | wall s | spans/s (wall) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (cpu, wall) in stages.items():
        print(f"| {name} | {cpu:.3f} | {len(spans) / cpu:,.0f} "
              f"| {wall:.3f} | {len(spans) / wall:,.0f} |")  # fmt: skip
    ratio = stages["build+sdk encode"][0] / stages["build+encode"][0]
    encode_ratio = stages["sdk encode"][0] / stages["encode"][0]
    print(f"encode {encode_ratio:.1f}x the SDK way; build+encode {ratio:.1f}x (CPU)")


def http_rate(records: int) -> None:
    """``export_sessions`` of the corpus over OTLP/HTTP into a minimal receiver on loopback
    (the tests' one: it decodes and keeps every span), the SDK's OTLP exporter both ways:
    with the sender's encoding, and made to encode the SDK way."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from pentrace.infrastructure.otel.export import export_sessions, open_sender
    from pentrace.infrastructure.storage.layout import DataRoot
    from pentrace.testing import files
    from tests.otel_support import Receiver

    class SdkWay(SpanExporter):  # not the OTLP exporter's class: the sender hands it SDK spans
        def __init__(self, inner: SpanExporter) -> None:
            self.inner = inner

        def export(self, spans: Any) -> SpanExportResult:
            batch: list[ReadableSpan] = list(spans)
            return self.inner.export(batch)

        def shutdown(self) -> None:
            self.inner.shutdown()

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "data"
        files.write_shards(root, *KEY, [list(generate_records(records, seed=29))])
        data = DataRoot(root)
        seconds: dict[str, tuple[float, float, int]] = {}
        for way in ("sdk encode", "encode", "sdk encode", "encode"):  # each twice, interleaved
            receiver = Receiver().start()
            try:
                sender = open_sender(receiver.url)
                if way == "sdk encode":
                    sender.exporter = SdkWay(sender.exporter)
                started, ticks = time.perf_counter(), time.process_time()
                report = export_sessions(data, data.iter_sessions(), sender, settle_s=0)
                cpu, wall = time.process_time() - ticks, time.perf_counter() - started
                sender.close()
                if len(receiver.copies) != report.spans:
                    raise SystemExit(f"the receiver holds {len(receiver.copies)} spans")
            finally:
                receiver.stop()
            best = seconds.get(way, (float("inf"), float("inf"), 0))
            seconds[way] = (min(best[0], cpu), min(best[1], wall), report.spans)
        for way, (cpu, wall, spans) in seconds.items():
            print(f"export over OTLP/HTTP to a loopback receiver, {way}: {spans} spans in "
                  f"{wall:.2f} s ({spans / wall:,.0f} spans/s; the process, receiver "
                  f"included, {cpu:.2f} CPU s)")  # fmt: skip


def _phoenix_figures(records: int, lag_turns: int) -> None:
    from pentrace.infrastructure.otel.export import export_sessions, open_sender
    from pentrace.infrastructure.storage.layout import DataRoot
    from pentrace.testing import files
    from tests.otel_support import Phoenix

    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        phoenix = Phoenix(base / "phoenix").start()
        try:
            root = base / "data"
            files.write_shards(root, *KEY, [list(generate_records(records, seed=29))])
            os.environ["OTEL_RESOURCE_ATTRIBUTES"] = "openinference.project.name=rate"
            sender = open_sender(phoenix.url)
            data = DataRoot(root)
            start = time.perf_counter()
            report = export_sessions(data, data.iter_sessions(), sender, settle_s=0)
            acked = time.perf_counter() - start
            deadline = time.monotonic() + 1800
            while _span_count(phoenix.url, "rate") < report.spans:
                if time.monotonic() > deadline:
                    raise SystemExit("Phoenix did not hold every span after 30 minutes")
                time.sleep(0.2)
            queryable = time.perf_counter() - start
            sender.close()
            print(f"export into Phoenix: {report.spans} spans, acknowledged in {acked:.1f} s "
                  f"({report.spans / acked:,.0f} spans/s), all queryable after {queryable:.1f} s "
                  f"({report.spans / queryable:,.0f} spans/s)")  # fmt: skip
            _lag(phoenix, base / "live", lag_turns)
        finally:
            phoenix.stop()


def _span_count(url: str, project: str) -> int:
    """How many spans Phoenix holds in ``project``, by its GraphQL API (the REST listing
    of every span would load Phoenix more than the export does)."""
    import json
    import urllib.request

    query = b'{"query": "{ projects { edges { node { name recordCount } } } }"}'
    request = urllib.request.Request(  # noqa: S310 (loopback)
        url + "/graphql", query, {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (loopback)
        edges = json.loads(answer.read())["data"]["projects"]["edges"]
    return sum(
        int(edge["node"]["recordCount"]) for edge in edges if edge["node"]["name"] == project
    )


def _lag(phoenix: Any, root: Path, turns: int) -> None:
    import subprocess

    from pentrace import testing as pt
    from pentrace.infrastructure.storage.layout import DataRoot

    key = SessionKey("lag", "agent", "session-2026-07-18-11-10-22-00001a90")
    env = {**os.environ, "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=lag"}
    root.mkdir(parents=True)
    command = [sys.executable, "-m", "pentrace", "--data-root", str(root), "otel", "export",
               "--follow", "--endpoint", phoenix.url, "--interval", "0.05"]  # fmt: skip
    exporter = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
    commands: list[pt.Command] = [pt.StartSession()]
    for turn in range(turns):
        commands += [pt.UserInput(f"turn {turn}"), pt.BeginRequest(),
                     pt.ToolCall(f"call_{turn}", "exec_command", "{}"),
                     pt.ToolOutput(f"call_{turn}", "ok"), pt.EndRequest("completed")]  # fmt: skip
    lines = pt.render_shards(commands, session_id=key.session_id)[0]
    path = DataRoot(root).shard_path(*key, 1, pt.files.DEFAULT_DAY)
    path.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, float] = {}  # tool call id -> when its output was written
    seen: dict[str, float] = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            now = time.time()
            for span in phoenix.spans("lag"):
                call = span["attributes"].get("gen_ai.tool.call.id")
                if call is not None:
                    seen.setdefault(call, now)
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    time.sleep(2.0)  # the exporter's start-up
    poller.start()
    try:
        with path.open("ab") as handle:
            for line in lines:
                handle.write(line + b"\n")
                handle.flush()
                if b'"tool_call_output"' in line:
                    written[line.split(b'"tool_call_id":"')[1].split(b'"')[0].decode()] = (
                        time.time()
                    )
                time.sleep(0.05)
        deadline = time.monotonic() + 120
        while len(seen) < len(written) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        exporter.terminate()
        exporter.wait(30)
    lags = sorted((seen[call] - at) * 1000 for call, at in written.items() if call in seen)
    if len(lags) < 2:
        print(f"lag: only {len(lags)} span(s) arrived")
        return
    p95 = statistics.quantiles(lags, n=20)[18]
    print(f"lag, write to queryable in Phoenix, {len(lags)} tool spans: "
          f"p50 {statistics.median(lags):.0f} ms, p95 {p95:.0f} ms")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--http", action="store_true", help="also the loopback export rate")
    parser.add_argument("--phoenix", action="store_true", help="also the Phoenix figures")
    parser.add_argument("--phoenix-records", type=int, default=50_000)
    parser.add_argument("--lag-turns", type=int, default=100)
    args = parser.parse_args(argv)
    one_core(args.records, args.repeat)
    if args.http:
        http_rate(args.phoenix_records)
    if args.phoenix:
        _phoenix_figures(args.phoenix_records, args.lag_turns)


if __name__ == "__main__":
    main()
