"""docs/architecture.md stays true to the code: its folder tree is the folders, and every
file its checklists name exists (with the function, class or table named after a colon)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
PACKAGES = ("pentrace", "domain", "projections", "infrastructure", "cli", "service")
CHECKLISTS = (
    "Adding a trace record type",
    "Adding a CLI command",
    "Adding a ledger backend",
    "Adding an analytics projection",
    "Adding an agent source",
    "Adding an export target",
)

# A folder line of the tree: an even indentation, then ``name/`` and a blank.
_FOLDER = re.compile(r"^((?:  )*)([a-z_]+)/(?:\s|$)")
_TICKED = re.compile(r"`([^`\s]+)`")
_FILE_LIKE = re.compile(r"\.(?:py|md|html|toml|svg|js|css)$")


def _section(text: str, heading: str) -> str:
    """The text under the ``## heading`` up to the next second-level heading."""
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def tree_folders(text: str) -> set[str]:
    """Every folder the tree block of "Folders: one concept each" names, as a relative path.

    A folder stands at the start of its line; two spaces of indentation more than its
    parent's put it inside that parent.  Other lines (files, continued descriptions, with an
    odd or deeper indentation) name no folder.
    """
    section = _section(text, "## Folders: one concept each")
    block = section.split("```\n")[1]
    folders: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines():
        found = _FOLDER.match(line)
        if found is None:
            continue
        depth = len(found.group(1)) // 2
        if depth > len(stack):
            raise AssertionError(f"tree line nested two levels at once: {line!r}")
        del stack[depth:]
        stack.append(found.group(2))
        folders.add("/".join(stack))
    return folders


def real_folders() -> set[str]:
    """Every folder of the six installed packages (caches and build output left out)."""
    found: set[str] = set()
    for package in PACKAGES:
        top = REPO / package
        found.add(package)
        for path in top.rglob("*"):
            parts = path.relative_to(REPO).parts
            if path.is_dir() and not any(
                part == "__pycache__" or part.startswith(".") or part.endswith(".egg-info")
                for part in parts
            ):
                found.add("/".join(parts))
    return found


def test_the_tree_parser_reads_nested_folders() -> None:
    sample = (
        "# A page\n\n## Folders: one concept each\n\n```\n"
        "top/           one\n"
        "  mid/         two, continued\n"
        "                 on/ a continuation line\n"
        "    low/       three\n"
        "  kinds.py     a file\n"
        "other/\n```\n"
    )
    assert tree_folders(sample) == {"top", "top/mid", "top/mid/low", "other"}


def test_the_folder_tree_matches_the_folders() -> None:
    documented = tree_folders(DOC.read_text(encoding="utf-8"))
    real = real_folders()
    missing = sorted(real - documented)
    gone = sorted(documented - real)
    stale = "docs/architecture.md's folder tree is stale"
    assert missing == [], f"{stale}: add {missing}"
    assert gone == [], f"{stale}: remove {gone}"


def checklist_references(text: str) -> list[tuple[str, str, str | None]]:
    """``(checklist, path, name)`` for every file or folder a checklist names in backticks.

    A path is written from the repository root; ``path:name`` also names a function,
    class or module-level table in that file.  Placeholders (``<name>``) are skipped.
    """
    section = _section(text, "## Checklists")
    references: list[tuple[str, str, str | None]] = []
    for chunk in section.split("\n### ")[1:]:
        title = chunk.splitlines()[0].strip()
        for token in _TICKED.findall(chunk):
            path, _, name = token.partition(":")
            if "<" in token or token.startswith(("/", "-")):
                continue
            if "/" in path or _FILE_LIKE.search(path):
                references.append((title, path, name or None))
    return references


def test_every_checklist_is_there() -> None:
    text = DOC.read_text(encoding="utf-8")
    titles = re.findall(r"^### (.+)$", _section(text, "## Checklists"), flags=re.MULTILINE)
    assert [title for title in CHECKLISTS if title not in titles] == []


def _defines(source: str, name: str) -> bool:
    pattern = rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]"
    return re.search(pattern, source, flags=re.MULTILINE) is not None


@pytest.mark.parametrize(
    ("checklist", "path", "name"),
    checklist_references(DOC.read_text(encoding="utf-8")),
    ids=lambda value: str(value),
)
def test_every_file_a_checklist_names_exists(checklist: str, path: str, name: str | None) -> None:
    target = REPO / path
    where = f"docs/architecture.md, checklist {checklist!r}"
    exact = path.endswith("/") or "/" in path
    assert exact, f"{where}: {path!r} is not a path from the repository root"
    if path.endswith("/"):
        assert target.is_dir(), f"{where}: no folder {path}"
        return
    assert target.is_file(), f"{where}: no file {path}"
    if name is not None:
        source = target.read_text(encoding="utf-8")
        assert _defines(source, name), f"{where}: {path} defines no {name!r}"


def test_the_checklists_name_files() -> None:
    references = checklist_references(DOC.read_text(encoding="utf-8"))
    named = {checklist for checklist, _path, _name in references}
    assert sorted(set(CHECKLISTS) - named) == []
