"""Published Hypothesis strategies for property-testing code that reads pentrace traces.

>>> from hypothesis import given
>>> from pentrace.testing import trace_records

See ``docs/testing.md`` for the model of legal sessions and runnable examples.
"""

from __future__ import annotations

# The command values are re-exported as ``commands.__all__`` lists them, so that list is
# written once; the star import is that re-export.
from pentrace.testing import commands
from pentrace.testing.commands import *  # noqa: F403
from pentrace.testing.files import truncate_file, write_shards, write_trace
from pentrace.testing.render import (
    apply_command,
    command_time,
    drive_session,
    format_timestamp,
    payload_for,
    render_shards,
    start_session,
)
from pentrace.testing.strategies import (
    crash_points,
    cut,
    session_commands,
    split_lines,
    trace_records,
)

# The helpers, then every command value (``commands.__all__``).
__all__ = [
    "apply_command",
    "command_time",
    "crash_points",
    "cut",
    "drive_session",
    "format_timestamp",
    "payload_for",
    "render_shards",
    "session_commands",
    "split_lines",
    "start_session",
    "trace_records",
    "truncate_file",
    "write_shards",
    "write_trace",
]
__all__ += commands.__all__
