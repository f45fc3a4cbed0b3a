"""A real writer process for the crash and two-writer tests (run as a script, never imported).

writer_child.py requests <shard> <first_request> <seed>
    write requests for ever (until killed) with the default durability policy,
    printing "ACK <n>" after each request_end append returns.
writer_child.py rotate <data root> <session id> <header bytes>
    open the session's writer, append one record, print "READY", then rotate
    to shard _002 with a session_meta header of about <header bytes> (killed
    while the new shard's temp file is being written).
writer_child.py session <shard> <first_request> <seed> <big_after>
    the same, starting a new shard with a session_meta record.
writer_child.py batch <shard> <tag> <count> <wait|nowait> [hold]
    take the shard's lock, print "LOCKED", append <count> records tagged <tag>,
    and with "hold" wait for a line on stdin before closing.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import msgspec

from pentrace.errors import TraceLockedError
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.writer import ShardWriter, open_session_writer


def record(kind: str, payload: dict[str, object]) -> bytes:
    """One envelope line, as the harness would encode it."""
    return msgspec.json.encode(
        {"timestamp": "2026-11-29T10:00:00.000Z", "type": kind, "payload": payload}
    )


def request_records(n: int, size: int) -> list[bytes]:
    """The five records of request ``n`` with a tool output of ``size`` characters."""
    return [
        record("model_msg", {"type": "text", "role": "user", "text": f"req-{n}"}),
        record("event_msg", {"type": "request_begin"}),
        record(
            "model_msg",
            {
                "type": "tool_call",
                "role": "assistant",
                "name": "exec_command",
                "arguments": "{}",
                "tool_call_id": f"call_{n}",
            },
        ),
        record(
            "model_msg",
            {
                "type": "tool_call_output",
                "role": "user",
                "output": "o" * size,
                "tool_call_id": f"call_{n}",
            },
        ),
        record("event_msg", {"type": "request_end", "status": "completed"}),
    ]


def run_requests(shard: str, first: int, seed: int, big_after: int, meta: bool = False) -> None:
    """Append requests until killed; batches and single appends alternate.

    With ``meta``, a new shard starts with a session_meta (a trace import takes).
    """
    rng = random.Random(seed)
    with ShardWriter(shard) as writer:
        if meta and writer.size == 0:
            session_id = Path(shard).name.rsplit("_", 1)[0]
            writer.append(record("session_meta", {"session_id": session_id, "provider": "p"}))
        n = first
        while True:
            big = n == first + big_after
            records = request_records(n, 8_000_000 if big else rng.choice([10, 1_000, 50_000]))
            if big:
                print(f"BIG {n}", flush=True)
            if n % 2:
                writer.append_many(records)
            else:
                for line in records:
                    writer.append(line)
            print(f"ACK {n}", flush=True)
            n += 1


def run_batch(shard: str, tag: str, count: int, wait: bool, hold: bool) -> int:
    """Take the lock, write ``count`` tagged records, optionally hold until stdin says so."""
    try:
        writer = ShardWriter(shard, wait=60.0 if wait else None)
    except TraceLockedError as exc:
        print(f"LOCKED-OUT {exc.message}", flush=True)
        return 3
    with writer:
        print("LOCKED", flush=True)
        for i in range(count):
            body = f"{tag}-{i}-" + tag * (i % 7) * 3000
            writer.append(record("model_msg", {"type": "text", "role": "user", "text": body}))
        if hold:
            sys.stdin.readline()
    print("DONE", flush=True)
    return 0


def run_rotate(root: str, session_id: str, size: int) -> None:
    """Append a record, then rotate with a huge header, slowly enough to be killed in it."""
    writer = open_session_writer(DataRoot(Path(root)), "proj", "agent", session_id)
    writer.append(record("session_meta", {"session_id": session_id, "system_prompt": "s"}))
    print("READY", flush=True)
    writer.rotate([record("session_meta", {"session_id": session_id, "system_prompt": "p" * size})])
    print("ROTATED", flush=True)


def main(argv: list[str]) -> int:
    """Dispatch on the first argument (see the module docstring)."""
    if argv[0] == "rotate":
        run_rotate(argv[1], argv[2], int(argv[3]))
        return 0
    if argv[0] in ("requests", "session"):
        run_requests(argv[1], int(argv[2]), int(argv[3]), int(argv[4]), argv[0] == "session")
        return 0
    return run_batch(argv[1], argv[2], int(argv[3]), argv[4] == "wait", argv[5:] == ["hold"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
