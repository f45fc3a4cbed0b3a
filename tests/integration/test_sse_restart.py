"""A server killed (SIGKILL) mid-stream and restarted: the client resumes with its last id."""

from __future__ import annotations

from pathlib import Path

from tests.integration import sse_harness as sse

SSE = "/api/v1/events/sse"


def test_a_killed_and_restarted_server_resumes_the_stream_with_nothing_lost_or_repeated(
    tmp_path: Path,
) -> None:
    sid = sse.session_id(0x51)
    sse.write_session(tmp_path, sid, 20)  # positions 1..82
    server = sse.Server(tmp_path, args=["--page-size", "20"]).start()
    writer = sse.writer_thread(tmp_path, sid, 100, delay=0.03, batch=5)  # 83..482 while we work
    seen: list[str] = []
    try:
        first = sse.SseClient(
            server.url + SSE, {"session_id": sid, "last_event_id": sse.event_ids(sid, 1, 1)[0]}
        )
        seen += [frame.id for frame in first.events(100) if frame.id]
        server.kill()  # mid-stream: the writer keeps writing into the ledger meanwhile
        seen += [frame.id for frame in first.until_closed() if frame.id]
        first.close()
        server.start()
        second = sse.SseClient(server.url + SSE, {"session_id": sid}, {"Last-Event-ID": seen[-1]})
        writer.join()
        remaining = 482 - 1 - len(seen)
        resumed = second.events(remaining, timeout=60)
        second.close()
    finally:
        server.stop()
        writer.join()
    seen += [frame.id for frame in resumed if frame.id]
    assert seen == sse.event_ids(sid, 2, 482)
