"""``pentrace ledger ...``: tail, events, sync, rebuild, cleanup, forget, status, import-penguin.

``events`` and ``status`` were ``replay`` and ``stats``; the root group answers
the old names too (``pentrace.cli.app``, ADR 0092).

The ledger is derived from the traces; ``sync`` and ``rebuild`` make it agree
with them.  ``--wait`` bounds how long a command waits for another process's
write lock before it fails with a clean "locked" error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from pentrace.cli.ledger.maintenance import cleanup, forget, import_penguin, rebuild, sync
from pentrace.cli.ledger.reading import LedgerOptions, replay, stats, tail
from pentrace.cli.options import INDEXING_HELP

__all__ = ["ledger_app"]

ledger_app = typer.Typer(
    name="ledger",
    no_args_is_help=True,
    help=INDEXING_HELP,
)


@ledger_app.callback()
def _group(
    ctx: typer.Context,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another process's lock before failing.")
    ] = 5.0,
) -> None:
    """Inspect and maintain the RuntimeEvent ledger (derived from the traces).

    Example: pentrace ledger --wait 1 sync
    """
    ctx.obj = LedgerOptions(wait)


# Registered in this order, the order `pentrace ledger --help` lists them in.
ledger_app.command()(tail)
ledger_app.command("events")(replay)
for command in (sync, rebuild, cleanup, forget):
    ledger_app.command()(command)
ledger_app.command("status")(stats)
ledger_app.command("import-penguin")(import_penguin)
