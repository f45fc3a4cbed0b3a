"""What every ``pentrace ledger`` command shares: ``--wait``, and opening the ledger."""

from __future__ import annotations

import typer

from pentrace.cli.sessions.args import data_root
from pentrace.infrastructure.ledger import RuntimeEventLedger
from pentrace.infrastructure.ledger.opener import open_ledger

__all__ = ["LedgerOptions", "open_for_command"]


class LedgerOptions:
    """The group's options (``--wait``), handed to every command through ``ctx.obj``."""

    def __init__(self, wait: float) -> None:
        self.wait = wait


def open_for_command(
    ctx: typer.Context, *, must_exist: bool = True, keep: bool = False, read_only: bool = False
) -> RuntimeEventLedger:
    """The configured ledger with the group's lock wait (see :func:`.opener.open_ledger`)."""
    options: LedgerOptions = ctx.obj
    return open_ledger(
        data_root=data_root(ctx),
        wait_seconds=options.wait,
        must_exist=must_exist,
        keep_everything=keep,
        read_only=read_only,
        redaction_policy=False,  # the command activated the data root's policy already
    )
