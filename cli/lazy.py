"""A click group that imports a command's module only when the command is needed.

Typer builds click commands from functions and Typer apps; this group keeps a
table of ``name -> "module:attribute"`` and turns the attribute into a click
command on first use.  Listing the commands (``--help``, completion, the docs
generator) loads them all, which is fine: that is not a hot path.

The group is also where the CLI conventions (docs/cli.md, ADR 0025) are
applied to every command: plain help, and click's usage errors printed as one
``error:`` line plus a ``hint:`` (exit code 2) instead of a box.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup

# The click that typer runs on (typer 0.29 vendors its own copy): its exception classes.
CLICK_ERROR: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_errors = sys.modules[CLICK_ERROR.__module__]
_NO_ARGS: Any = getattr(_errors, "NoArgsIsHelpError", ())
_ABORT: tuple[Any, ...] = (typer.Abort, getattr(_errors, "Abort", typer.Abort))


def _plain(command: Any) -> Any:
    """Plain help text (the same as docs/cli.md): no boxes, no ``<bool>`` on flags."""
    if command is not None:
        command.rich_markup_mode = None
        for sub in getattr(command, "commands", {}).values():
            _plain(sub)
    return command


def _load(target: str, name: str) -> Any:
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute)
    if isinstance(value, typer.Typer):
        # Completion is the root's business (pentrace --install-completion), not each group's.
        value._add_completion = False
        return typer.main.get_command(value)
    holder = typer.Typer(add_completion=False)
    holder.command(name)(value)
    return typer.main.get_command(holder)  # one command: typer returns the command itself


class LazyGroup(TyperGroup):
    """The ``pentrace`` root group with lazily imported commands."""

    lazy_commands: ClassVar[dict[str, str]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            command = _load(self.lazy_commands[cmd_name], cmd_name)
            command.name = cmd_name
            self.add_command(command, cmd_name)
        return _plain(super().get_command(ctx, cmd_name))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; usage errors print in the project's one-line style and exit 2."""
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except _NO_ARGS as error:
            if not standalone_mode:
                raise
            if error.format_message().strip():  # rich help has printed itself already
                error.show()
            sys.exit(error.exit_code)
        except CLICK_ERROR as error:
            if not standalone_mode:
                raise
            report_usage_error(error)
            sys.exit(error.exit_code)
        except _ABORT:
            if not standalone_mode:
                raise
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def report_usage_error(error: Any) -> None:
    """``error: <what>`` and ``hint: <how to see the usage>`` on stderr, no box."""
    message = error.format_message()
    context = getattr(error, "ctx", None)
    where = context.command_path if context is not None else "pentrace"
    typer.echo(f"error: {where}: {message[:1].lower()}{message[1:]}", err=True)
    typer.echo(f"hint: `{where} -h` shows the usage", err=True)
