"""A trace writer that is not pentrace: appends PenguinHarness-style lines with os.write.

Run as a script (it imports nothing from pentrace, as a Node harness would not):

foreign_writer.py <shard> <first> <count> [pause_seconds]
    append records <first> .. <first + count - 1> (record 1 is a session_meta),
    one os.write(2) per line on an O_APPEND descriptor, printing
    "WROTE <n> <time.time() just before the write>" after each, with
    ``pause_seconds`` between lines; then print "DONE".
"""

from __future__ import annotations

import json
import os
import sys
import time


def line(number: int) -> bytes:
    """Record ``number`` of a session: the compact JSON PenguinHarness appends."""
    if number == 1:
        kind, payload = "session_meta", {"session_id": "x", "workspace": "/srv/foreign"}
    else:
        kind = "model_msg"
        payload = {"type": "text", "role": "assistant", "text": f"record {number}"}
    stamp = "2026-11-29T10:00:00.000Z"
    body = {"timestamp": stamp, "type": kind, "payload": payload}
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def main() -> None:
    shard, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    os.makedirs(os.path.dirname(shard), exist_ok=True)
    fd = os.open(shard, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for number in range(first, first + count):
            data = line(number)
            before = time.time()
            os.write(fd, data)
            print(f"WROTE {number} {before:.6f}", flush=True)
            if pause:
                time.sleep(pause)
    finally:
        os.close(fd)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
