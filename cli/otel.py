"""``pentrace otel``: sessions as OpenTelemetry GenAI spans, to any OTLP/HTTP receiver (#29).

``otel export`` sends the spans of the traces once (again: same ids), or with
``--follow`` keeps sending each span once it is finished, from its own cursor
(docs/otel.md).  The OpenTelemetry SDK loads only here.
"""

from __future__ import annotations

import logging
import sys
import threading
from datetime import datetime
from typing import Annotated

import typer

from pentrace.cli.ingest import LogFormat, _stopping_on_signals
from pentrace.cli.options import TIME_HELP, time_window
from pentrace.cli.output import emit_json
from pentrace.cli.sessions.args import (
    AgentOption,
    JsonOption,
    ProjectOption,
    data_root,
    select_sessions,
)
from pentrace.errors import UsageError
from pentrace.infrastructure.operations.live import (
    JsonFormatter,
    TextFormatter,
    export_once,
    open_live_export,
)
from pentrace.infrastructure.operations.sessions import REFERENCE_HELP, DataRoot

__all__ = ["configure_otel_logging", "otel_app"]

otel_app = typer.Typer(
    name="otel",
    no_args_is_help=True,
    help="Send sessions to OpenTelemetry receivers as GenAI spans.\n\n"
    "Example: pentrace otel export --endpoint http://127.0.0.1:6006",
)
_HANDLER = "pentrace-otel"
_KINDS = ("invoke_agent", "chat", "execute_tool", "compaction")


@otel_app.callback()
def _group() -> None:
    """Send sessions to OpenTelemetry receivers (Phoenix, Langfuse, Jaeger, Tempo, a
    collector) as GenAI spans; docs/otel.md.

    Example: pentrace otel export --endpoint http://127.0.0.1:6006
    """


def _ns(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


@otel_app.command("export")
def export(
    ctx: typer.Context,
    sessions: Annotated[
        list[str] | None,
        typer.Argument(
            help=f"Sessions to export (default: all). {REFERENCE_HELP}", show_default=False
        ),
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            help="The receiver's OTLP/HTTP URL (/v1/traces is added to a base URL) "
            "[default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT, "
            "http://localhost:4318].",
            show_default=False,
        ),
    ] = None,
    project: ProjectOption = None,
    agent: AgentOption = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="<when>",
            help=f"Only traces (tasks) that began at or after: {TIME_HELP}.",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            metavar="<when>",
            help="Only traces that began at or before (same forms).",
            show_default=False,
        ),
    ] = None,
    content: Annotated[
        bool,
        typer.Option(
            "--content",
            help="Also send the messages, tool arguments and results (redacted first).",
        ),
    ] = False,
    settle: Annotated[
        float,
        typer.Option(
            help="Seconds without a write after which a session's open spans are closed and "
            "sent; 0 closes them at once.",
            min=0,
        ),
    ] = 300.0,
    follow: Annotated[
        bool,
        typer.Option("--follow", help="Keep running: send each span once it is finished."),
    ] = False,
    interval: Annotated[
        float, typer.Option(help="With --follow: seconds between looks at the traces.", min=0.05)
    ] = 2.0,
    log_format: Annotated[
        LogFormat, typer.Option(help="With --follow: log lines on stderr, text or json.")
    ] = LogFormat.text,
    as_json: JsonOption = False,
) -> None:
    """Send sessions to an OpenTelemetry receiver as GenAI spans.

    One invoke_agent trace per task, a chat span per request (with its token
    usage), an execute_tool span per tool call; subagents sit under the call
    that started them.  Ids come from positions in the traces, so exporting
    again, or after --follow, sends the same spans again and a receiver keeps
    them once.  The SDK's OTEL_EXPORTER_OTLP_* variables (headers, timeout,
    compression), OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES apply.

    Example: pentrace otel export --endpoint http://127.0.0.1:6006 --since 7d

    Example: OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 pentrace otel export --follow
    """
    _quiet_sdk(ctx)
    root = data_root(ctx)
    if follow and (sessions or since is not None or until is not None):
        raise UsageError(
            "--follow exports every session of the root as it grows; found sessions or "
            "--since/--until as well",
            hint="drop them, or export those once without --follow",
        )
    if follow:
        configure_otel_logging(log_format)
        _follow(root, endpoint, content=content, settle=settle, interval=interval)
        return
    start, end = time_window(since, until)
    window = (_ns(start), _ns(end))
    report = export_once(
        root,
        endpoint,
        lambda: select_sessions(root, sessions or [], project, agent),
        content=content,
        settle_s=settle,
        window=window,
    )
    if as_json:
        emit_json(
            {
                "endpoint": report.endpoint,
                "sessions": report.sessions,
                "spans": report.spans,
                **{kind: report.kinds.get(kind, 0) for kind in _KINDS},
                "still_open": report.still_open,
                "failed_sessions": report.failed_sessions,
            }
        )
    else:
        kinds = ", ".join(f"{report.kinds.get(kind, 0)} {kind}" for kind in _KINDS)
        typer.echo(
            f"exported {report.spans} span(s) of {report.sessions} session(s) to "
            f"{report.endpoint} ({kinds})"
        )
        if report.still_open:
            typer.echo(
                f"{report.still_open} session(s) written in the last {settle:g} s keep their "
                "open spans for a later export (--settle 0 sends them as they stand)"
            )
        for failure in report.failed_sessions:
            typer.echo(f"warning: skipped {failure}", err=True)
    if report.failed_sessions:
        raise typer.Exit(1)


def _quiet_sdk(ctx: typer.Context) -> None:
    """The SDK logs each retry on stderr; pentrace reports the outcome itself (--debug: both)."""
    debug = bool(getattr(ctx.find_root().obj, "debug", False))
    logging.getLogger("opentelemetry").setLevel(logging.DEBUG if debug else logging.CRITICAL)


def configure_otel_logging(log_format: LogFormat) -> None:
    """The live exporter's events (``pentrace.otel``) on stderr, as the follower's; they
    say when the receiver refused, so the SDK's own retry lines stay quiet."""
    if logging.getLogger("opentelemetry").level == logging.NOTSET:
        logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
    logger = logging.getLogger("pentrace.otel")
    logger.setLevel(logging.INFO)
    for handler in [h for h in logger.handlers if h.get_name() == _HANDLER]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER)
    handler.setFormatter(JsonFormatter() if log_format is LogFormat.json else TextFormatter())
    logger.addHandler(handler)
    logger.propagate = False


def _follow(
    root: DataRoot, endpoint: str | None, *, content: bool, settle: float, interval: float
) -> None:
    stop = threading.Event()
    exporter = open_live_export(
        root, endpoint=endpoint, content=content, settle_s=settle, interval=interval, stop=stop
    )
    with _stopping_on_signals(stop):
        exporter.start()
        while not stop.wait(0.5):
            pass
    exporter.close()
