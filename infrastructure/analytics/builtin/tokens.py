"""Built-in: token use per request, per day / project / agent / provider / model / session,
and per UTC minute / project / agent / provider / model (``tok_minutes``, the finer time
buckets: an hour is its minutes' sum; version 2, ADR 0053).

``requests`` counts requests begun and the token columns sum every
``token_usage`` (:mod:`pentrace.projections.session_summary`), so
``stats tokens`` agrees with ``pentrace show`` for every session.

Cost is not stored: ``pentrace stats cost`` prices these counts with the
price table when it reads them, so editing ``prices.toml`` never needs a
rebuild.  A request's model is the session's model when its ``token_usage``
arrives (a later ``session_meta`` with another ``model_id`` is a switch).

A cold build (ADR 0050) fills the same rows with :class:`TokenFold` (ADR 0062),
which reads the trace records without the per-event envelopes.
"""

from __future__ import annotations

from typing import ClassVar

from pentrace.infrastructure.analytics.api import handles
from pentrace.infrastructure.analytics.builtin import SessionModels
from pentrace.infrastructure.analytics.cold.token_fold import TokenFold
from pentrace.infrastructure.analytics.readmodel import Transaction
from pentrace.projections.analytics.events import AnalyticsEvent, token_delta

__all__ = ["TokenUse"]

_COUNTS = "input BIGINT, output BIGINT, cache_read BIGINT, cache_write BIGINT, total BIGINT"


class TokenUse(SessionModels):
    """Token counts from ``token.usage.updated``, attributed to the session's model at the time."""

    name = "tokens"
    version = 2
    schema: ClassVar[tuple[str, ...]] = (
        "CREATE TABLE IF NOT EXISTS tok_sessions (session_id VARCHAR(600) PRIMARY KEY, "
        "provider TEXT, model TEXT)",
        "CREATE TABLE IF NOT EXISTS tok_daily (day VARCHAR(10), project VARCHAR(200), "
        "agent VARCHAR(200), provider VARCHAR(200), model VARCHAR(200), session_id VARCHAR(600), "
        f"requests BIGINT, usage_records BIGINT, {_COUNTS}, "
        "PRIMARY KEY (day, project, agent, provider, model, session_id))",
        "CREATE TABLE IF NOT EXISTS tok_requests (session_id VARCHAR(600), sequence BIGINT, "
        f"time_ms BIGINT, model VARCHAR(200), {_COUNTS}, PRIMARY KEY (session_id, sequence))",
        "CREATE TABLE IF NOT EXISTS tok_minutes (minute VARCHAR(16), project VARCHAR(200), "
        "agent VARCHAR(200), provider VARCHAR(200), model VARCHAR(200), "
        f"requests BIGINT, usage_records BIGINT, {_COUNTS}, "
        "PRIMARY KEY (minute, project, agent, provider, model))",
    )
    models_table = "tok_sessions"
    #: A cold build's rows straight from the trace records (ADR 0062).
    bulk_fold: ClassVar[type[TokenFold]] = TokenFold

    def _daily_key(self, event: AnalyticsEvent, tx: Transaction) -> dict[str, str]:
        provider, model = self.model_of(event.session, tx)
        return {
            "day": event.day,
            "project": event.scope.project_id or "",
            "agent": event.scope.agent_id or "",
            "provider": provider,
            "model": model,
            "session_id": event.session,
        }

    @staticmethod
    def _minute_key(event: AnalyticsEvent, daily: dict[str, str]) -> dict[str, str]:
        return {
            "minute": event.minute,
            **{name: daily[name] for name in ("project", "agent", "provider", "model")},
        }

    @handles("run.started")
    def on_request(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Count the request when it begins, however it ends (``session_numbers``)."""
        key = self._daily_key(event, tx)
        tx.add("tok_daily", key, requests=1)
        tx.add("tok_minutes", self._minute_key(event, key), requests=1)

    @handles("token.usage.updated")
    def on_usage(self, event: AnalyticsEvent, tx: Transaction) -> None:
        """Add the request's counts to its day/model/session row and keep the request row.

        Every ``token_usage`` counts, committed or not (``session_numbers``).
        """
        delta = token_delta(event.payload)
        if delta is None:
            return
        session = event.session
        model = self.model_of(session, tx)[1]
        fresh, output, cache_read, cache_write, total = delta
        key = self._daily_key(event, tx)
        counts = {
            "input": fresh,
            "output": output,
            "cache_read": cache_read,
            "cache_write": cache_write,
            "total": total,
        }
        tx.add("tok_daily", key, usage_records=1, **counts)
        tx.add("tok_minutes", self._minute_key(event, key), usage_records=1, **counts)
        tx.put(
            "tok_requests",
            {"session_id": session, "sequence": event.sequence},
            time_ms=event.time,
            model=model,
            **counts,
        )
