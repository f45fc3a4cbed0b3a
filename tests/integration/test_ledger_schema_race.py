"""Several processes creating one new PostgreSQL ledger at once all succeed.

Agent hosts' followers started together against a fresh database used to fail
one in three with "duplicate key value violates unique constraint
pg_type_typname_nsp_index" (a PostgreSQL race of parallel ``CREATE TABLE IF
NOT EXISTS``), reported as a unique-key conflict of the ledger.  Skipped
without ``PENTRACE_TEST_DATABASE_URL``.
"""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from pentrace.infrastructure.ledger import LedgerDatabase

URL = os.environ.get("PENTRACE_TEST_DATABASE_URL")
OPENERS = 6

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(URL is None, reason="set PENTRACE_TEST_DATABASE_URL to a PostgreSQL URL"),
]


@pytest.mark.parametrize("attempt", range(2))
def test_openers_of_a_fresh_ledger_at_the_same_moment_all_get_the_schema(attempt: int) -> None:
    assert URL is not None
    prefix = f"race{attempt}_{uuid.uuid4().hex[:8]}_"
    start = threading.Barrier(OPENERS)
    failures: list[BaseException] = []
    opened: list[LedgerDatabase] = []

    def open_one() -> None:
        start.wait()
        try:
            opened.append(LedgerDatabase(URL, table_prefix=prefix))
        except BaseException as error:  # noqa: BLE001 - every failure is reported below
            failures.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert failures == []
        assert len(opened) == OPENERS
    finally:
        for database in opened:
            database.close()
        cleaner = LedgerDatabase(URL, table_prefix=prefix)
        cleaner.drop_all()
        cleaner.close()
