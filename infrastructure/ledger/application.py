"""A read-only eventsourcing Application over the ledger, for analytics projections.

``ProjectionRunner(application_class=LedgerApplication, projection_class=...,
view_class=..., env=...)`` follows the ledger: the runner subscribes to the
ledger (polling on SQLite, NOTIFY on PostgreSQL), turns each row into a
:class:`LedgerEvent` and hands it to the projection with its tracking
position.  The application finds the ledger from the same environment
variables as everything else (``PENTRACE_LEDGER_URL``,
``PENGUIN_RUNTIME_EVENT_LEDGER_PATH``, or ``PENGUIN_HOME``'s default file;
``PENTRACE_LEDGER_TABLE_PREFIX``), through the one opener.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from eventsourcing.application import Application
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import ApplicationRecorder, JSONTranscoder, Mapper, StoredEvent

from pentrace.domain.json_codec import JsonDecoder
from pentrace.errors import LedgerError
from pentrace.infrastructure.ledger.opener import open_ledger
from pentrace.infrastructure.ledger.settings import ENV_TABLE_PREFIX, LedgerSettings
from pentrace.infrastructure.ledger.store import RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot

__all__ = ["ENV_TABLE_PREFIX", "LedgerApplication", "LedgerEvent", "LedgerMapper"]

_decode: Final = JsonDecoder[Any]().decode


@dataclass(frozen=True)
class LedgerEvent:
    """One ledger row as a domain event: stream, sequence, type and the envelope JSON."""

    originator_id: str
    originator_version: int
    event_type: str
    event_json: bytes

    def envelope(self) -> dict[str, Any]:
        """The redacted RuntimeEvent envelope, decoded."""
        value = _decode(self.event_json)
        return value if isinstance(value, dict) else {"value": value}


class LedgerMapper(Mapper[str]):
    """Maps ledger notifications to :class:`LedgerEvent` (the ledger is written by the indexer)."""

    def __init__(self) -> None:
        super().__init__(transcoder=JSONTranscoder())

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[str]:
        """A :class:`LedgerEvent` for a stored row; no topic resolution, no class lookup."""
        return LedgerEvent(
            str(stored_event.originator_id),
            stored_event.originator_version,
            stored_event.topic,
            stored_event.state,
        )

    def to_stored_event(self, domain_event: DomainEventProtocol[str]) -> StoredEvent:
        """Refused: rows enter the ledger through the indexer, never through an application."""
        raise LedgerError(
            "the ledger application is read-only: expected no saves, found one",
            hint="index trace records with pentrace.infrastructure.ledger.indexer",
        )


class LedgerApplication(Application[str]):
    """Read-only application whose recorder is the RuntimeEvent ledger."""

    name = "RuntimeEventLedger"

    def construct_mapper(self) -> Mapper[str]:
        """The ledger's mapper."""
        return LedgerMapper()

    def construct_recorder(self) -> ApplicationRecorder:
        """Open the ledger the environment names."""
        env = {key: str(value) for key, value in self.env.items()}
        return open_ledger(LedgerSettings.from_env(env), DataRoot.from_env(env).path)

    def close(self) -> None:
        """Close the application and the ledger's connections."""
        super().close()
        if isinstance(self.recorder, RuntimeEventLedger):
            self.recorder.close()
