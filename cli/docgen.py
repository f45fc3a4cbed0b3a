"""Generate ``docs/cli.md`` from the commands' own ``--help`` text.

``python -m pentrace.cli.docgen > docs/cli.md`` regenerates it; a test fails
when the committed file is stale.  Help is rendered with click's plain
formatter at a fixed width, so the output does not depend on the terminal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer

from pentrace.cli.app import app
from pentrace.cli.lazy import LazyGroup
from pentrace.cli.options import CONVENTIONS

WIDTH = 100

_PREAMBLE = """\
# CLI reference

Generated from `--help` by `python -m pentrace.cli.docgen > docs/cli.md`; do not
edit by hand (a test fails when this file is stale).

Every read command accepts `--json`. Its output is a contract: fields are only
ever added, never renamed or removed, so consumers should ignore fields they do
not know. Errors print one line `error: ...` and a `hint: ...` on stderr and exit
non-zero (2 for usage errors); `--debug` shows the traceback.

A SESSION is named by its id, a unique prefix of it, or (a prefix of) its 8-hex
token, and, when the same id exists under several agents or projects, by its
owner too: `project/agent/session-id` or `agent/session-id`, also with a prefix
(`docs/sessions.md`, "Naming a session"). An ambiguous one lists the candidates
in that form.

Paths: a path a command reads (`import FILE`, `resume-check PATH`, `--prices`,
`--token-file`) must be a regular file; a FIFO, a device such as `/dev/zero`, a
socket or a folder (or a symlink to one) is refused at once, never read. Inputs
read whole into memory (`--prices`, `--token-file`) stop at 1 MiB; traces are
streamed, and one trace line may be at most 512 MiB long. Outputs (`-o`,
`--plot`) are written atomically with mode 0600 and only ever replace a regular
file. `--data-root` must be a folder.
"""
_CONTENTS = "## Commands\n"


def _anchor(path: str) -> str:
    return "#" + path.replace(" ", "-")


def tasks() -> str:
    """The commands by task, as ``pentrace --help`` groups them, and the old spellings."""
    lines = [
        "## Commands by task",
        "",
        "`pentrace --help` lists the commands under these headings:",
        "",
    ]
    for title, names in LazyGroup.panels:
        linked = ", ".join(f"[`{name}`]({_anchor(f'pentrace {name}')})" for name in names)
        lines.append(f"- **{title}**: {linked}")
    lines += [
        "",
        "## Old spellings",
        "",
        "Earlier names of commands still work, with the same options, output and exit",
        "codes; the help no longer lists them (ADR 0092). Scripts need not change.",
        "",
        "| old spelling | the command it is now |",
        "| --- | --- |",
    ]
    for old, new in LazyGroup.aliases.items():
        lines.append(f"| `pentrace {old}` | [`pentrace {new}`]({_anchor(f'pentrace {new}')}) |")
    return "\n".join(lines) + "\n"


def _walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    if not hasattr(command, "list_commands"):
        return
    # list_commands/get_command, not .commands: the root group loads commands lazily.
    ctx = command.make_context(path[-1], [], resilient_parsing=True)
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is not None and not getattr(sub, "hidden", False):
            yield from _walk(sub, [*path, name])


def plain_help(command: Any, path: list[str], parent: Any) -> str:
    saved = getattr(command, "rich_markup_mode", None)
    command.rich_markup_mode = None
    try:
        ctx = command.make_context(
            path[-1],
            ["--help"],
            parent=parent,
            resilient_parsing=True,
            terminal_width=WIDTH,
            max_content_width=WIDTH,
        )
        return str(command.get_help(ctx))
    finally:
        command.rich_markup_mode = saved


def iter_commands() -> Iterator[tuple[list[str], Any]]:
    """Every visible command as ``(["pentrace", ...], click command)``."""
    return _walk(typer.main.get_command(app), ["pentrace"])


def render() -> str:
    """The whole Markdown reference, one section per command."""
    parts = [_PREAMBLE, CONVENTIONS, tasks(), _CONTENTS]
    contexts: dict[str, Any] = {}
    for path, command in iter_commands():
        parent = contexts.get(" ".join(path[:-1]))
        text = plain_help(command, path, parent)
        contexts[" ".join(path)] = command.make_context(
            path[-1], [], parent=parent, resilient_parsing=True
        )
        heading = "#" * min(len(path) + 2, 4)
        parts.append(f"{heading} `{' '.join(path)}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(render(), end="")
