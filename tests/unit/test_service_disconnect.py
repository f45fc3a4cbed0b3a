"""``CancelOnDisconnect``: a GET whose client went away stops waiting; one that finished,
and requests with a body, are left alone.  Driven at the ASGI level in a real event loop:
a queue stands in for the server's receive, a list for its send."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.types import Message, Scope

from pentrace.service.app import CancelOnDisconnect


def _run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        # A safety net only: each call returns as soon as the messages say it may.
        await asyncio.wait_for(test(), 10)

    asyncio.run(bounded())


class Client:
    """The server side of one connection: what the app may receive, what it sent."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        return await self.inbox.get()

    async def send(self, message: Message) -> None:
        self.sent.append(message)


def _scope(method: str) -> Scope:
    return {"type": "http", "method": method, "path": "/web/usage", "headers": []}


def test_a_waiting_get_is_cancelled_when_its_client_disconnects() -> None:
    _run(_test_a_waiting_get_is_cancelled_when_its_client_disconnects)


async def _test_a_waiting_get_is_cancelled_when_its_client_disconnects() -> None:
    reached, cancelled = anyio.Event(), anyio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.set()
        try:
            await anyio.sleep_forever()  # a route waiting for a worker thread
        except asyncio.CancelledError:
            cancelled.set()
            raise

    client = Client()
    client.inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    async with anyio.create_task_group() as group:
        group.start_soon(CancelOnDisconnect(app), _scope("GET"), client.receive, client.send)
        await reached.wait()
        client.inbox.put_nowait({"type": "http.disconnect"})
    assert cancelled.is_set()
    assert client.sent == []


def test_a_finished_response_is_not_cancelled_by_the_disconnect_that_follows() -> None:
    _run(_test_a_finished_response_is_not_cancelled_by_the_disconnect_that_follows)


async def _test_a_finished_response_is_not_cancelled_by_the_disconnect_that_follows() -> None:
    after_response = anyio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["type"] == "http.request"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})
        # The server says disconnect once the response is complete; work after it goes on.
        client.inbox.put_nowait({"type": "http.disconnect"})
        await anyio.sleep(0.05)
        after_response.set()

    client = Client()
    client.inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    await CancelOnDisconnect(app)(_scope("GET"), client.receive, client.send)
    assert after_response.is_set()
    assert [message["type"] for message in client.sent] == [
        "http.response.start",
        "http.response.body",
    ]


def test_the_app_reads_the_request_then_sees_the_disconnect() -> None:
    _run(_test_the_app_reads_the_request_then_sees_the_disconnect)


async def _test_the_app_reads_the_request_then_sees_the_disconnect() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((await receive())["type"])
        try:
            seen.append((await receive())["type"])  # as an SSE response listens for it
        finally:
            seen.append("done")

    client = Client()
    client.inbox.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    client.inbox.put_nowait({"type": "http.disconnect"})
    await CancelOnDisconnect(app)(_scope("GET"), client.receive, client.send)
    # Either the app read the disconnect itself or it was cancelled while waiting for it.
    assert seen[0] == "http.request"
    assert seen[-1] == "done"
    assert seen[1:-1] in ([], ["http.disconnect"])


def test_a_request_with_a_body_reads_it_untouched() -> None:
    _run(_test_a_request_with_a_body_reads_it_untouched)


async def _test_a_request_with_a_body_reads_it_untouched() -> None:
    bodies: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            bodies.append(message["body"])
            if not message["more_body"]:
                break
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    client = Client()
    for part, more in ((b"a" * 10, True), (b"b" * 5, False)):
        client.inbox.put_nowait({"type": "http.request", "body": part, "more_body": more})
    await CancelOnDisconnect(app)(_scope("POST"), client.receive, client.send)
    assert bodies == [b"a" * 10, b"b" * 5]
    assert client.sent[0]["status"] == 201
