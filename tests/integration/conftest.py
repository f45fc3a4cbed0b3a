"""Fixtures every integration suite can take by name.

``ledger_backend``: each ledger backend in turn (:mod:`.ledger_backends`).
``env``: the analytics stores, SQLite and PostgreSQL in turn (:mod:`.analytics_backends`).
"""

from tests.integration.analytics_backends import env
from tests.integration.ledger_backends import ledger_backend

__all__ = ["env", "ledger_backend"]
