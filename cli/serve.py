"""``pentrace serve``: run the event service on uvicorn.

Binds 127.0.0.1 by default.  Any other address needs a bearer token from
``PENTRACE_API_TOKEN``, ``PENTRACE_API_TOKEN_FILE`` or ``--token-file``; the
token is never accepted as a command-line value, and never logged.  The server
answers only the Host names it is bound to, plus ``--allowed-host`` names, and
refuses foreign Origins unless ``--allowed-origin`` names them (docs/security.md).
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pentrace.cli.options import root_from_context, unshown
from pentrace.errors import UsageError
from pentrace.infrastructure.operations.ledger import LedgerSettings, open_ledger
from pentrace.infrastructure.operations.projections import ENV_ANALYTICS_URL
from pentrace.infrastructure.operations.sessions import DataRoot
from pentrace.service.settings import (
    ENV_ALLOWED_HOSTS,
    ENV_ALLOWED_ORIGINS,
    ServiceSettings,
    read_list,
    read_token,
)

if TYPE_CHECKING:
    from pentrace.infrastructure.operations.live import EmbeddedIngest, LiveExporter

__all__ = ["serve"]


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to bind; non-loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    token_file: Annotated[
        Path | None,
        unshown(
            "--token-file",
            help="File holding the bearer token (else $PENTRACE_API_TOKEN_FILE, "
            "$PENTRACE_API_TOKEN).",
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        unshown(
            "--allowed-host",
            help="Also answer requests for this Host name (repeatable; * = any); else "
            f"${ENV_ALLOWED_HOSTS}, comma-separated.",
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        unshown(
            "--allowed-origin",
            help="Let pages of this origin (https://app.example) read the API with CORS "
            f"(repeatable); else ${ENV_ALLOWED_ORIGINS}, comma-separated.",
        ),
    ] = None,
    keepalive: Annotated[
        float, typer.Option(help="Seconds between keepalive comments on SSE streams; 0 = off.")
    ] = 15.0,
    poll_interval: Annotated[
        float, typer.Option(help="Seconds between ledger head checks (SQLite).")
    ] = 0.05,
    page_size: Annotated[
        int, typer.Option(help="Events per ledger read of one SSE stream.", min=1)
    ] = 500,
    frame_cache_mib: Annotated[
        float, typer.Option(help="MiB of encoded frames shared by all SSE streams.", min=0)
    ] = 4.0,
    image_max_mib: Annotated[
        float,
        typer.Option(
            help="Largest image (MiB) the viewer shows inline; larger ones are named (0: none).",
            min=0,
        ),
    ] = 5.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    ingest: Annotated[
        bool,
        typer.Option(
            "--ingest",
            help="Also follow the traces into the ledger, as `pentrace ingest --follow` does "
            "(which indexing command when: `pentrace ledger -h`).",
        ),
    ] = False,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="Also send each finished span to the OpenTelemetry receiver the "
            "OTEL_EXPORTER_OTLP_* variables name (docs/otel.md).",
        ),
    ] = False,
    agents: Annotated[
        str | None,
        typer.Option(
            help="With --ingest, also import and follow these agents' sessions: claude-code, "
            "codex, opencode, gemini (comma-separated) or all (docs/agents.md).",
        ),
    ] = None,
    test_page: Annotated[
        bool, typer.Option("--test-page", hidden=True, help="Serve /_test/sse.html (tests).")
    ] = False,
) -> None:
    """Serve the web viewer, the session API and the SSE event stream.

    Endpoints: /api/v1/events/sse, /api/v1/sessions, /api/v1/sessions/{id},
    /api/v1/sessions/{id}/trace and /openapi.json (see docs/service.md). Traces are
    redacted; the verbatim trace (?redacted=false) needs the bearer token.

    Example: pentrace serve --port 8765 --allowed-host pentrace.lan
    """
    import uvicorn  # imported here: the other commands should not pay for it

    from pentrace.service.app import create_app

    root = root_from_context(ctx)  # a mistyped root must not serve an empty listing
    settings = ServiceSettings(
        data_root=root.path,
        ledger=LedgerSettings.from_env(),
        analytics_url=os.environ.get(ENV_ANALYTICS_URL, "").strip() or None,
        host=host,
        port=port,
        token=read_token(token_file),
        allowed_hosts=read_list(allowed_host or (), ENV_ALLOWED_HOSTS),
        allowed_origins=read_list(allowed_origin or (), ENV_ALLOWED_ORIGINS),
        keepalive_seconds=keepalive,
        poll_interval_seconds=poll_interval,
        page_size=page_size,
        frame_cache_bytes=int(frame_cache_mib * 2**20),
        image_max_bytes=int(image_max_mib * 2**20),
        test_page=test_page,
    )
    app = create_app(settings)
    # Open the ledger once before uvicorn does: an unreachable database or a bad
    # file is then a one-line error and a non-zero exit, not a startup traceback.
    open_ledger(settings.ledger, root.path, penguin_read_only=True).close()
    logging.getLogger("pentrace").setLevel(log_level.upper())
    if agents and not ingest:
        raise UsageError(
            "--agents follows other agents' stores into the ledger: it needs --ingest",
            hint=f"pentrace serve --ingest --agents {agents}",
        )
    embedded = _start_ingest(root, agents) if ingest else None
    exporter = _start_otel(root) if otel else None
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            # Requests still running 1 s after SIGTERM are cancelled: the server is gone
            # within 2 s of the signal whatever its clients do (ADR 0101).
            timeout_graceful_shutdown=1,
            server_header=False,  # no "server: uvicorn": nothing to fingerprint
        )
    finally:
        if exporter is not None:
            exporter.close()
        if embedded is not None:
            embedded.close()


def _start_otel(root: DataRoot) -> LiveExporter:
    """``--otel``: the live OpenTelemetry exporter on threads of this process, from its own
    cursor; a receiver that is down holds up neither the server nor the follower."""
    from pentrace.cli.ingest import LogFormat
    from pentrace.cli.otel import configure_otel_logging
    from pentrace.infrastructure.operations.live import open_live_export

    configure_otel_logging(LogFormat.text)
    exporter = open_live_export(root)
    exporter.start()
    return exporter


def _start_ingest(root: DataRoot, agents: str | None) -> EmbeddedIngest:
    """``--ingest``: the follower on a thread of this process (one process per machine)."""
    from pentrace.infrastructure.operations.live import (
        EmbeddedIngest,
        agent_feed,
        configure_logging,
    )

    configure_logging("text")
    feed = agent_feed(root, agents)
    # The configured retention limits apply, as on every path into the ledger.
    ledger = open_ledger(data_root=root, wait_seconds=5.0, redaction_policy=False)
    embedded = EmbeddedIngest(root, ledger, feed)
    # uvicorn hands SIGTERM/SIGINT back to these handlers after its graceful shutdown:
    # the follower then finishes its batch and the process exits 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: embedded.runner.stop.set())
    return embedded
