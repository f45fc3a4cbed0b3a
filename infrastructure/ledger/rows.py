"""From a RuntimeEvent envelope (or an eventsourcing StoredEvent) to a ledger row.

The envelope is checked the way Penguin checks it, a little stricter
(:mod:`pentrace.domain.runtime.validation`: schema version, non-empty id and
type, mapping payload, a consistent privacy block) and then *re-redacted*: when the
redaction policy would still change anything, the ledger refuses the event
with a :class:`~pentrace.errors.RedactionError` naming the paths, never the
values.  Unlike Penguin, nothing is dropped silently.

Rows are built plain (the whole id, the envelope's JSON); :func:`stored_row`
and ``encoded_values(..., codec)`` turn them into the ledger's stored form
(:mod:`.backend.codec`, ADR 0058) after the redaction check, so nothing
unchecked is ever compressed.  ``ledger sync`` checks a session's rows with
their envelopes plain (:func:`checked_values`, :func:`candidate_values`) and
then compresses them in one call (:func:`compressed_rows`, ADR 0072).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple
from uuid import UUID

import msgspec
from eventsourcing.persistence import StoredEvent

from pentrace.domain.json_codec import JsonEncoder, escape_surrogates
from pentrace.domain.redaction import is_redacted, is_redacted_encoded, redact
from pentrace.domain.runtime.candidate import EncodedCandidate
from pentrace.domain.runtime.envelope import envelope_problems
from pentrace.domain.runtime.scope import Header, event_category
from pentrace.domain.runtime.session_events import EncodedEvent
from pentrace.errors import LedgerError, PentraceError, RedactionError
from pentrace.infrastructure.ledger.backend.codec import (
    RowCodec,
    derived_event_id,
    derived_session,
    stored_event_id,
)

__all__ = [
    "MAPPING_ERRORS",
    "ROW_COLUMNS",
    "SCHEMA_VERSION",
    "as_envelope",
    "candidate_values",
    "checked_values",
    "compressed_rows",
    "encoded_row",
    "encoded_values",
    "envelope_row",
    "event_row",
    "plain_values",
    "refusal",
    "stored_event_row",
    "stored_row",
    "type_category",
]

SCHEMA_VERSION: Final = "penguin.runtime_event.v1"
#: What mapping or checking one record raises, besides a ``LedgerError``, when it holds a
#: value the code cannot take (a lone surrogate where UTF-8 is wanted, say): every path
#: into the ledger reports that record as one finding and goes on with the others.
MAPPING_ERRORS: Final = (
    ValueError, TypeError, LookupError, RecursionError, ArithmeticError, msgspec.MsgspecError,
)  # fmt: skip
_SCOPE_COLUMNS: Final = (
    "session_id",
    "conversation_id",
    "agent_id",
    "task_id",
    "run_id",
    "project_id",
    "directory",
)
_encode: Final = JsonEncoder().encode
_type_categories: dict[str, str] = {}
# The ledger table's columns but ``notification_id``, in table order (``encoded_values``).
ROW_COLUMNS: Final = (
    "event_id",
    "stream_id",
    "sequence",
    "event_type",
    "category",
    "event_time",
    "inserted_at",
    *_SCOPE_COLUMNS,
    "privacy_classification",
    "redacted",
    "event_json",
)


def as_envelope(event: object) -> Mapping[str, Any]:
    """The envelope as builtins: a mapping, or a msgspec Struct converted field by field."""
    if isinstance(event, Mapping):
        return event
    if isinstance(event, msgspec.Struct):
        value = msgspec.to_builtins(event)
        if isinstance(value, dict):
            return value
    raise LedgerError(
        "expected a RuntimeEvent envelope (mapping or msgspec Struct), "
        f"found {type(event).__name__}",
        hint="build events with pentrace.domain.runtime",
    )


def event_row(event: object, inserted_at: int) -> dict[str, Any]:
    """The row of an :class:`EncodedEvent`, a RuntimeEvent struct or an envelope mapping."""
    if isinstance(event, EncodedEvent):
        return encoded_row(event, inserted_at)
    return envelope_row(as_envelope(event), inserted_at)


def encoded_row(encoded: EncodedEvent, inserted_at: int) -> dict[str, Any]:
    """:func:`envelope_row` of an envelope the trace mapping built and encoded."""
    return dict(zip(ROW_COLUMNS, encoded_values(encoded, inserted_at), strict=True))


def encoded_values(
    encoded: EncodedEvent, inserted_at: int, codec: RowCodec | None = None
) -> tuple[Any, ...]:
    """The columns of :func:`encoded_row`, as a tuple in :data:`ROW_COLUMNS` order.

    A screened envelope (its bytes cleared by the redaction screen, so fully
    redacted) is well formed by construction: its columns are read straight
    from the struct.  Any other goes through every check of :func:`envelope_row`.
    With ``codec`` the id and envelope are in the ledger's stored form.
    """
    return _values(encoded, inserted_at, codec, True)


def checked_values(
    encoded: EncodedEvent, inserted_at: int, codec: RowCodec | None = None
) -> tuple[Any, ...]:
    """:func:`encoded_values` with the envelope (the last column) left plain: every check
    is made, the other columns are in ``codec``'s stored form.  :func:`compressed_rows`
    then compresses a session's envelopes together (``ledger sync``)."""
    return _values(encoded, inserted_at, codec, False)


