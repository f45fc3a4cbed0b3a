"""docs/cli-json.md documents every field of the session document and every alias, and the
OpenAPI schema publishes the same fields (ADR 0036)."""

from __future__ import annotations

import re
from pathlib import Path

from pentrace.infrastructure.operations.documents import (
    CLI_ALIASES,
    DETAIL_FIELDS,
    FIELDS,
    SERVICE_ALIASES,
)
from pentrace.service.openapi import openapi_document

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _section(page: str, heading: str) -> str:
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def _table_names(section: str) -> set[str]:
    names: set[str] = set()
    for cell in re.findall(r"^\| ([^|]+) \|", section, re.MULTILINE):
        names.update(re.findall(r"`([a-z_]+)`", cell))
    return names


def test_the_list_section_has_a_row_for_every_field_and_names_every_alias() -> None:
    section = _section("cli-json.md", "## `pentrace list --json`")  # was `sessions list`
    assert {name for name, _, _ in FIELDS} <= _table_names(section)
    for old, new in CLI_ALIASES.items():
        assert f"`{old}` (= `{new}`)" in section.replace("\n", " "), old


def test_the_show_section_has_a_row_for_every_detail_field() -> None:
    section = _section("cli-json.md", "## `pentrace show SESSION --json`")
    assert {name for name, _, _ in DETAIL_FIELDS} <= _table_names(section)


def test_the_service_page_names_the_service_aliases() -> None:
    page = (DOCS / "service.md").read_text(encoding="utf-8").replace("\n", " ")
    for old, new in SERVICE_ALIASES.items():
        assert f"`{old}` (= `{new}`" in page, old


def test_the_openapi_schema_has_the_document_fields_and_the_service_aliases() -> None:
    schemas = openapi_document()["components"]["schemas"]
    item = set(schemas["SessionItem"]["properties"])
    detail = set(schemas["SessionDetail"]["properties"])
    fields = {name for name, _, _ in FIELDS}
    assert item == fields | set(SERVICE_ALIASES)
    assert detail == item | {name for name, _, _ in DETAIL_FIELDS}
