"""Analytics projections over the RuntimeEvent ledger: developer API, read models, runner.

See ``docs/projections.md``.  Write a projection with
:class:`~pentrace.infrastructure.analytics.api.AnalyticsProjection` and
:func:`~pentrace.infrastructure.analytics.api.handles`; run it with
:class:`~pentrace.infrastructure.analytics.runner.AnalyticsRunner` or
:func:`~pentrace.infrastructure.analytics.runner.catch_up`; rebuild it from the
traces with :func:`~pentrace.infrastructure.analytics.rebuild.rebuild`.

The names below load on first use: a light module of the package (the price
table, which ``pentrace list`` reads) must not pull in SQLAlchemy (ADR 0008).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pentrace.infrastructure.analytics.api import AnalyticsProjection, handles
    from pentrace.infrastructure.analytics.readmodel import ReadModel, Transaction
    from pentrace.projections.analytics.events import AnalyticsEvent

__all__ = ["AnalyticsEvent", "AnalyticsProjection", "ReadModel", "Transaction", "handles"]

_HOMES = {
    "AnalyticsProjection": "pentrace.infrastructure.analytics.api",
    "handles": "pentrace.infrastructure.analytics.api",
    "ReadModel": "pentrace.infrastructure.analytics.readmodel",
    "Transaction": "pentrace.infrastructure.analytics.readmodel",
    "AnalyticsEvent": "pentrace.projections.analytics.events",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
