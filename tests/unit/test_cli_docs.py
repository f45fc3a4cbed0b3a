"""The CLI reference is generated from --help and every command shows an example."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.cli import docgen

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_docs_cli_md_is_generated_from_the_current_help() -> None:
    assert DOCS.read_text(encoding="utf-8") == docgen.render(), (
        "docs/cli.md is stale: run `python -m pentrace.cli.docgen > docs/cli.md`"
    )


@pytest.mark.parametrize(
    ("path", "command"),
    list(docgen.iter_commands()),
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_every_command_has_help_with_an_example(path: list[str], command: object) -> None:
    parent = None
    text = docgen.plain_help(command, path, parent)
    assert "Example" in text, f"`{' '.join(path)} --help` has no example"
    assert len(text.splitlines()) > 3
