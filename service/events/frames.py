"""SSE frames: ledger events with ``id:``, control frames without one.

An event frame is ``id: <event id>`` + ``data: <OpenCode projection>``.  The
control frames (``server.connected``, ``server.replay_gap``) carry **no**
``id:`` line: EventSource keeps the last id it saw, so a control frame can
never replace the client's cursor with an id from the ledger's namespace
(Penguin numbered them ``evt:session:<sid>:00000001``, W10).
"""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock
from typing import Any, Final

import msgspec

from pentrace.domain.json_codec import JsonDecoder, JsonEncoder
from pentrace.domain.runtime import opencode_payload
from pentrace.infrastructure.operations.ledger import LedgerEntry, ReplayGap

__all__ = ["GAP_REASON", "FrameCache", "connected_frame", "event_frame", "gap_frame"]

# The replay gap's reason, as Penguin's seed spells it; pentrace's own distinction is in
# the frame's ``detail``.
GAP_REASON: Final = "last_event_id_not_available"

_encode: Final = JsonEncoder().encode
_decode: Final = JsonDecoder[Any]().decode


class _FrameView(msgspec.Struct):
    """The envelope fields a frame reads; the payload stays the stored bytes."""

    id: Any = None
    sequence: Any = None
    time: Any = None
    type: Any = None
    scope: Any = None
    payload: msgspec.Raw = msgspec.Raw(b"null")


_view: Final = msgspec.json.Decoder(_FrameView).decode
# Keys the projection may add to the payload; a payload that spells one (or any
# escape) takes the decoding path, which replaces a falsy value in place.
_FILLED: Final = (("sessionID", "session_id"), ("agentID", "agent_id"), ("directory", "directory"))
_SLOW_MARKS: Final = (b'"sessionID"', b'"agentID"', b'"directory"', b"\\u")


def event_frame(entry: LedgerEntry) -> bytes:
    """``id:`` + ``data:`` for one ledger event (ids and compact JSON hold no newline).

    The data is the OpenCode projection of the stored envelope
    (:func:`~pentrace.domain.runtime.opencode_payload`), cut from the stored
    bytes: the payload is copied as stored, with the scope's ids appended.
    The ledger stores compact JSON, so this is byte for byte the encoding of
    the decoded projection; a foreign state stored with spaces keeps them.
    """
    data = _projection(entry.event_json)
    return b"id: " + entry.event_id.encode() + b"\ndata: " + data + b"\n\n"


def _projection(event_json: bytes) -> bytes:
    try:
        view = _view(event_json)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _decoded_projection(event_json)
    payload = bytes(view.payload)
    scope = view.scope
    if (
        not payload.startswith(b"{")
        or not isinstance(scope, dict)
        or any(mark in payload for mark in _SLOW_MARKS)
    ):
        return _decoded_projection(event_json)
    filled = [
        b"%s:%s" % (_encode(prop), _encode(scope[key]))
        for prop, key in _FILLED
        if isinstance(scope.get(key), str) and scope[key]
    ]
    if filled:
        joiner = b"," if payload[1:-1].strip() else b""
        payload = payload[:-1] + joiner + b",".join(filled) + b"}"
    return (
        b'{"id":' + _encode(view.id) + b',"order":' + _encode(view.sequence)
        + b',"time":' + _encode(view.time) + b',"type":' + _encode(view.type)
        + b',"properties":' + payload + b"}"
    )  # fmt: skip


def _decoded_projection(event_json: bytes) -> bytes:
    """The projection through a full decode: odd payloads, escapes, keys to fill in place."""
    envelope = _decode(event_json)
    return _encode(opencode_payload(envelope if isinstance(envelope, dict) else {}))


def connected_frame(properties: dict[str, Any], retry_ms: int) -> bytes:
    """The first frame of every stream: no id, and the reconnect delay for EventSource."""
    data = _encode({"type": "server.connected", "properties": properties})
    return b"retry: " + str(retry_ms).encode() + b"\ndata: " + data + b"\n\n"


def gap_frame(
    gap: ReplayGap, session_id: str | None, replay_from: str | None, detail: str | None = None
) -> bytes:
    """``server.replay_gap``: the cursor is not retained; what follows starts at ``replay_from``.

    ``reason`` is always Penguin's ``last_event_id_not_available``, so a client that checks
    it as the seed says finds it (ADR 0101); ``detail`` says why: the ledger's ``evicted`` or
    ``unknown_event_id``, or ``detail`` as given (``ledger_replaced`` when the database was
    replaced).
    """
    properties = {
        "lastEventID": gap.last_event_id,
        "oldestEventID": gap.oldest_event_id,
        "newestEventID": gap.newest_event_id,
        "reason": GAP_REASON,
        "detail": detail or gap.reason,
        "replayFrom": replay_from,
        "sessionID": session_id,
    }
    return b"data: " + _encode({"type": "server.replay_gap", "properties": properties}) + b"\n\n"


class FrameCache:
    """Encoded frames by notification id, shared by every stream of a server (LRU, bounded
    in bytes).

    Fifty clients reading the same new rows decode and encode each one once.
    A hit must also match the event id: a replaced ledger database hands out
    the same notification ids again, for other events.
    """

    def __init__(self, max_bytes: int = 4 * 1024 * 1024) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._frames: OrderedDict[int, tuple[str, bytes]] = OrderedDict()
        self._lock = Lock()

    def frame(self, entry: LedgerEntry) -> bytes:
        """The frame of an entry, from the cache when another stream already built it."""
        key = entry.notification_id
        if key is None:
            return event_frame(entry)
        with self._lock:
            cached = self._frames.get(key)
            if cached is not None and cached[0] == entry.event_id:
                self._frames.move_to_end(key)
                return cached[1]
        frame = event_frame(entry)
        with self._lock:
            stale = self._frames.pop(key, None)
            if stale is not None:
                self._bytes -= len(stale[1])
            self._frames[key] = (entry.event_id, frame)
            self._bytes += len(frame)
            while self._bytes > self._max_bytes and self._frames:
                self._bytes -= len(self._frames.popitem(last=False)[1][1])
        return frame
