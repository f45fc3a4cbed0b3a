"""`pentrace serve --ingest`: a foreign writer's records reach a connected SSE client.

One process for a single machine: the follower runs on a thread of the server,
and its commits wake the server's SSE streams at once (the ledger's waker).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.integration.ingest_harness import SESSION, WRITER, shard
from tests.integration.sse_harness import Server, SseClient


def test_records_a_foreign_process_appends_arrive_as_sse_frames_in_order(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    server = Server(root, args=["--ingest"]).start()
    client = SseClient(server.url + "/api/v1/events/sse")
    try:
        writer = subprocess.run(
            [sys.executable, str(WRITER), str(shard(root)), "1", "25", "0.001"],
            check=True,
            capture_output=True,
        )
        assert writer.returncode == 0
        frames = client.events(25, timeout=60)
    finally:
        client.close()
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(60)
    # An event id ends with the record's session position.
    assert [int(str(frame.id).rsplit(":", 1)[1]) for frame in frames] == list(range(1, 26))
    orders = [frame.data["order"] for frame in frames]
    assert orders == sorted(orders)
    assert {frame.data["properties"]["sessionID"] for frame in frames} == {SESSION}
    assert code == 0, server.output()
    assert "ingest stopped" in server.output()
