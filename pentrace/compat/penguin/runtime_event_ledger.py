"""Penguin's ``penguin.system.runtime_event_ledger`` module, name for name (see :mod:`.ledger`)."""

from __future__ import annotations

from pentrace.compat.penguin import ledger
from pentrace.compat.penguin.ledger import *  # noqa: F403

__all__ = list(ledger.__all__)
