"""Analytics projections over the RuntimeEvent ledger: developer API, read models, runner.

See ``docs/projections.md``.  Write a projection with
:class:`~pentrace.infrastructure.analytics.api.AnalyticsProjection` and
:func:`~pentrace.infrastructure.analytics.api.handles`; run it with
:class:`~pentrace.infrastructure.analytics.runner.AnalyticsRunner` or
:func:`~pentrace.infrastructure.analytics.runner.catch_up`; rebuild it from the
traces with :func:`~pentrace.infrastructure.analytics.rebuild.rebuild`.
"""

from pentrace.infrastructure.analytics.api import AnalyticsProjection, handles
from pentrace.infrastructure.analytics.readmodel import ReadModel, Transaction
from pentrace.projections.analytics.events import AnalyticsEvent

__all__ = ["AnalyticsEvent", "AnalyticsProjection", "ReadModel", "Transaction", "handles"]
