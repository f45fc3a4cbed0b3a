"""The files a Session page shows from a session: its images and its archived tool outputs.

``GET /web/sessions/{project}/{agent}/{id}/images/{position}/{index}``: one image of a record.

The Session page draws the images of a record (:func:`image_html`) as ``<img>``
elements pointing here, so the page's policy stays ``img-src 'self'`` with no
``data:`` URLs (ADR 0056).  Which images a record holds, and what counts as an
image, is :mod:`pentrace.domain.omnimessage.images`, the same model ``pentrace
replay`` prints from.  This route finds the record by position in the session
named by project, agent and id (ADR 0023), takes the image from the *redacted*
record (the redaction policy leaves image data as it is; if it changed it, the
answer says so), checks its bytes (PNG, JPEG, GIF or WebP by magic number,
whole, at most ``image_max_bytes``) and sends them as that type.  ``?raw=1``
takes it from the record as written and, like the raw record, needs the token
(403 without it).  A file named by path is served only from inside that
session's scratchpad, and never through a symlink.  Answers are revalidated, not
kept for a time (ADR 0064): ``no-cache`` (``private, no-cache`` when the token was
needed, which ``?raw=1`` always is) with a strong ETag over the session key,
position, index, variant (raw or redacted) and bytes, and 304 on a match.

``GET /web/sessions/{project}/{agent}/{id}/output/{file}``: a truncated tool output in full.

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

import os
import re
from pathlib import Path, PurePosixPath
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from pentrace.domain.omnimessage.images import (
    ImageRef,
    check_image,
    decode_image,
    describe,
    preview_refusal,
    record_images,
    too_large,
)
from pentrace.domain.redaction import redact
from pentrace.errors import ImageDataError, NotFoundError
from pentrace.infrastructure.operations.sessions import (
    DataRoot,
    SessionRef,
    open_regular,
    record_at,
    resolve_session,
)
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.auth import authenticated
from pentrace.service.edge.errors import BadRequest, Forbidden
from pentrace.service.edge.headers import not_modified, strong_etag
from pentrace.service.web.layout import raw_asked

__all__ = [
    "ARCHIVE_NAME",
    "archive_name",
    "image_route",
    "image_view",
    "output_route",
    "path_number",
    "scratchpad_file",
]

ARCHIVE_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,200}-[0-9a-f]{16}\.log")
_NOTE_PATH: Final = re.compile(r"\[output archived[^\]\n:]*: (?P<path>[^\]\n]+)\]")

_EXTENSIONS: Final = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif",
                      "image/webp": "webp"}  # fmt: skip
# Kept by the browser but asked again each time (ADR 0064); private when the token was needed.
_REVALIDATE: Final = "no-cache"
_REVALIDATE_PRIVATE: Final = "private, no-cache"
_RAW_HINT: Final = "the raw record shows what the trace holds"


def path_number(request: Request, name: str, what: str, low: int) -> int:
    """A path value that must be a decimal number of at most 12 digits, ``low`` or more."""
    raw = params.path_text(request, name)
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12 and int(raw) >= low):
        raise BadRequest(
            f"path value {name}: expected {what}, found {raw[:20]!r}",
            hint="follow the links of the Session page",
        )
    return int(raw)


def image_view(image: ImageRef, src: str, cap: int) -> dict[str, str]:
    """How the page shows one image of a record: ``web`` (a link, never loaded), ``refused``
    (why it is not drawn) or ``image`` (an ``<img>`` of ``src``), with its description."""
    what = describe(image)
    if image.source == "web":
        return {"view": "web", "what": what, "address": image.address}
    refusal = preview_refusal(image, cap)
    if refusal is not None:
        return {"view": "refused", "what": what, "reason": refusal}
    return {"view": "image", "what": what, "src": src, "number": str(image.index + 1)}


def scratchpad_file(root: DataRoot, ref: SessionRef, address: str, where: str) -> Path:
    """The file an image path names, inside the session's own scratchpad only.

    A path that names the scratchpad (``.../scratchpad/<id>/rest``, from any host) is taken
    from ``rest``; a relative one from the scratchpad itself.  The absolute prefix in the
    record is never trusted, ``..`` is refused, and so is a symlink anywhere inside."""
    scratchpad = root.scratchpad_dir(ref.project, ref.agent, ref.session_id)
    text = address.replace("\\", "/")
    marker = f"/scratchpad/{ref.session_id}/"
    if marker in "/" + text:
        rest = ("/" + text).rpartition(marker)[2]
    elif not text.startswith("/"):
        rest = text
    else:
        raise Forbidden(
            f"{where}: the image file is outside the session's scratchpad; only files in "
            "it are served",
            hint=_RAW_HINT,
        )
    parts = PurePosixPath(rest).parts
    leaves = not parts or any(part in ("..", ".") for part in parts) or rest.startswith("/")
    if leaves or any(ord(ch) < 32 for ch in rest):
        raise Forbidden(
            f"{where}: the image path leaves the session's scratchpad or names no file in it "
            "(a '..' part, a control character, nothing after the folder)",
            hint=_RAW_HINT,
        )
    path = scratchpad.joinpath(*parts)
    inside = Path(os.path.realpath(scratchpad)).joinpath(*parts)
    if scratchpad.is_symlink() or Path(os.path.realpath(path)) != inside:
        raise Forbidden(f"{where}: the image path goes through a symlink", hint=_RAW_HINT)
    return path


def _read_file(path: Path, cap: int, where: str) -> bytes:
    try:
        with open_regular(path, "image file") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > cap:
                raise too_large(where, size, cap)
            return handle.read(cap + 1)
    except FileNotFoundError:
        raise NotFoundError(
            f"{where}: the image file is not in the session's scratchpad",
            hint="the scratchpad may have been cleaned",
        ) from None
    except OSError as error:
        raise NotFoundError(
            f"{where}: the image file cannot be read ({error.strerror or type(error).__name__})",
            hint="check the scratchpad's files and modes",
        ) from None


def _load(
    context: ServiceContext, reference: str, position: int, index: int, raw: bool
) -> tuple[bytes, str, str]:
    ref = resolve_session(context.root, reference)
    where = f"session {ref.project}/{ref.agent}/{ref.session_id}, record {position}, image {index}"
    record = record_at(ref, position)
    written = record.payload()
    shown = written if raw else redact(written).value
    images = record_images(record.ptype, shown if isinstance(shown, dict) else {})
    if index >= len(images):
        raise NotFoundError(
            f"{where}: the record holds {len(images)} image(s)", hint="images count from 0"
        )
    image, cap = images[index], context.settings.image_max_bytes
    if image.source == "web":
        raise NotFoundError(
            f"{where}: a web image; the viewer loads nothing from other sites",
            hint="the page links its address",
        )
    if image.source == "path":
        data = _read_file(scratchpad_file(context.root, ref, image.address, where), cap, where)
        return data, check_image(data, where), ref.key.reference
    if not raw and record_images(record.ptype, written)[index].data != image.data:
        raise ImageDataError(
            f"{where}: the redaction policy changed this image's data, so it is not shown",
            hint="?raw=1 with the bearer token serves it as recorded",
        )
    data, media_type = decode_image(image, cap, where)
    return data, media_type, ref.key.reference


async def image_route(request: Request) -> Response:
    """``GET .../images/{position}/{index}``: one image of a record (``?raw=1`` needs the token)."""
    context: ServiceContext = request.app.state.context
    position = path_number(request, "position", "a record position (1, 2, ...)", 1)
    index = path_number(request, "index", "an image number within the record (0, 1, ...)", 0)
    raw = raw_asked(
        request,
        "the verbatim image (raw=1)",
        "load the image without raw=1, from the redacted record",
    )
    reference = params.session_path(request)
    data, media_type, key = await context.run(_load, context, reference, position, index, raw)
    variant = "raw" if raw else "redacted"
    etag = strong_etag((key, str(position), str(index), variant), data)
    name = f"record-{position}-image-{index}.{_EXTENSIONS[media_type]}"
    headers = {
        "Content-Disposition": f'inline; filename="{name}"',
        "Cache-Control": _REVALIDATE_PRIVATE if authenticated(request.scope) else _REVALIDATE,
        "ETag": etag,
        "X-Pentrace-Redacted": str(not raw).lower(),
    }
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    return Response(data, media_type=media_type, headers=headers)


def archive_name(output: str) -> str:
    """The archived file an ``[output archived: ...]`` note in ``output`` names ('' if none, or
    if the name is not the archive's)."""
    match = _NOTE_PATH.search(output)
    name = Path(match.group("path").strip()).name if match else ""
    return name if ARCHIVE_NAME.fullmatch(name) else ""


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
