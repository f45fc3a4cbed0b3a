"""The OpenAPI 3.1 document of the service, written by hand from pydantic models.

The response bodies are pydantic models here only to publish their JSON
Schema; the routes build plain dicts with the same fields.  A test checks
that every route of the app appears in this document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from pentrace import __version__
from pentrace.infrastructure.operations import documents
from pentrace.service import analytics_routes
from pentrace.service.web.routes import openapi_paths as web_paths

__all__ = ["openapi_document"]


class ErrorDetail(BaseModel):
    """What went wrong and how to fix it."""

    status: int
    message: str
    hint: str | None = None


class ErrorBody(BaseModel):
    """Every error response."""

    error: ErrorDetail


class OpenCodeEvent(BaseModel):
    """The ``data:`` of an event frame; its ``id:`` line repeats ``id``."""

    id: str
    order: int
    time: int
    type: str
    properties: dict[str, Any]


class ConnectedProperties(BaseModel):
    """What the stream was opened with."""

    sessionID: str | None  # OpenCode wire names (camelCase)
    agentID: str | None
    projectID: str | None = None  # with sessionID and agentID, names one session (ADR 0023)
    directory: str | None
    lastEventID: str | None


class ConnectedFrame(BaseModel):
    """First frame of every stream; sent without an ``id:`` line."""

    type: Literal["server.connected"]
    properties: ConnectedProperties


class GapProperties(BaseModel):
    """The cursor is not retained; ``replayFrom`` is the first event sent after this frame."""

    lastEventID: str
    oldestEventID: str | None
    newestEventID: str | None
    # Penguin's reason, always; why the cursor is gone is in ``detail`` (ADR 0101).
    reason: Literal["last_event_id_not_available"]
    detail: Literal["evicted", "unknown_event_id", "ledger_replaced"]
    replayFrom: str | None
    sessionID: str | None


class GapFrame(BaseModel):
    """``server.replay_gap``; sent without an ``id:`` line."""

    type: Literal["server.replay_gap"]
    properties: GapProperties


_MODELS = (ErrorBody, OpenCodeEvent, ConnectedFrame, GapFrame)


def _object(fields: Any, description: str) -> dict[str, Any]:
    properties = {name: {"type": kind, "description": text} for name, kind, text in fields}
    return {"type": "object", "description": description, "properties": properties,
            "required": list(properties)}  # fmt: skip


def _session_schemas() -> dict[str, Any]:
    """The session document (:mod:`pentrace.infrastructure.operations.documents`) as JSON
    Schema: its fields, then the service's older names, each repeating one of them."""
    types = {name: kind for name, kind, _ in documents.FIELDS}
    aliases = [
        (old, types[new], f"the same as {new} (the name before ADR 0036)")
        for old, new in documents.SERVICE_ALIASES.items()
    ]
    item = _object([*documents.FIELDS, *aliases], "One session (a listing entry)")
    detail = _object(
        [*documents.FIELDS, *documents.DETAIL_FIELDS, *aliases], "GET /api/v1/sessions/{id}"
    )
    listing = _object(
        [
            ("sessions", "array", "the matching sessions, after limit"),
            ("total", "integer", "sessions matching the filters, before limit"),
        ],
        "GET /api/v1/sessions",
    )
    listing["properties"]["sessions"]["items"] = _ref("SessionItem")
    return {"SessionItem": item, "SessionList": listing, "SessionDetail": detail}


def _ref(model: type[BaseModel] | str) -> dict[str, str]:
    name = model if isinstance(model, str) else model.__name__
    return {"$ref": f"#/components/schemas/{name}"}


def _json(model: type[BaseModel] | str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _query(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": kind},
    }


_ERRORS = {
    "400": _json(ErrorBody, "a query or path parameter is invalid"),
    "401": _json(ErrorBody, "a bearer token is configured and the request lacks it"),
    "403": _json(ErrorBody, "a foreign Origin; or redacted=false without the token"),
    "421": _json(ErrorBody, "a Host name the server does not answer for (DNS rebinding)"),
}
_SESSION_PATH = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "description": "a session id, a unique prefix, or its 8-hex token",
    "schema": {"type": "string"},
}
_OWNER_PATH = [
    {
        "name": name,
        "in": "path",
        "required": True,
        "description": f"the session's {name}",
        "schema": {"type": "string"},
    }
    for name in ("project", "agent")
]