def compressed_rows(rows: list[tuple[Any, ...]], codec: RowCodec | None) -> list[tuple[Any, ...]]:
    """Rows of :func:`checked_values` with their envelopes in ``codec``'s stored form: the
    rows of :func:`encoded_values`, the frames made in one call (:meth:`RowCodec.stored_many`)."""
    if codec is None or codec.current is None or not rows:
        return rows
    frames = codec.stored_many([row[-1] for row in rows])
    return [(*row[:-1], frame) for row, frame in zip(rows, frames, strict=True)]


def _values(
    encoded: EncodedEvent, inserted_at: int, codec: RowCodec | None, compress: bool
) -> tuple[Any, ...]:
    header = encoded.header
    if header is None or not encoded.screened:
        values = _encoded_values(encoded, inserted_at)
        return values if codec is None else _stored_values(values, codec, compress)
    return _screened_values(encoded, header, inserted_at, codec, compress)


def candidate_values(
    found: EncodedCandidate, inserted_at: int, codec: RowCodec | None = None
) -> tuple[Any, ...]:
    """:func:`checked_values` of a candidate the screen cleared
    (:meth:`SessionEvents.screened <pentrace.domain.runtime.SessionEvents.screened>`)."""
    return _screened_values(found, found.header, inserted_at, codec, False)


def _screened_values(
    encoded: EncodedEvent | EncodedCandidate,
    header: Header,
    inserted_at: int,
    codec: RowCodec | None,
    compress: bool,
) -> tuple[Any, ...]:
    # A candidate the screen cleared: the columns its header gives, derived once per header.
    head = _heads.get(id(header))
    if head is None or head.header is not header:
        head = _header_columns(header)
    stream = head.stream
    sequence = _positive(encoded.sequence)
    event_id: str | None = encoded.event_id
    category: str | None = head.category
    rest = head.rest
    data = encoded.json
    if codec is not None:
        if codec.derived_ids:
            event_id = stored_event_id(encoded.event_id, stream, sequence)
            category = head.stored_category
            rest = head.stored_rest
        if compress:
            data = codec.stored_json(data)
    return (event_id, stream, sequence, head.event_type, category, _positive(encoded.time),
            inserted_at, *rest, data)  # fmt: skip


def stored_row(row: dict[str, Any], codec: RowCodec) -> dict[str, Any]:
    """A plain row (:func:`envelope_row`) as the ledger stores it (a new dict)."""
    values = _stored_values(tuple(row[column] for column in ROW_COLUMNS), codec)
    return dict(zip(ROW_COLUMNS, values, strict=True))


def plain_values(values: tuple[Any, ...], codec: RowCodec) -> dict[str, Any]:
    """The plain row (:func:`envelope_row`'s) of a row in stored form: the inverse of
    ``encoded_values(..., codec)``."""
    row = dict(zip(ROW_COLUMNS, values, strict=True))
    row["event_json"] = codec.plain_json(row["event_json"])
    if not codec.derived_ids:
        return row
    if row["event_id"] is None:
        row["event_id"] = derived_event_id(row["stream_id"], row["sequence"])
    if row["category"] is None:
        row["category"] = type_category(row["event_type"])
    if row["privacy_classification"] is None:
        row["privacy_classification"] = "public"
    session = row["session_id"]
    row["session_id"] = derived_session(row["stream_id"]) if session is None else session or None
    if row["session_id"] is not None:
        conversation = row["conversation_id"]
        row["conversation_id"] = row["session_id"] if conversation is None else conversation or None
    return row


