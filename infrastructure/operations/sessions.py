"""The sessions of a data root, for every command and route about one or many of them
(ADR 0103): naming them (a reference resolved to a :class:`SessionRef`), listing them
from the catalog, reading their records and replay, forking, pruning and deleting them,
and the user-given inputs beside them (the data root, a config file, a file to send).

Light on purpose: every ``pentrace`` command that takes a session imports this module,
so it loads neither SQLAlchemy nor eventsourcing (``tests/unit/test_cli_lazy.py``).
"""

from __future__ import annotations

from pentrace.infrastructure.catalog.listing import (
    SORT_KEYS,
    STATUS_CHOICES,
    SessionFilter,
    SessionRow,
    list_sessions,
    parse_time_bound,
    read_row,
    resolve_session,
    short_id,
)
from pentrace.infrastructure.redaction_policy import activate_policy
from pentrace.infrastructure.sessions.files import delete_session
from pentrace.infrastructure.sessions.fork import fork_session, read_replay, record_at
from pentrace.infrastructure.sessions.prune import (
    PruneCandidate,
    PruneOutcome,
    apply_prune,
    plan_prune,
)
from pentrace.infrastructure.sessions.refs import REFERENCE_HELP, ambiguous
from pentrace.infrastructure.storage.inputs import check_data_root, open_regular, read_config_text
from pentrace.infrastructure.storage.layout import DataRoot, SessionRef, ShardRef, parse_shard_name
from pentrace.infrastructure.trace.reader import ParseReport, read_shard, resume_trace_file

__all__ = [
    "REFERENCE_HELP",
    "SORT_KEYS",
    "STATUS_CHOICES",
    "DataRoot",
    "ParseReport",
    "PruneCandidate",
    "PruneOutcome",
    "SessionFilter",
    "SessionRef",
    "SessionRow",
    "ShardRef",
    "activate_policy",
    "ambiguous",
    "apply_prune",
    "check_data_root",
    "delete_session",
    "fork_session",
    "list_sessions",
    "open_regular",
    "parse_shard_name",
    "parse_time_bound",
    "plan_prune",
    "read_config_text",
    "read_replay",
    "read_row",
    "read_shard",
    "record_at",
    "resolve_session",
    "resume_trace_file",
    "short_id",
]
