"""The data root a command works on, and the check that it exists.

A root that does not exist (a typo in ``--data-root`` or ``PENGUIN_HOME``)
must not read as "no sessions": every command that reads refuses it with a
message naming where the path came from.  Commands that create sessions
(``import``, ``demo``, ``ledger import-penguin``) ask for the root with ``must_exist=False``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pentrace.errors import UsageError
from pentrace.infrastructure.operations.sessions import DataRoot, check_data_root

__all__ = ["root_from_context"]


def _source(ctx: typer.Context) -> str:
    root_ctx = ctx.find_root()
    given = root_ctx.get_parameter_source("data_root")
    name = given.name if given is not None else "DEFAULT"
    if name == "COMMANDLINE":
        return "--data-root"
    if name == "ENVIRONMENT":
        return "$PENGUIN_HOME"
    return "the default root (no --data-root, $PENGUIN_HOME unset)"


def root_from_context(ctx: typer.Context, *, must_exist: bool = True) -> DataRoot:
    """The root given by ``--data-root`` / ``PENGUIN_HOME``, else ``~/.penguin/data``.

    With ``must_exist`` (the default) a path that is missing or not a folder
    is a :class:`~pentrace.errors.UsageError` (exit code 2).
    """
    settings: Any = ctx.find_root().obj
    configured: Path | None = getattr(settings, "data_root", None)
    if configured is not None:
        root = DataRoot(configured.expanduser().absolute())
    else:
        root = DataRoot.from_env()
    check_data_root(root.path)  # a file or FIFO named as the root is refused at once
    if must_exist and not root.path.is_dir():
        what = "is not a folder" if root.path.exists() else "does not exist"
        raise UsageError(
            f"data root {root.path} {what} (from {_source(ctx)})",
            hint="check the path in --data-root or $PENGUIN_HOME; "
            "`pentrace demo` or `pentrace import` create a root",
        )
    return root
