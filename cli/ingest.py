"""``pentrace ingest``: follow the data root's traces into the ledger (issue #16).

Whoever wrote a trace (pentrace, or a PenguinHarness harness in Node), every
new complete record of every shard is indexed with the same ids ``ledger sync``
gives it.  Cursors live in the ledger database and commit with the rows they
cover, so SIGKILL and restarts neither lose nor repeat a record (docs/ingest.md).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from pentrace.cli.output import emit_json
from pentrace.cli.sessions.args import JsonOption, data_root
from pentrace.errors import UsageError
from pentrace.infrastructure.operations.ledger import open_ledger
from pentrace.infrastructure.operations.live import (
    Follower,
    IngestRunner,
    agent_feed,
    configure_logging,
    open_live_export,
)
from pentrace.infrastructure.operations.sessions import DataRoot

if TYPE_CHECKING:
    from pentrace.infrastructure.operations.live import LiveExporter

__all__ = ["LogFormat", "ingest"]


class LogFormat(StrEnum):
    """How the follower's structured logs are written to stderr."""

    text = "text"
    json = "json"


def ingest(
    ctx: typer.Context,
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep running and index new records as they land.")
    ] = False,
    poll: Annotated[
        bool,
        typer.Option("--poll", help="Poll the files instead of filesystem notifications."),
    ] = False,
    once: Annotated[
        bool, typer.Option("--once", help="One pass over every shard, then exit (the default).")
    ] = False,
    interval: Annotated[
        float, typer.Option(help="Seconds between passes when polling.", min=0.01)
    ] = 0.5,
    health_file: Annotated[
        Path | None,
        typer.Option(help="Keep a JSON health document (counters, lag) in this file."),
    ] = None,
    health_interval: Annotated[
        float, typer.Option(help="Seconds between health log lines.", min=0.1)
    ] = 30.0,
    log_format: Annotated[
        LogFormat, typer.Option(help="Log lines on stderr: text or json.")
    ] = LogFormat.text,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another process's ledger lock.")
    ] = 5.0,
    source: Annotated[
        str | None,
        typer.Option(
            help="This follower's name in the ledger's cursor table [default: host:root]."
        ),
    ] = None,
    agents: Annotated[
        str | None,
        typer.Option(
            help="Also import and follow these agents' sessions where they keep them: "
            "claude-code, codex, opencode, gemini (comma-separated) or all (docs/agents.md).",
        ),
    ] = None,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="Also send each finished span to the OpenTelemetry receiver the "
            "OTEL_EXPORTER_OTLP_* variables name, from its own cursor (docs/otel.md).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Index every new complete trace record into the ledger, once or continuously.

    With --follow it runs as a service: SIGTERM or SIGINT finishes the batch,
    commits its cursor and exits 0.  --poll implies --follow.  --agents also
    imports other agents' sessions (Claude Code, Codex, OpenCode, Gemini CLI)
    as they are written, so they reach the ledger and SSE live.  Which indexing
    command to use when: `pentrace ledger -h`.

    Example: pentrace ingest --follow --log-format json --health-file /run/pentrace/ingest.json
    """
    if once and (follow or poll):
        raise UsageError(
            "expected either --once or --follow/--poll, found both",
            hint="drop --once to keep running",
        )
    configure_logging(log_format.value)
    root = data_root(ctx, must_exist=not agents)  # --agents imports: the root may be new
    # The configured retention limits apply, as on every path into the ledger.
    ledger = open_ledger(data_root=root, wait_seconds=wait, redaction_policy=False)
    stop = threading.Event()
    try:
        follower = Follower(ledger, root, stop=stop, source=source)
        runner = IngestRunner(
            follower,
            poll=poll,
            interval=interval,
            health_file=health_file,
            health_interval=health_interval,
            feed=agent_feed(root, agents),
        )
        exporter = _otel_beside(root, stop, log_format) if otel else None
        try:
            if follow or poll:
                with _stopping_on_signals(stop):
                    if exporter is not None:
                        exporter.start()
                    runner.run()
            else:
                runner.run_once()
                if exporter is not None:
                    exporter.run_pass()
        finally:
            if exporter is not None:
                exporter.close()
    finally:
        ledger.close()
    stats = follower.stats
    if as_json:
        emit_json(
            {
                "sessions": stats.sessions,
                "indexed": stats.indexed,
                "already_held": stats.already_held,
                "skipped_lines": stats.skipped_lines,
                "errors": stats.errors,
                "refused_records": stats.refused_records,
            }
        )
    else:
        typer.echo(
            f"ingested {stats.indexed} new event(s) from {stats.sessions} session(s); "
            f"{stats.already_held} already held, {stats.skipped_lines} line(s) skipped, "
            f"{stats.errors} error(s)"
            + (f", {stats.refused_records} record(s) refused" if stats.refused_records else "")
        )


def _otel_beside(root: DataRoot, stop: threading.Event, log_format: LogFormat) -> LiveExporter:
    """``--otel``: the live OpenTelemetry exporter on threads of its own (a receiver that is
    down never holds up the follower); it stops with the follower."""
    from pentrace.cli.otel import configure_otel_logging

    configure_otel_logging(log_format)
    return open_live_export(root, stop=stop)


@contextmanager
def _stopping_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` while the block runs; the old handlers come back after."""

    def handle(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    old = {signum: signal.signal(signum, handle) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
