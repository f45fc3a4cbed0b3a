"""A click group that imports a command's module only when the command is needed.

Typer builds click commands from functions and Typer apps; this group keeps a
table of ``name -> "module:attribute"`` and turns the attribute into a click
command on first use.  Listing the commands (``--help``, completion, the docs
generator) loads them all, which is fine: that is not a hot path.
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup


def _load(target: str, name: str) -> Any:
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute)
    if isinstance(value, typer.Typer):
        return typer.main.get_command(value)
    holder = typer.Typer()
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
        return super().get_command(ctx, cmd_name)
