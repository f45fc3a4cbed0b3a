"""Foreign-session latency: from a line Claude Code appends to the SSE frame at a client.

    python -m benchmarks.agents_latency                 # 200 lines, 20 ms apart
    python -m benchmarks.agents_latency --lines 20 --pause 0.05

``pentrace serve --ingest --agents claude-code`` follows a Claude Code store
(``CLAUDE_CONFIG_DIR``) and the data root at once: a line appended to a
session file is imported into the session's trace (docs/agents.md) and the
follower indexes the new records, whose commit wakes the SSE streams. Each
line appended here is a user prompt, which maps to one record (the session's
``session_meta`` and first prompt come first, so the n-th line is position
n + 2). A client on a raw socket (``benchmarks.ingest_latency.Arrivals``)
timestamps each event id; both sides read the same clock. Issue #28 asks
for p95 <= 200 ms.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks.ingest_latency import Arrivals, latency_options, latency_row
from tests.integration.ingest_harness import append
from tests.integration.sse_harness import Server

SESSION = "0b0b0b0b-0000-4000-8000-00000000beef"


def _row(number: int, stamp: str) -> bytes:
    row = {
        "parentUuid": None if number == 0 else f"u{number - 1}",
        "isSidechain": False,
        "cwd": "/home/u/app",
        "sessionId": SESSION,
        "version": "1.0.98",
        "type": "user",
        "message": {"role": "user", "content": f"probe {number}"},
        "uuid": f"u{number}",
        "timestamp": stamp,
    }
    return json.dumps(row, separators=(",", ":")).encode() + b"\n"


def measure(lines: int, pause: float) -> list[float]:
    """Append ``lines`` prompts and return the append-to-frame latencies in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root, claude = base / "data", base / "claude"
        root.mkdir()
        store = claude / "projects" / "-home-u-app"
        store.mkdir(parents=True)
        path = store / f"{SESSION}.jsonl"
        path.write_bytes(_row(0, "2026-01-01T00:00:00.000Z"))
        env = {"CLAUDE_CONFIG_DIR": str(claude), "HOME": str(base / "home")}
        server = Server(root, env=env, args=["--ingest", "--agents", "claude-code"]).start()
        written: dict[int, float] = {}
        try:
            client = Arrivals(server.port)
            time.sleep(0.5)
            for number in range(1, lines + 1):
                data = _row(number, f"2026-01-01T00:00:{number % 60:02d}.000Z")
                written[number + 2] = time.time()
                append(path, data)
                time.sleep(pause)
            deadline = time.monotonic() + 60
            while len(set(written) & set(client.times)) < lines and time.monotonic() < deadline:
                time.sleep(0.05)
            client.close()
        finally:
            server.stop()
    missing = [position for position in written if position not in client.times]
    if missing:
        raise SystemExit(f"{len(missing)} of {lines} lines never reached the client")
    return [(client.times[position] - written[position]) * 1000 for position in sorted(written)]


def main() -> None:
    lines, pause = latency_options(__doc__, "lines")
    print(latency_row("serve --ingest --agents claude-code", measure(lines, pause)))


if __name__ == "__main__":
    main()
