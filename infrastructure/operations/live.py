"""Following the traces as they grow, for ``pentrace ingest``, ``serve --ingest`` and
``otel`` (ADR 0103): the follower and its runner, the other agents' live feed, the
OpenTelemetry export (once, or live from its cursor), and their structured logs.

The OpenTelemetry SDK is a heavy import that only an export needs, so the functions
that open one import it when called; importing this module does not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pentrace.infrastructure.ingest import EmbeddedIngest, Follower, IngestRunner
from pentrace.infrastructure.ingest.logs import JsonFormatter, TextFormatter, configure_logging
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef

if TYPE_CHECKING:
    from pentrace.infrastructure.agents.importer import AgentFeed
    from pentrace.infrastructure.otel.export import ExportReport
    from pentrace.infrastructure.otel.live import LiveExporter

# AgentFeed, ExportReport and LiveExporter are for annotations only (import them under
# TYPE_CHECKING): the modules that define them load on demand, the SDK among them.
__all__ = [
    "AgentFeed",
    "EmbeddedIngest",
    "ExportReport",
    "Follower",
    "IngestRunner",
    "JsonFormatter",
    "LiveExporter",
    "TextFormatter",
    "agent_feed",
    "configure_logging",
    "export_once",
    "open_live_export",
]


def agent_feed(root: DataRoot, agents: str | None) -> AgentFeed | None:
    """``--agents``: the other agents' stores to import and follow (None: only the root)."""
    if not agents:
        return None
    from pentrace.infrastructure.agents.importer import AgentFeed, parse_agents

    return AgentFeed(root, parse_agents(agents))


def open_live_export(root: DataRoot, **options: Any) -> LiveExporter:
    """The live OpenTelemetry exporter of ``root`` from its own cursor; not started.

    ``options`` are those of :func:`pentrace.infrastructure.otel.live.open_live_export`
    (``endpoint``, ``content``, ``settle_s``, ``interval``, ``stop``).
    """
    from pentrace.infrastructure.otel import live

    return live.open_live_export(root, **options)


def export_once(
    root: DataRoot,
    endpoint: str | None,
    select: Callable[[], Iterable[SessionRef]],
    *,
    content: bool,
    settle_s: float,
    window: tuple[int | None, int | None],
) -> ExportReport:
    """``otel export``: the spans of the sessions ``select`` returns, sent to the receiver
    once.  The receiver's address is checked first, then the sessions are chosen."""
    from pentrace.infrastructure.otel.export import export_sessions, open_sender

    sender = open_sender(endpoint)
    try:
        return export_sessions(
            root, select(), sender, content=content, settle_s=settle_s, window=window
        )
    finally:
        sender.close()
