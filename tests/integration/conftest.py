"""Fixtures every integration suite can take by name.

``ledger_backend``: each ledger backend in turn (:mod:`.ledger_backends`).
"""

from tests.integration.ledger_backends import ledger_backend

__all__ = ["ledger_backend"]