def type_category(event_type: str) -> str:
    """The category a row of ``event_type`` has when its ``category`` column is NULL."""
    found = _type_categories.get(event_type)
    if found is None:
        if len(_type_categories) > 4096:
            _type_categories.clear()
        found = _type_categories[event_type] = event_category(event_type, {})
    return found


def _stored_values(
    values: tuple[Any, ...], codec: RowCodec, compress: bool = True
) -> tuple[Any, ...]:
    """Row form 2 (ADR 0058) leaves out what the row spells otherwise: a derived id, the
    type's own category, a conversation id equal to the session id, a session id its
    stream ends with ('' marks none where NULL would read as a value) and the default
    privacy classification, ``public``."""
    (event_id, stream, sequence, event_type, category, event_time, inserted_at,
     *rest, plain) = values  # fmt: skip
    if codec.derived_ids:
        event_id = stored_event_id(event_id, stream, sequence)
        category, rest = _form_2(stream, event_type, category, rest)
    return (event_id, stream, sequence, event_type, category, event_time, inserted_at,
            *rest, codec.stored_json(plain) if compress else plain)  # fmt: skip


def _form_2(
    stream: str, event_type: str, category: str | None, rest: list[Any]
) -> tuple[str | None, list[Any]]:
    """The category and the columns from ``session_id`` to ``redacted`` in row form 2."""
    session, conversation, *scope, classification, redacted = rest
    if classification == "public":
        classification = None
    if category == type_category(event_type):
        category = None
    if session is not None:
        conversation = None if conversation == session else conversation or ""
    if session == derived_session(stream):
        session = None
    elif session is None and stream.startswith("session:"):
        session = ""  # none, where NULL would read as the stream's
    return category, [session, conversation, *scope, classification, redacted]


class _Head(NamedTuple):
    """The columns every screened candidate of one shared header has (its own but the id,
    sequence, time and envelope): plain, and the category and what follows it in form 2."""

    header: Header
    stream: str
    event_type: str
    category: str
    rest: tuple[Any, ...]
    stored_category: str | None
    stored_rest: tuple[Any, ...]


# By the header's identity; each entry keeps its header alive, so no id is reused meanwhile.
_heads: dict[int, _Head] = {}
_MAX_HEADS: Final = 4096


def _header_columns(header: Header) -> _Head:
    """The :class:`_Head` of ``header``, remembered."""
    scope = header.scope
    stream = _text(header.stream_id) or "global"
    event_type = escape_surrogates(header.type)
    category = _text(header.category) or "session_lifecycle"
    # A candidate's privacy block is always public, nothing redacted.
    rest = [*(_text(scope.get(column)) for column in _SCOPE_COLUMNS), "public", False]
    stored_category, stored_rest = _form_2(stream, event_type, category, rest)
    head = _Head(header, stream, event_type, category, tuple(rest), stored_category,
                 tuple(stored_rest))  # fmt: skip
    if len(_heads) >= _MAX_HEADS:
        _heads.clear()
    _heads[id(header)] = head
    return head


def _encoded_values(encoded: EncodedEvent, inserted_at: int) -> tuple[Any, ...]:
    event = encoded.event
    if not encoded.screened:
        row = envelope_row(event.to_builtins(), inserted_at, encoded.json)
        return tuple(row[column] for column in ROW_COLUMNS)
    scope = event.scope
    privacy = event.privacy
    return (
        event.id,
        _text(event.stream_id) or "global",
        _positive(event.sequence),
        escape_surrogates(event.type),
        _text(event.category) or "session_lifecycle",
        _positive(event.time),
        inserted_at,
        _text(scope.get("session_id")),
        _text(scope.get("conversation_id")),
        _text(scope.get("agent_id")),
        _text(scope.get("task_id")),
        _text(scope.get("run_id")),
        _text(scope.get("project_id")),
        _text(scope.get("directory")),
        _text(privacy.classification) or "public",
        bool(privacy.redacted),
        encoded.json,
    )


