"""``GET /api/v1/events/sse``: durable replay after a cursor, then live, from the ledger only.

The stream is a tail of the ledger by notification id (``docs/service.md``):

1. ``server.connected`` (no ``id:``, so it cannot clobber Last-Event-ID - W10).
2. The cursor (``last_event_id`` query, else the ``Last-Event-ID`` header) is
   looked up; a cursor the ledger no longer holds gives ``server.replay_gap``
   with scoped bounds, Penguin's reason and an ``evicted`` / ``unknown_event_id``
   detail, and the stream carries on from the oldest retained event in scope (W6).
3. Pages of at most ``page_size`` rows after the position are read and sent;
   when a page comes back short, the stream waits for the ledger head to move.

Replay and live are the same loop, so the hand-over has no gap and no
duplicate.  Every delivered event is already committed in the ledger (W8,
W9 cannot happen: there is no in-memory batch and no live queue to drop
from, W9/"QueueFull"), and a slow client only holds its position.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from pentrace.domain.runtime import normalize_directory
from pentrace.domain.session.key import split_reference
from pentrace.infrastructure.operations.ledger import Page, ReplayGap, RuntimeEventLedger, Scope
from pentrace.infrastructure.operations.sessions import ambiguous
from pentrace.service.context import ServiceContext
from pentrace.service.edge import params
from pentrace.service.edge.errors import BadRequest
from pentrace.service.events.frames import connected_frame, gap_frame

__all__ = ["owned_scope", "parse_scope", "sse_endpoint", "stream_events"]

_MAX_DIRECTORY = 4096  # PATH_MAX


def parse_scope(request: Request) -> Scope:
    """The filters of a request: ``session_id`` (alias ``conversation_id``; also a reference
    ``project/agent/session-id``), ``agent_id``, ``project_id``, ``directory``."""
    session = params.text(request, "session_id")
    conversation = params.text(request, "conversation_id")
    if session and conversation and session != conversation:
        raise BadRequest(
            "session_id and conversation_id name different sessions: expected one value "
            "(conversation_id is an alias)",
            hint="pass only session_id",
        )
    raw_directory = params.text(request, "directory", max_chars=_MAX_DIRECTORY)
    directory = None
    if raw_directory is not None and raw_directory.strip():
        # The same normalisation the ledger's scope uses, so filters and rows agree (W11).
        directory = normalize_directory(raw_directory, home=str(Path.home()), cwd=os.getcwd())
    session = session or conversation
    agent = params.text(request, "agent_id")
    project = params.text(request, "project_id")
    if session is not None and "/" in session:
        # A reference project/agent/session-id names the owner (ADR 0023).
        named_project, named_agent, session = split_reference(session)
        for name, given, named in (
            ("agent_id", agent, named_agent),
            ("project_id", project, named_project),
        ):
            if given is not None and named is not None and given != named:
                raise BadRequest(
                    f"session_id names {name.removesuffix('_id')} {named!r}, but {name} is "
                    f"{given!r}: expected one owner",
                    hint=f"pass only session_id=project/agent/session-id, or drop {name}",
                )
        agent, project = named_agent or agent, named_project or project
        if not session:
            raise BadRequest(
                "session_id: expected project/agent/session-id, found no session id",
                hint="for example ?session_id=demo/assistant/session-2026-11-29-10-00-00-3f8a",
            )
    return Scope(session, agent, directory, project)


def owned_scope(ledger: RuntimeEventLedger, scope: Scope) -> Scope:
    """``scope`` with the session's owner filled in when the ledger knows exactly one.

    A bare ``session_id`` held under several agents or projects would mix
    their events in one stream: that is refused, listing the references that
    pick one.  An id the ledger does not hold yet (a session about to start)
    is kept as given.
    """
    if scope.session_id is None or (scope.agent_id is not None and scope.project_id is not None):
        return scope
    owners = [
        key
        for key in ledger.session_owners(scope.session_id)
        if scope.agent_id in (None, key.agent) and scope.project_id in (None, key.project)
    ]
    if len(owners) > 1:
        raise ambiguous(scope.session_id, owners)
    if len(owners) == 1:
        return scope._replace(agent_id=owners[0].agent, project_id=owners[0].project)
    return scope


async def sse_endpoint(request: Request) -> Response:
    """The SSE route."""
    context: ServiceContext = request.app.state.context
    scope = await context.run(owned_scope, context.ledger, parse_scope(request))
    cursor = params.cursor(request)
    keepalive = context.settings.keepalive_seconds
    return EventSourceResponse(
        stream_events(context, scope, cursor),
        ping=keepalive if keepalive > 0 else 0,
        ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep="\n"),
        sep="\n",
    )


async def stream_events(
    context: ServiceContext, scope: Scope, cursor: str | None
) -> AsyncGenerator[bytes, None]:
    """The frames of one SSE connection (see the module docstring)."""
    ledger = context.ledger
    yield connected_frame(
        {
            "sessionID": scope.session_id,
            "agentID": scope.agent_id,
            "projectID": scope.project_id,
            "directory": scope.directory,
            "lastEventID": cursor,
        },
        context.settings.retry_ms,
    )
    last_id = cursor
    epoch = context.follower.epoch
    position, opening_gap = await _start(context, scope, cursor)
    # -1: whatever was pruned before a connect-time gap is covered by that gap.
    reported_pruned = 0 if opening_gap is None else -1
    if opening_gap is not None:
        yield opening_gap
    # True after this stream saw a replacement before the follower did: the follower's
    # epoch bump for that same replacement is still to come and must not be reported twice.
    bump_pending = False
    while True:
        page, chunk = await context.run(_next_page, context, position, scope)
        follower_epoch = context.follower.epoch
        if follower_epoch != epoch and bump_pending and page.head >= position:
            epoch, bump_pending = follower_epoch, False
        if follower_epoch != epoch or page.head < position:
            # The database was replaced (W13): its ids restarted, our position means nothing.
            bump_pending = follower_epoch == epoch
            epoch = follower_epoch
            oldest, newest = await context.run(
                ledger.bounds, scope.session_id, scope.agent_id, scope.directory, scope.project_id
            )
            replaced = ReplayGap(last_id or "", "unknown_event_id", oldest, newest)
            yield gap_frame(replaced, scope.session_id, oldest, detail="ledger_replaced")
            position, reported_pruned = 0, -1
            continue
        if reported_pruned < 0:
            # Everything pruned before the connect-time gap was just reported.
            reported_pruned = page.pruned_through
        if page.pruned_through > max(position, reported_pruned):
            # Retention deleted rows after our position before we could send them.
            reported_pruned = page.pruned_through
            oldest, newest = await context.run(
                ledger.bounds, scope.session_id, scope.agent_id, scope.directory, scope.project_id
            )
            evicted = ReplayGap(last_id or "", "evicted", oldest, newest)
            first = page.entries[0].event_id if page.entries else None
            yield gap_frame(evicted, scope.session_id, first)
        if page.entries:
            yield chunk
            last_id = page.entries[-1].event_id
        position, full = page.through, page.full
        # A waiting stream holds no rows and no frames: 200 idle clients cost their sockets,
        # not 200 pages (ADR 0101).
        del page, chunk
        if not full:
            await context.follower.wait_past(position, epoch)


async def _start(
    context: ServiceContext, scope: Scope, cursor: str | None
) -> tuple[int, bytes | None]:
    """The position to stream from, and the gap frame to send first when the cursor is gone."""
    ledger = context.ledger
    if cursor is None:
        return await context.run(ledger.head), None
    found = await context.run(ledger.locate, cursor, scope)
    if found is not None:
        return found, None
    result = await context.run(
        ledger.replay_after,
        cursor,
        1,
        scope.session_id,
        scope.agent_id,
        scope.directory,
        scope.project_id,
    )
    if result.gap is None:
        # The cursor's row was committed between the two reads: start after it.
        relocated = await context.run(ledger.locate, cursor, scope)
        return (relocated or 0), None
    first = result.events[0].event_id if result.events else None
    return 0, gap_frame(result.gap, scope.session_id, first)


def _next_page(context: ServiceContext, position: int, scope: Scope) -> tuple[Page, bytes]:
    """In a worker thread: read a page and encode its frames (keeps the event loop free)."""
    page = context.ledger.read_page(position, scope, context.settings.page_size)
    return page, b"".join([context.frames.frame(entry) for entry in page.entries])
