"""The built-in analytics projections; each module is meant to be read as an example.

This module holds what the ones that count per model share: each session's provider and
model at the time of an event (:class:`SessionModels`).
"""

from typing import ClassVar

from pentrace.infrastructure.analytics.api import AnalyticsProjection, handles
from pentrace.infrastructure.analytics.readmodel import Transaction
from pentrace.projections.analytics.events import AnalyticsEvent


def _text(value: object) -> str:
    return value if isinstance(value, str) else "unknown"


def model_entry(provider: object, model_id: object) -> tuple[str, str]:
    """A ``session_meta``'s ``(provider, model)`` as the read models keep it (``unknown`` for
    anything but a string)."""
    return _text(provider), _text(model_id)


class SessionModels(AnalyticsProjection):
    """A projection that knows each session's ``(provider, model)``: ``models_table`` (in its
    ``schema``: a ``session_id`` key, ``provider`` and ``model`` columns) with a per-instance
    memo; a runner that rolls back stops and is rebuilt, so the memo never outlives a
    transaction it saw."""

    models_table: ClassVar[str] = ""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._models: dict[str, tuple[str, str]] = {}

    @handles("session.created", "session.updated")
    def on_meta(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Remember the session's provider and model."""
        entry = model_entry(event.payload.get("provider"), event.payload.get("model_id"))
        self._models[event.session] = entry
        tx.put(self.models_table, {"session_id": event.session}, provider=entry[0], model=entry[1])

    def model_of(self, session: str, tx: Transaction) -> tuple[str, str]:
        """The session's provider and model now (``unknown`` before any ``session_meta``)."""
        known = self._models.get(session)
        if known is None:
            row = tx.get(self.models_table, {"session_id": session})
            known = (row["provider"], row["model"]) if row else ("unknown", "unknown")
            self._models[session] = known
        return known
