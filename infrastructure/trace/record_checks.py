"""What the trace writer refuses, and which records end a request (for the fsync policy).

Both checks run on every appended record, so they start with a plain byte
probe: a JSON string or key can only start with an unescaped quote, so the
probes never miss the real field, and a hit is confirmed by decoding the
record's header with :func:`pentrace.domain.records.decode_line`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pentrace.domain.records import MalformedLine, decode_line
from pentrace.errors import RecordRefusedError

__all__ = ["PARTIAL_PROBE", "REQUEST_END_PROBE", "is_request_end", "refuse_record"]

PARTIAL_PROBE: Final = b'"partial_'
REQUEST_END_PROBE: Final = b'"request_end"'


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
