"""Record sessions with the ledger wired in: the one-call setup for harness authors.

``open_recording`` builds a :class:`SessionApplication` whose ``on_recorded``
hook publishes every saved record to in-process live subscribers right after
the trace write and hands it to a background writer that indexes it into the
RuntimeEvent ledger (DESIGN decision 6; ``Recording.flush`` waits for it).
The ledger is best-effort: when it cannot be opened (a locked file, a server
that is down or hung: the connect timeout bounds the wait), recording goes on
without it, a warning is logged, and ``pentrace ledger sync`` indexes what it
missed later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pentrace.errors import ConfigError, PentraceError
from pentrace.infrastructure.eventstore.application import SessionApplication
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.ledger.backend.credentials import mask_text
from pentrace.infrastructure.ledger.live.hook import LedgerHook, LiveSubscription
from pentrace.infrastructure.ledger.opener import open_ledger
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = ["Recording", "open_recording"]

log = logging.getLogger(__name__)


@dataclass
class Recording:
    """A session application with its ledger and live fan-out; close it when done."""

    application: SessionApplication
    ledger: RuntimeEventLedger | None
    hook: LedgerHook

    def subscribe_live(self, maxsize: int = 1000) -> LiveSubscription:
        """Entries indexed from now on, as they are saved (bounded; the ledger keeps all)."""
        return self.hook.subscribe_live(maxsize)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every saved record handed to the ledger is written or dropped; False
        when ``timeout`` ran out.  Saves do not wait for the ledger: call this before
        reading the ledger for rows of your own saves."""
        return self.hook.flush(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Give queued ledger writes ``timeout`` seconds at most, then close the ledger."""
        self.hook.close(timeout)
        if self.ledger is not None:
            self.ledger.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


def open_recording(
    data_root: DataRoot | Path | str,
    project: str,
    agent: str,
    *,
    ledger: RuntimeEventLedger | None = None,
    ledger_settings: LedgerSettings | None = None,
    **options: Any,
) -> Recording:
    """A :class:`SessionApplication` for ``project``/``agent`` that indexes into the ledger.

    ``ledger`` defaults to the one ``ledger_settings`` name (default
    ``LedgerSettings.from_env``: ``PENTRACE_LEDGER_URL`` for PostgreSQL, else SQLite
    under the data root; ``PENTRACE_LEDGER_TABLE_PREFIX`` too), opened by the one
    opener that the CLI and the service use, so they read the tables it writes.
    ``options`` go to :class:`SessionApplication` (``durability``, ``clock``, ...).
    """
    root = data_root if isinstance(data_root, DataRoot) else DataRoot(Path(data_root))
    if ledger is None:
        try:
            settings = ledger_settings if ledger_settings is not None else LedgerSettings.from_env()
            ledger = open_ledger(settings, root.path)
        except ConfigError:
            pass  # the redaction rules: the application below says so, and records the trace
        except PentraceError as error:
            # Never block recording on the ledger; the traces stay the source of truth.
            # The message names the database with its credentials masked.
            log.warning(
                "recording without the ledger: %s (run `pentrace ledger sync` later)",
                mask_text(error.message),
            )
    hook = LedgerHook(ledger, data_root=root, project=project, agent=agent)
    application = SessionApplication(root, project, agent, on_recorded=hook, **options)
    return Recording(application=application, ledger=ledger, hook=hook)
