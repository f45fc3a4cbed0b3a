"""The bulk ``ledger sync``: the fast path into the ledger, tied to the exact path's rows.

See README.md for what it is the fast path of, and the tests that tie the two.
"""

from pentrace.infrastructure.ledger.bulk.build import (
    SESSION_ERRORS,
    SessionFailure,
    SyncReport,
    build_session,
)
from pentrace.infrastructure.ledger.bulk.run import auto_workers, die_with_parent, sync

__all__ = [
    "SESSION_ERRORS",
    "SessionFailure",
    "SyncReport",
    "auto_workers",
    "build_session",
    "die_with_parent",
    "sync",
]
