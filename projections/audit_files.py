"""Audit findings about files rather than records: shard numbering, unparsable lines and
healed fragments (from the reader's report), and stale temp files."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Final

from pentrace.projections.audit_problem import Fix, Problem, Severity

__all__ = ["parse_problems", "shard_index_problems", "temp_file_problems"]


def shard_index_problems(session_id: str, shards: Sequence[tuple[int, str]]) -> list[Problem]:
    """Gaps (``_001``, ``_003``) and duplicates in a session's shard indexes.

    ``shards`` holds ``(index, path)`` pairs in any order.
    """
    problems: list[Problem] = []
    ordered = sorted(shards)
    for (index, path), (next_index, next_path) in itertools.pairwise(ordered):
        if index == next_index:
            problems.append(
                Problem(
                    code="duplicate_shard",
                    severity="error",
                    message=f"shard index {index:03d} appears twice (also {path}); "
                    "the record order is ambiguous",
                    session_id=session_id,
                    path=next_path,
                )
            )
    expected = 1
    for index, path in ordered:
        if index > expected:
            missing = ", ".join(f"_{n:03d}" for n in range(expected, index))
            problems.append(
                Problem(
                    code="shard_gap",
                    severity="error",
                    message=f"expected shard _{expected:03d} before _{index:03d}, "
                    f"found none (missing {missing})",
                    session_id=session_id,
                    path=path,
                )
            )
        expected = max(expected, index + 1)
    return problems


# What each kind of line the reader reports becomes: code, severity, message, fix.
_PARSE_PROBLEMS: Final[tuple[tuple[str, Severity, str, Fix | None], ...]] = (
    ("malformed_line", "error", "line is not a record: {reason}", None),
    (
        "torn_tail",
        "warning",
        "the last line is cut short (a crash mid-write): {reason}",
        "heal_torn_tail",
    ),
    (
        "healed_torn_fragment",
        "warning",
        "a record cut short by a crash, healed: the next writer started its "
        "first record on a new line; readers skip the fragment and import keeps it",
        None,
    ),
)


def parse_problems(
    session_id: str,
    skipped: Iterable[tuple[str, int, str]],
    torn: Iterable[tuple[str, int, str]],
    healed: Iterable[tuple[str, int, str]] = (),
) -> list[Problem]:
    """Problems for the reader's malformed lines, torn tails and healed torn fragments,
    each as ``(path, line, reason)``."""
    problems: list[Problem] = []
    for (code, severity, message, fix), found in zip(
        _PARSE_PROBLEMS, (skipped, torn, healed), strict=True
    ):
        problems.extend(
            Problem(
                code=code,
                severity=severity,
                message=message.format(reason=reason),
                session_id=session_id,
                path=path,
                line=line,
                fix=fix,
            )
            for path, line, reason in found
        )
    return problems


def temp_file_problems(session_id: str, temps: Iterable[tuple[str, int]]) -> list[Problem]:
    """Stale hidden temp files of a session, as ``(path, pid)``; ``--fix`` removes them."""
    return [
        Problem(
            code="stale_temp_file",
            severity="warning",
            message=f"a hidden temp file left by writer pid {pid}, which is gone (killed while "
            "rotating or writing a checkpoint); nothing reads it",
            session_id=session_id,
            path=path,
            fix="remove_temp",
        )
        for path, pid in temps
    ]
