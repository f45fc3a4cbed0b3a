"""A click group that imports a command's module only when the command is needed.

Typer builds click commands from functions and Typer apps; this group keeps a
table of ``name -> "module:attribute"`` and turns the attribute into a click
command on first use.  Listing the commands (``--help``, completion, the docs
generator) loads them all, which is fine: that is not a hot path.

The group is also where the CLI conventions (docs/cli.md, ADR 0025) are
applied to every command: plain help, and click's usage errors printed as one
``error:`` line plus a ``hint:`` (exit code 2) instead of a box.

Its help lists the commands by task, in :attr:`LazyGroup.panels` (ADR 0092),
and it answers the old spellings in :attr:`LazyGroup.aliases` with hidden
copies of the commands they now name, so scripts keep working.
"""

from __future__ import annotations

import copy
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


def _alias(command: Any, name: str, *, hidden: bool) -> Any:
    """A copy of ``command`` answering to ``name`` (an old spelling)."""
    alias = copy.copy(command)
    alias.name, alias.hidden = name, hidden
    return alias


class LazyGroup(TyperGroup):
    """The ``pentrace`` root group with lazily imported commands."""

    lazy_commands: ClassVar[dict[str, str]] = {}
    # (panel title, command names in the order they are shown); help lists them so.
    panels: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    # old spelling ("sessions list") -> the command it now is ("list"); hidden from help.
    aliases: ClassVar[dict[str, str]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        known = {*super().list_commands(ctx), *self.lazy_commands}
        ordered = [name for _, names in self.panels for name in names if name in known]
        return ordered + sorted(known - set(ordered))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            command = _load(self.lazy_commands[cmd_name], cmd_name)
            command.name = cmd_name
            self.add_command(command, cmd_name)
            self._add_aliases(ctx, cmd_name, command, hidden=True)
        elif cmd_name not in self.commands and self._alias_parent(cmd_name):
            # An old group that no longer exists ("sessions"): hidden, holding its aliases.
            group = TyperGroup(name=cmd_name, hidden=True, help=self._alias_help(cmd_name))
            group.no_args_is_help = True
            self.add_command(group, cmd_name)
            self._add_aliases(ctx, cmd_name, group, hidden=False)
        return _plain(super().get_command(ctx, cmd_name))

    def _alias_parent(self, name: str) -> bool:
        return any(old.split()[0] == name and " " in old for old in self.aliases)

    def _alias_help(self, name: str) -> str:
        pairs = [(o, n) for o, n in self.aliases.items() if o.split()[0] == name]
        said = "; ".join(f"`pentrace {old}` is `pentrace {new}`" for old, new in pairs)
        return f"Old spellings, kept so that scripts keep working: {said}."

    def _add_aliases(self, ctx: Any, name: str, group: Any, *, hidden: bool) -> None:
        """Copies, in ``group``, of the commands its old spellings now name (``hidden`` in a
        group that has commands of its own; listed in an old group that holds only them)."""
        for old, new in self.aliases.items():
            parent, _, leaf = old.rpartition(" ")
            if parent != name:
                continue
            target: Any = self
            for part in new.split():
                target = target.get_command(ctx, part)
            group.add_command(_alias(target, leaf, hidden=hidden), leaf)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands under one heading per task (:attr:`panels`), then any others."""
        shown = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                shown[name] = command
        if not shown:
            return
        width = max(map(len, shown))
        limit = formatter.width - 6 - width
        sections = [(title, [n for n in names if n in shown]) for title, names in self.panels]
        placed = {name for _, names in sections for name in names}
        sections.append(("Other commands", [n for n in shown if n not in placed]))
        for title, names in sections:
            if names:
                with formatter.section(title):
                    # One name column for every section, so the descriptions line up.
                    rows = [(n.ljust(width), shown[n].get_short_help_str(limit)) for n in names]
                    formatter.write_dl(rows)

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