def envelope_row(
    envelope: Mapping[str, Any], inserted_at: int, event_json: bytes | None = None
) -> dict[str, Any]:
    """Validate one envelope and return its column values (``notification_id`` excluded).

    ``event_json`` is the envelope's encoding when the caller has it already.
    """
    event_id = envelope.get("id")
    if not isinstance(event_id, str) or not event_id:
        raise LedgerError(
            "expected a non-empty string `id` in the RuntimeEvent envelope, found "
            f"{type(event_id).__name__}",
            hint="build events with pentrace.domain.runtime",
        )
    _check_shape(envelope, event_id)
    if event_json is None:
        event_json = _encode(envelope)
    if not is_redacted_encoded(envelope, event_json):
        paths = sorted(set(changed_paths(envelope, redact(envelope).value)))
        shown = ", ".join(paths[:20]) + (
            f" (and {len(paths) - 20} more)" if len(paths) > 20 else ""
        )
        raise RedactionError(
            f"event {event_id}: the envelope is not fully redacted at {shown or '(unknown path)'}",
            hint="build the envelope with pentrace.domain.runtime, which redacts "
            "payload, actor, correlation, scope and projections",
        )
    scope = envelope.get("scope")
    scope = scope if isinstance(scope, Mapping) else {}
    privacy = envelope["privacy"]
    row: dict[str, Any] = {
        "event_id": event_id,
        "stream_id": _text(envelope.get("stream_id")) or "global",
        "sequence": _positive(envelope.get("sequence")),
        "event_type": escape_surrogates(envelope["type"]),
        "category": _text(envelope.get("category")) or "session_lifecycle",
        "event_time": _positive(envelope.get("time")),
        "inserted_at": inserted_at,
        "privacy_classification": _text(privacy.get("classification")) or "public",
        "redacted": bool(privacy.get("redacted")),
        "event_json": event_json,
    }
    for column in _SCOPE_COLUMNS:
        row[column] = _text(scope.get(column))
    return row


def stored_event_row(stored: StoredEvent, inserted_at: int) -> dict[str, Any]:
    """Columns for a bare eventsourcing StoredEvent (the library's recorder interface).

    Its id follows the ledger's scheme, ``evt:<originator_id>:<version:08d>``;
    the state is stored as given, after the same redaction check as envelopes.
    """
    stream = (
        stored.originator_id.hex if isinstance(stored.originator_id, UUID) else stored.originator_id
    )
    event_id = f"evt:{stream}:{stored.originator_version:08d}"
    state_text = stored.state.decode("utf-8", "replace")
    if not is_redacted(state_text):
        raise RedactionError(
            f"event {event_id}: the stored state is not fully redacted",
            hint="redact event state with pentrace.domain.redaction before recording it",
        )
    row = dict.fromkeys(_SCOPE_COLUMNS)
    row.update(
        event_id=event_id,
        stream_id=stream,
        sequence=stored.originator_version,
        event_type=stored.topic,
        category="session_lifecycle",
        event_time=0,
        inserted_at=inserted_at,
        privacy_classification="public",
        redacted=False,
        event_json=stored.state,
    )
    return row


def refusal(error: BaseException) -> str:
    """Why a record was refused, for a finding: a pentrace error's message, else what kind
    of value the mapping could not take, never the value (it may be a secret)."""
    if isinstance(error, PentraceError):
        return error.message
    detail = type(error).__name__
    if isinstance(error, UnicodeError):
        detail += f": {getattr(error, 'reason', 'not text')}"
    elif isinstance(error, msgspec.MsgspecError):  # names a path, not a value
        detail += f": {str(error).splitlines()[0][:200]}" if str(error) else ""
    return f"the record cannot be mapped to a RuntimeEvent ({detail})"


def changed_paths(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """Dotted paths (``[i]`` for list items) where ``after`` differs from ``before``."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key, value in before.items():
            child = f"{path}.{key}" if path else str(key)
            if key not in after:
                yield child
            else:
                yield from changed_paths(value, after[key], child)
    elif isinstance(before, list | tuple) and isinstance(after, list | tuple):
        for index, (old, new) in enumerate(zip(before, after, strict=False)):
            yield from changed_paths(old, new, f"{path}[{index}]")
    elif before != after:
        yield path or "$"


def _check_shape(envelope: Mapping[str, Any], event_id: str) -> None:
    problems = envelope_problems(envelope)
    if problems:
        raise LedgerError(
            f"event {event_id}: not a valid RuntimeEvent envelope: {'; '.join(problems)}",
            hint="build events with pentrace.domain.runtime",
        )


def _text(value: Any) -> str | None:
    # Text columns are bound as UTF-8: lone surrogates go in as their JSON escapes (ADR 0015).
    if isinstance(value, str) and value:
        return value if value.isascii() else escape_surrogates(value)
    return None


def _positive(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0
