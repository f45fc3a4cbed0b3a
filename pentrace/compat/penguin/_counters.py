"""Penguin's in-process sequence counters (one per stream id), and the process's home and cwd."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Final

__all__ = ["home_and_cwd", "next_sequence", "raise_counter", "reset_runtime_event_sequences"]

_lock: Final = threading.Lock()
_counters: dict[str, int] = {}


def next_sequence(stream_id: str) -> int:
    """The stream's next sequence, from 1."""
    with _lock:
        number = _counters.get(stream_id, 0) + 1
        _counters[stream_id] = number
        return number


def raise_counter(stream_id: str, sequence: int) -> None:
    """Make the stream's next automatic sequence come after ``sequence``."""
    with _lock:
        _counters[stream_id] = max(_counters.get(stream_id, 0), sequence)


def raise_counters(high_water: Mapping[str, int]) -> None:
    """:func:`raise_counter` for every stream of ``high_water``."""
    with _lock:
        for stream_id, sequence in high_water.items():
            _counters[stream_id] = max(_counters.get(stream_id, 0), sequence)


def reset_runtime_event_sequences(high_water: Mapping[str, int] | None = None) -> None:
    """Forget every per-stream counter; with ``high_water``, continue after those sequences.

    Pass the ledger's highest stored sequence per stream after a restart so new
    events do not reuse ids the ledger already holds (Penguin's W1).
    """
    with _lock:
        _counters.clear()
        _counters.update(high_water or {})


def home_and_cwd() -> tuple[str, str]:
    """What Penguin's ``Path.expanduser().resolve()`` reads: the home and working directory."""
    return os.path.expanduser("~"), os.getcwd()
