"""Moving traces in and out from the viewer: per-session export and ``.jsonl`` import.

``GET /web/export/{project}/{agent}/{id}?format=`` with ``redacted`` (the
default: every record through the redaction policy), ``jsonl`` (the latest
shard's bytes, verbatim) or ``archive`` (a tar.gz of every shard and the
subagent children, as ``pentrace export --archive`` writes it).  The last two
hold the trace as written, credentials included, so they follow ADR 0012: only
a request that carried the bearer token gets them.

``POST /web/import?project=&agent=&filename=`` takes the file as the request
body and imports it with :func:`import_session`, the CLI's strict import; an
id that exists under the agent is refused with the CLI's message.  Importing
writes, so it too needs the token.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pentrace.errors import PentraceError
from pentrace.infrastructure.catalog.listing import resolve_session
from pentrace.infrastructure.operations.exports import export_session
from pentrace.infrastructure.sessions.files import export_archive, import_session
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.edge.errors import BadRequest, Forbidden
from pentrace.service.web.layout import session_url

__all__ = ["export_route", "import_route", "need_token"]

_FORMATS: Final = ("redacted", "jsonl", "archive")
_MAX_UPLOAD: Final = 512 * 1024 * 1024
_CHUNK: Final = 256 * 1024
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def need_token(request: Request, what: str, instead: str) -> None:
    """Refuse (403) a request that did not carry the bearer token: ``what`` needs it;
    ``instead`` opens the hint with what the caller can have without it."""
    if not authenticated(request.scope):
        raise Forbidden(
            f"{what} needs the bearer token: expected a request with "
            "`Authorization: Bearer <token>`, found none",
            hint=f"{instead}, or start the server with PENTRACE_API_TOKEN (or --token-file) "
            "and log in at /web/login (a script sends the header)",
        )


def raw_asked(request: Request, what: str, instead: str) -> bool:
    """Whether ``?raw=1`` was given; refused (403, :func:`need_token`) without the token."""
    raw = bool(params.flag(request, "raw"))
    if raw:
        need_token(request, what, instead)
    return raw


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    spool.seek(0)
    try:
        while chunk := spool.read(_CHUNK):
            yield chunk
    finally:
        spool.close()


def _export(context: ServiceContext, reference: str, kind: str) -> tuple[str, IO[bytes]]:
    ref = resolve_session(context.root, reference)
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115  # streamed
    if kind == "archive":
        export_archive(context.root, ref.project, ref.agent, ref.session_id, spool)
        return f"{ref.session_id}.tar.gz", spool
    export_session(
        context.root, ref.project, ref.agent, ref.session_id, spool, redacted=kind == "redacted"
    )
    suffix = ".redacted.jsonl" if kind == "redacted" else ".jsonl"
    return ref.session_id + suffix, spool


async def export_route(request: Request) -> Response:
    """``GET /web/export/{project}/{agent}/{session_id}``."""
    context: ServiceContext = request.app.state.context
    kind = params.choice(request, "format", _FORMATS) or "redacted"
    if kind != "redacted":
        need_token(request, f"the verbatim export (format={kind})", "download the redacted export")
    reference = params.session_path(request)
    name, spool = await context.run(_export, context, reference, kind)
    media = "application/gzip" if kind == "archive" else "application/x-ndjson"
    return StreamingResponse(
        _chunks(spool),
        media_type=media,
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Pentrace-Redacted": str(kind == "redacted").lower(),
        },
    )


def _import(context: ServiceContext, project: str, agent: str, source: Path) -> str:
    try:
        result = import_session(context.root, project, agent, source)
    except PentraceError as error:
        # The CLI's message, naming the file as the user named it, not our temporary folder.
        folder = str(source.parent) + "/"
        raise type(error)(error.message.replace(folder, ""), hint=error.hint) from None
    return result.session_id


async def import_route(request: Request) -> Response:
    """``POST /web/import``: the body is the trace file."""
    need_token(request, "importing a trace", "import it on the server with `pentrace import`")
    context: ServiceContext = request.app.state.context
    project, agent = params.text(request, "project"), params.text(request, "agent")
    if not project or not agent:
        raise BadRequest(
            "import: expected both project and agent, found "
            + ("neither" if not (project or agent) else "only one"),
            hint="for example POST /web/import?project=demo&agent=coder&filename=trace.jsonl",
        )
    filename = _UNSAFE.sub("_", params.text(request, "filename") or "upload.jsonl")[:100]
    with tempfile.TemporaryDirectory(prefix="pentrace-import-") as folder:
        source = Path(folder) / (filename.lstrip(".") or "upload.jsonl")
        size = 0
        with source.open("wb") as handle:
            async for chunk in request.stream():
                size += len(chunk)
                if size > _MAX_UPLOAD:
                    raise BadRequest(
                        f"import: expected at most {_MAX_UPLOAD} bytes, found more",
                        hint="import large traces with `pentrace import` on the server",
                    )
                handle.write(chunk)
        session_id = await context.run(_import, context, project, agent, source)
    return JSONResponse(
        {
            "session_id": session_id,
            "ref": f"{project}/{agent}/{session_id}",
            "url": session_url(project, agent, session_id),
        },
        status_code=201,
    )
