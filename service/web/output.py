"""``GET /web/sessions/{project}/{agent}/{id}/output/{file}``: a truncated tool output in full.

Tool output longer than the cap is kept whole in the session's scratchpad
(``truncated-tool-output/<tool>-<hash>.log``, see
:mod:`pentrace.infrastructure.trace.tool_output`); the trace holds its head and
an ``[output archived: <path>]`` note, which the Session page links here.  The
file is named by its base name only (checked against the archive's naming
pattern, so no path reaches outside the folder) and served as text, through the
redaction policy like every page.  ``?raw=1`` serves the bytes as written, which
may hold credentials, so it follows the exports' rule (ADR 0012): only a request
that carried the bearer token gets it; any other is refused with 403.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from pentrace.domain.redaction.core import redact
from pentrace.errors import NotFoundError
from pentrace.infrastructure.catalog.listing import resolve_session
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.errors import BadRequest
from pentrace.service.web.layout import esc
from pentrace.service.web.transfer import raw_asked

__all__ = ["ARCHIVE_NAME", "archive_link", "output_route"]

ARCHIVE_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,200}-[0-9a-f]{16}\.log")
_NOTE_PATH: Final = re.compile(r"\[output archived[^\]\n:]*: (?P<path>[^\]\n]+)\]")


def archive_link(base: str, output: str) -> str:
    """An HTML link to the full output an ``[output archived: ...]`` note names ('' if none)."""
    match = _NOTE_PATH.search(output)
    name = Path(match.group("path").strip()).name if match else ""
    if not ARCHIVE_NAME.fullmatch(name):
        return ""
    return f'<p class="full"><a href="{esc(base)}/output/{name}">full output (archived)</a></p>'


def _read(context: ServiceContext, reference: str, name: str) -> bytes:
    ref = resolve_session(context.root, reference)
    folder = context.root.truncated_output_dir(ref.project, ref.agent, ref.session_id)
    try:
        return (folder / name).read_bytes()
    except FileNotFoundError:
        raise NotFoundError(
            f"session {ref.project}/{ref.agent}/{ref.session_id}: no archived output {name}",
            hint="the scratchpad may have been cleaned; the trace keeps the output's head",
        ) from None


async def output_route(request: Request) -> Response:
    """``GET .../output/{file}``: an archived tool output, redacted unless ``?raw=1``."""
    context: ServiceContext = request.app.state.context
    name = params.path_text(request, "file")
    if not ARCHIVE_NAME.fullmatch(name):
        raise BadRequest(
            f"path value file: expected an archive name like exec_command-<16 hex>.log, "
            f"found {name[:40]!r}",
            hint="follow the 'full output' link under a truncated tool output",
        )
    raw = raw_asked(
        request, "the verbatim tool output (raw=1)", "open the output without raw=1, redacted"
    )
    reference = params.session_path(request)
    data = await context.run(_read, context, reference, name)
    body = data if raw else str(redact(data.decode("utf-8", "replace")).value).encode()
    return Response(
        body,
        media_type="text/plain; charset=utf-8",
        headers={"X-Pentrace-Redacted": str(not raw).lower()},
    )
