"""The OpenAPI 3.1 document of the service, written by hand from pydantic models.

The response bodies are pydantic models here only to publish their JSON
Schema; the routes build plain dicts with the same fields.  A test checks
that every route of the app appears in this document.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from pentrace import __version__
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


class SessionItem(BaseModel):
    """One session in a listing."""

    id: str
    ref: str = Field(description="project/agent/id: names the session when the id is shared")
    project: str
    agent: str
    start: str | None = Field(description="first record's timestamp, as written")
    provider: str | None
    model: str | None
    model_name: str | None = Field(description="provider/model, as the CLI shows it")
    turns: int = Field(description="committed requests")
    tokens: int = Field(description="every request's token total, summed")
    requests: int = Field(description="requests begun, however they ended")
    duration_s: float | None = Field(description="first to last record timestamp, seconds")
    last_status: str = Field(description="last request_end status, or none / open")
    has_errors: bool
    shards: int


class SessionList(BaseModel):
    """``GET /api/v1/sessions``."""

    sessions: list[SessionItem]
    total: int = Field(description="sessions matching the filters, before limit")


class SessionDetail(SessionItem):
    """``GET /api/v1/sessions/{id}``."""

    bytes: int
    skipped_lines: int
    torn_tails: int
    problem: str | None
    summary: dict[str, Any] = Field(description="the session summary (pentrace show --json)")
    numbers: dict[str, Any] = Field(
        description="requests, turns, tokens, duration, model (pentrace show --json numbers)"
    )


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
    reason: Literal["evicted", "unknown_event_id", "ledger_replaced"]
    replayFrom: str | None
    sessionID: str | None


class GapFrame(BaseModel):
    """``server.replay_gap``; sent without an ``id:`` line."""

    type: Literal["server.replay_gap"]
    properties: GapProperties


_MODELS = (ErrorBody, SessionList, SessionDetail, OpenCodeEvent, ConnectedFrame, GapFrame)


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
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


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    schemas: dict[str, Any] = {}
    for model in _MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
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
                    "responses": {"200": _json(SessionList, "matching sessions"), **_ERRORS},
                }
            },
            "/api/v1/sessions/{session_id}": {
                "get": {
                    "summary": "One session's meta and counters",
                    "parameters": [_SESSION_PATH],
                    "responses": {
                        "200": _json(SessionDetail, "the session"),
                        "404": not_found,
                        **_ERRORS,
                    },
                }
            },
            "/api/v1/sessions/{session_id}/trace": {
                "get": {
                    "summary": "A trace shard as JSONL, redacted (verbatim needs the token)",
                    "parameters": [
                        _SESSION_PATH,
                        _query(
                            "redacted",
                            "default true; false sends the file's bytes, only with the token",
                            "boolean",
                        ),
                        _query("shard", "a shard number or 'all' (default: the latest)"),
                    ],
                    "responses": {
                        "200": {
                            "description": "one record per line",
                            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                        },
                        "404": not_found,
                        **_ERRORS,
                    },
                }
            },
            "/api/v1/sessions/{project}/{agent}/{session_id}": {
                "get": {
                    "summary": "One session's meta and counters, by its owner",
                    "parameters": [*_OWNER_PATH, _SESSION_PATH],
                    "responses": {
                        "200": _json(SessionDetail, "the session"),
                        "404": not_found,
                        **_ERRORS,
                    },
                }
            },
            "/api/v1/sessions/{project}/{agent}/{session_id}/trace": {
                "get": {
                    "summary": "A trace shard as JSONL, by the session's owner",
                    "parameters": [
                        *_OWNER_PATH,
                        _SESSION_PATH,
                        _query(
                            "redacted", "pass every record through the redaction policy", "boolean"
                        ),
                        _query("shard", "a shard number or 'all' (default: the latest)"),
                    ],
                    "responses": {
                        "200": {
                            "description": "one record per line",
                            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                        },
                        "404": not_found,
                        **_ERRORS,
                    },
                }
            },
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
