"""The multi-host deployment (docs/deployment.md) for real, in Linux network namespaces.

Two agent hosts, each a namespace with its own data root and its own
``pentrace ingest --follow``; host A's traces come from a PenguinHarness-style
writer that is not pentrace, host B's from pentrace's recorder.  PostgreSQL is
reached over each host's veth link (through a forwarder on the link's root
side; the machine's server listens on loopback only).  ``pentrace serve`` runs
in a third namespace on the same ledger, and a client in the root namespace
reads its SSE stream across that link.

Opt-in: needs root, ``ip netns``, ``PENTRACE_NETNS_TESTS=1`` and
``PENTRACE_TEST_DATABASE_URL`` (``.ci/run`` sets them where it can).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.ingest_harness import DAY, wait_until
from tests.integration.sse_harness import SseClient, session_id
from tests.multihost.fleet import (
    AUTH,
    Follower,
    finish,
    foreign_writer,
    frame_order,
    host_env,
    ledger_order,
    pentrace_writer,
    start_server,
    trace_lengths,
)
from tests.multihost.netns import Host, Network, netns_unavailable

URL = os.environ.get("PENTRACE_TEST_DATABASE_URL")
SKIP = netns_unavailable(URL)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.skipif(SKIP is not None, reason=SKIP or ""),
]

FOREIGN = [session_id(0xA1), session_id(0xA2)]
NATIVE = session_id(0xB1)
CUT_SECONDS = 5.0  # longer than the 2 s connect timeout and the forwarder's ~4 s keepalive


@pytest.fixture
def network() -> Iterator[Network]:
    assert URL is not None
    net = Network(URL)
    try:
        yield net
    finally:
        net.close()


def held(network: Network, sessions: list[str]) -> int:
    order = ledger_order(network)
    return sum(len(order.get(sid, [])) for sid in sessions)


def audit(network: Network, host: Host, root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """``pentrace audit --json`` run on ``host`` against the shared ledger."""
    command = [sys.executable, "-m", "pentrace", "audit", "--json", *args]
    done = subprocess.run(
        host.command(command),
        env=host_env(network, host, root),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout)


def problems(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body["problems"])


def test_two_agent_hosts_feed_one_postgres_ledger_and_an_sse_client_exactly_once(
    tmp_path: Path, network: Network
) -> None:
    assert URL is not None
    host_a, host_b, web = (network.add_host(name) for name in ("a", "b", "web"))
    network.start_forwarder()
    root_a, root_b, root_web = (tmp_path / name / "data" for name in ("a", "b", "web"))
    for root in (root_a, root_b, root_web):
        root.mkdir(parents=True)

    server = start_server(network, web, root_web)
    client = SseClient(server + "/api/v1/events/sse", headers=AUTH)
    follower_a = Follower(network, host_a, root_a).start()
    follower_b = Follower(network, host_b, root_b).start()
    try:
        assert client.next(timeout=30).type == "server.connected"
        shards = [DataRoot(root_a).shard_path("fleet", "harness", sid, 1, DAY) for sid in FOREIGN]
        host_b_writes = pentrace_writer(network, host_b, root_b, NATIVE, 80, 0.03)
        finish([foreign_writer(network, host_a, path, range(1, 101), 0.01) for path in shards])
        wait_until(lambda: held(network, FOREIGN) >= 20, "host A's first records")

        # Host A loses its link while its writer goes on writing ...
        host_a.cut()
        cut_at = time.monotonic()
        try:
            during = [foreign_writer(network, host_a, p, range(101, 301), 0.01) for p in shards]
            # ... and meanwhile host B's follower is killed (SIGKILL); B writes on while it is
            # down, then it restarts.
            wait_until(lambda: held(network, [NATIVE]) >= 40, "host B's first records")
            follower_b.kill()
            before_restart = held(network, [NATIVE])
            finish([host_b_writes])
            finish([pentrace_writer(network, host_b, root_b, NATIVE, 40, 0.0)])
            follower_b.start()
            finish(during)
            time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut_at)))
        finally:
            host_a.restore()
        finish([foreign_writer(network, host_a, path, range(301, 401), 0.005) for path in shards])

        lengths = trace_lengths(root_a) | trace_lengths(root_b)
        assert lengths == {FOREIGN[0]: 400, FOREIGN[1]: 400, NATIVE: 2 + 4 * 120}
        expected = {sid: list(range(1, count + 1)) for sid, count in lengths.items()}
        wait_until(lambda: ledger_order(network) == expected, "every record in the ledger")

        frames = client.events(sum(lengths.values()), timeout=60)
        ids = [frame.id for frame in frames if frame.id is not None]
        assert len(set(ids)) == len(ids)
        assert frame_order(ids) == expected
        time.sleep(0.5)  # a best-effort look for repeats arriving after the last record
        extra = []
        while True:
            try:
                item = client.frames.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, BaseException) and item is not None and item.id:
                extra.append(item.id)
        assert extra == []

        assert follower_a.stop() == 0, follower_a.log.read_text()
        assert follower_b.stop() == 0, follower_b.log.read_text()
    finally:
        client.close()

    # The cut was felt by host A, and host A caught up on its own.
    assert follower_a.events("write_failed"), "host A never noticed its link was down"
    # Host B's restart resumed from its committed cursor: nothing read twice.
    stopped = follower_b.events("stopped")[-1]
    assert stopped["already_held"] == 0
    assert stopped["indexed"] == lengths[NATIVE] - before_restart

    # audit from each host against the shared ledger: clean for its own sessions ...
    for host, root, agent in ((host_a, root_a, "harness"), (host_b, root_b, "coder")):
        code, body = audit(network, host, root, "--agent", agent)
        assert (code, problems(body)) == (0, [])
    # ... and over its whole root, the other host's sessions are the only thing it cannot see.
    code, body = audit(network, host_a, root_a)
    assert code == 1
    assert sorted((p["code"], p["session_id"].rsplit("/", 1)[-1]) for p in problems(body)) == [
        ("ledger_orphan_stream", NATIVE)
    ]
