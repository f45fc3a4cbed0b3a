"""What the trace writer refuses, and which records end a request (for the fsync policy).

Both checks run on every appended record, so they start with a plain byte
probe: a JSON string or key can only start with an unescaped quote, so the
probes never miss the real field, and a hit is confirmed by decoding the
record's header with :func:`pentrace.domain.records.decode_line`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import methodcaller
from pathlib import Path
from typing import Final

from pentrace.domain.records import MalformedLine, decode_line
from pentrace.errors import RecordRefusedError, UsageError

__all__ = [
    "PARTIAL_PROBE",
    "REQUEST_END_PROBE",
    "is_request_end",
    "refuse_batch",
    "refuse_record",
    "refuse_rotation",
]

PARTIAL_PROBE: Final = b'"partial_'
REQUEST_END_PROBE: Final = b'"request_end"'
_isspace = methodcaller("isspace")


def is_request_end(record: bytes) -> bool:
    """True when ``record`` is an ``event_msg`` whose payload type is ``request_end``."""
    if record.find(REQUEST_END_PROBE) < 0:
        return False
    try:
        head = decode_line(record)
    except MalformedLine:
        return True  # cannot tell: an extra fsync is the safe side
    return head is not None and head.kind == "event_msg" and head.ptype == "request_end"


def refuse_record(record: bytes, where: Path) -> None:
    """Raise :class:`RecordRefusedError` for a record no trace may hold; return otherwise.

    Refused: empty or blank records, records containing ``\\n`` (they would
    become several lines) and ``partial_*`` payloads (live-only fragments).
    """
    if not record or record.isspace():
        raise RecordRefusedError(
            f"refused an empty record for {where}: a trace line must hold one JSON envelope",
            hint="encode the envelope before appending it",
        )
    if record.find(b"\n") >= 0:
        raise RecordRefusedError(
            f"refused a record of {len(record)} bytes for {where}: it contains a raw newline "
            "and would become several trace lines",
            hint="encode records as compact JSON (msgspec.json.encode escapes newlines)",
        )
    if record.find(PARTIAL_PROBE) >= 0:
        try:
            head = decode_line(record)
        except MalformedLine:
            return
        ptype = head.ptype if head is not None else None
        if isinstance(ptype, str) and ptype.startswith("partial_"):
            raise RecordRefusedError(
                f"refused a {ptype} record for {where}: partial_* fragments are live-only "
                "and never written to a trace",
                hint="append the complete message once its stream segment ends",
            )


def refuse_batch(records: Sequence[bytes], joined: bytes, where: Path) -> None:
    """:func:`refuse_record` for every record of a batch (``joined``: them joined by ``\\n``).

    Checked once for the batch: a newline in the records joined without
    separators (a one-byte find is a memchr; bytes.count is several times
    slower), and the partial probe on the joined batch (no probe contains a
    newline, so none spans two records); only a hit pays for the per-record
    check that names the record.
    """
    if b"".join(records).find(b"\n") >= 0 or joined.find(PARTIAL_PROBE) >= 0:
        for record in records:
            refuse_record(record, where)
    # Empty or blank records, found without a Python-level loop in the common case.
    if not all(records) or any(map(_isspace, records)):
        for record in records:
            if not record or record.isspace():
                refuse_record(record, where)


def refuse_rotation(
    where: Path,
    next_shard: Callable[[int], Path] | None,
    header_records: Sequence[bytes],
    *,
    has_records: bool,
) -> Callable[[int], Path]:
    """``next_shard``, once a rotation away from ``where`` is known to be possible.

    Raises :class:`~pentrace.errors.UsageError` without a ``next_shard``, without
    header records, or when the current shard holds no records yet (a shard is
    never left empty behind), and refuses a header no trace may hold.
    """
    if next_shard is None:
        raise UsageError(
            f"cannot rotate {where}: the writer was opened without next_shard",
            hint="open the writer with open_session_writer(...) or pass next_shard=",
        )
    if not header_records:
        raise UsageError(
            f"cannot rotate {where}: a new shard must start with session_meta "
            "and tool_list_ready, got no header records",
            hint="pass the session_meta and tool_list_ready records",
        )
    if not has_records:
        raise UsageError(
            f"cannot rotate away from {where}: it has no records yet",
            hint="write the session's first records before rotating",
        )
    for record in header_records:
        refuse_record(record, where)
    return next_shard
