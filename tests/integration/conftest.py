"""Fixtures every integration suite can take by name.

``ledger_backend``: each ledger backend in turn (:mod:`.ledger_backends`).
``env``: the analytics stores, SQLite and PostgreSQL in turn (:mod:`.analytics_backends`).
``browser``: one headless Chromium per test module (:mod:`.browser`).
"""

from tests.integration.analytics_backends import env
from tests.integration.browser import browser
from tests.integration.ledger_backends import ledger_backend

__all__ = ["browser", "env", "ledger_backend"]