def _session_paths(not_found: dict[str, Any]) -> dict[str, Any]:
    """One session's routes, each also under the owner-naming project/agent/id (ADR 0023)."""
    stream = _query("shard", "a shard number or 'all' (default: the latest)")
    redacted = _query(
        "redacted", "default true; false sends the file's bytes, only with the token", "boolean"
    )
    bodies = {"application/x-ndjson": "one record per line", "application/gzip": "a tar.gz"}
    items: dict[str, tuple[str, list[dict[str, Any]], Any]] = {
        "": ("One session's meta, counters and files", [], _json("SessionDetail", "the session")),
        "/trace": ("A trace shard as JSONL, redacted (verbatim needs the token)",
                   [redacted, stream], "application/x-ndjson"),
        "/archive": ("The tar.gz of `pentrace export --archive` (needs the token)",
                     [], "application/gzip"),
    }  # fmt: skip
    paths: dict[str, Any] = {}
    for suffix, (summary, extra, body) in items.items():
        if isinstance(body, str):
            body = {"description": bodies[body], "content": {body: {"schema": {"type": "string"}}}}
        owners: list[tuple[list[dict[str, Any]], str]] = [
            ([], "{session_id}"),
            (_OWNER_PATH, "{project}/{agent}/{session_id}"),
        ]
        for owner, where in owners:
            paths[f"/api/v1/sessions/{where}{suffix}"] = {
                "get": {
                    "summary": summary + (", by its owner" if owner else ""),
                    "parameters": [*owner, _SESSION_PATH, *extra],
                    "responses": {"200": body, "404": not_found, **_ERRORS},
                }
            }
    return paths


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    schemas: dict[str, Any] = {}
    for model in _MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    schemas.update(_session_schemas())
    not_found = _json(ErrorBody, "no session matches")
    return {
        "openapi": "3.1.0",
        "info": {"title": "pentrace event service", "version": __version__},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
        "paths": {
            "/api/v1/events/sse": {
                "get": {
                    "summary": "RuntimeEvents as Server-Sent Events: durable replay, then live",
                    "parameters": [
                        _query(
                            "session_id",
                            "only this session (and unscoped events); project/agent/id names "
                            "its owner, and a bare id held under several owners is refused",
                        ),
                        _query("conversation_id", "alias of session_id"),
                        _query("agent_id", "only this agent (and unscoped events)"),
                        _query("project_id", "only this project (and unscoped events)"),
                        _query("directory", "only this workspace, normalised like the ledger"),
                        _query("last_event_id", "replay after this id; wins over Last-Event-ID"),
                        {
                            "name": "Last-Event-ID",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "frames `id:`+`data:` (OpenCodeEvent); control frames "
                            "ConnectedFrame and GapFrame without `id:`; `: keepalive` comments",
                            "content": {"text/event-stream": {"schema": {"type": "string"}}},
                        },
                        **_ERRORS,
                    },
                }
            },
            "/api/v1/sessions": {
                "get": {
                    "summary": "List sessions",
                    "parameters": [
                        _query("project", "only this project"),
                        _query("agent", "only this agent"),
                        _query("model", "model id or provider/model"),
                        _query("status", "last request status"),
                        _query("since", "start at or after: date, ISO time or age (7d)"),
                        _query("until", "start at or before"),
                        _query("has_errors", "true or false", "boolean"),
                        _query("sort", "start, tokens, turns or id"),
                        _query("reverse", "descending order", "boolean"),
                        _query("limit", "at most this many", "integer"),
                    ],
                    "responses": {"200": _json("SessionList", "matching sessions"), **_ERRORS},
                }
            },
            **_session_paths(not_found),
            **analytics_routes.openapi_paths,
            **web_paths,
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI 3.1"}},
                }
            },
        },
    }
