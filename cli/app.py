"""The ``pentrace`` command: the typer app and its entry point."""

from __future__ import annotations

import typer

from pentrace import __version__

app = typer.Typer(
    name="pentrace",
    help="Record, replay, resume and audit LLM agent sessions.",
    no_args_is_help=True,
    add_completion=True,
)


@app.callback()
def _root() -> None:
    """Record, replay, resume and audit LLM agent sessions."""


@app.command()
def version() -> None:
    """Print the pentrace version.

    Example: pentrace version
    """
    typer.echo(__version__)


def main() -> None:
    app()
