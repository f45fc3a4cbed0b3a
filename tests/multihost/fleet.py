"""The deployment of docs/deployment.md in namespaces: followers, a server, writers, checks.

Every pentrace process gets the ledger URL as its host sees it (the gateway
address of its namespace) and the test's table prefix.  Timeouts are short so
that a cut link is noticed in seconds, as docs/deployment.md recommends for
a LAN.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from pentrace.infrastructure.ledger import LedgerDatabase, LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.storage.layout import DataRoot
from tests.integration.ingest_harness import WRITER, wait_until
from tests.integration.sse_harness import child_env, free_port, writer_argv
from tests.multihost.netns import Host, Network

TOKEN = "multihost-test-token"  # a test server's bearer token
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Per session, not the machine: a writer that lost its link mid-transaction frees its lock.
IDLE_TX = "-c idle_in_transaction_session_timeout=5000"


def host_env(network: Network, host: Host, root: Path) -> dict[str, str]:
    """The environment of a pentrace process on ``host``: its root, the shared ledger."""
    env = child_env(root)
    env.pop("PENGUIN_RUNTIME_EVENT_LEDGER_PATH", None)
    env.pop("PENGUIN_RUNTIME_EVENT_LEDGER_URL", None)
    env.update(
        PENTRACE_LEDGER_URL=network.url_from(host, options=IDLE_TX),
        PENTRACE_LEDGER_TABLE_PREFIX=network.prefix,
        PENTRACE_DB_CONNECT_TIMEOUT="2",
        PENTRACE_DB_STATEMENT_TIMEOUT="3",
    )
    return env


@dataclass
class Follower:
    """``pentrace ingest --follow`` on one agent host."""

    network: Network
    host: Host
    root: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.root.parent / f"{self.host.netns}-ingest.log"

    @property
    def health(self) -> Path:
        return self.root.parent / f"{self.host.netns}-health.json"

    def start(self) -> Follower:
        """Start it and wait for its first pass (the health file)."""
        self.health.unlink(missing_ok=True)
        command = [sys.executable, "-m", "pentrace", "ingest", "--follow"]
        command += ["--log-format", "json", "--health-file", str(self.health)]
        env = host_env(self.network, self.host, self.root)
        self.process = self.network.spawn(self.host, command, env=env, log=self.log)
        process = self.process
        wait_until(lambda: self.health.exists() or process.poll() is not None, "the first pass")
        assert process.poll() is None, self.log.read_text()
        return self

    def kill(self) -> int:
        """SIGKILL (no shutdown code runs); the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        return self.process.wait(30)

    def stop(self) -> int:
        """SIGTERM; the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def events(self, name: str) -> list[dict[str, Any]]:
        """This follower's JSON log events called ``name`` (every run, in order)."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                body = json.loads(line)
                if body.get("event") == name:
                    found.append(body)
        return found


def start_server(network: Network, host: Host, root: Path) -> str:
    """``pentrace serve`` bound to ``host``'s address, with a token; its base URL."""
    port = free_port()
    env = host_env(network, host, root) | {"PENTRACE_API_TOKEN": TOKEN}
    command = [sys.executable, "-m", "pentrace", "serve", "--host", host.address]
    command += ["--port", str(port), "--keepalive", "0.5"]
    process = network.spawn(host, command, env=env, log=root.parent / f"{host.netns}-serve.log")
    url = f"http://{host.address}:{port}"
    deadline = time.monotonic() + 60
    while not _answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not come up: {process.returncode}")
        time.sleep(0.1)
    return url


def _answers(url: str) -> bool:
    try:
        response = httpx.get(url + "/openapi.json", headers=AUTH, timeout=1)
    except httpx.TransportError:
        return False
    return response.status_code == 200


def foreign_writer(
    network: Network, host: Host, shard: Path, records: range, pause: float
) -> subprocess.Popen[bytes]:
    """The PenguinHarness-style writer (not pentrace) appending ``records`` on ``host``."""
    argv = [sys.executable, str(WRITER), str(shard), str(records.start), str(len(records))]
    return network.spawn(host, [*argv, str(pause)], env=child_env(shard.parent))


def finish(writers: list[subprocess.Popen[bytes]]) -> None:
    """Wait for every writer; each must succeed."""
    for writer in writers:
        assert writer.wait(120) == 0, writer.args


def pentrace_writer(
    network: Network, host: Host, root: Path, session: str, turns: int, pause: float
) -> subprocess.Popen[bytes]:
    """pentrace's own recorder on ``host`` (its live ledger: a local SQLite file)."""
    env = child_env(root)
    env.pop("PENTRACE_LEDGER_URL", None)
    return network.spawn(host, writer_argv(root, session, turns, pause), env=env)


def trace_lengths(root: Path) -> dict[str, int]:
    """Records per session under ``root``: complete, non-blank lines of its shards."""
    lengths: dict[str, int] = {}
    for ref in DataRoot(root).iter_sessions():
        total = 0
        for shard in ref.shards:
            total += sum(1 for line in shard.path.read_bytes().split(b"\n")[:-1] if line.strip())
        lengths[ref.session_id] = total
    return lengths


def ledger_order(network: Network) -> dict[str, list[int]]:
    """Each session's sequences in the shared ledger, in notification order."""
    database = LedgerDatabase(network.database_url, table_prefix=network.prefix)
    ledger = RuntimeEventLedger(database, LedgerSettings().with_limits_off())
    try:
        events = ledger.db.tables.events
        with ledger.db.reading("multihost check") as conn:
            rows = conn.execute(
                select(ledger.db.session_column(), events.c.sequence).order_by(
                    events.c.notification_id
                )
            ).all()
    finally:
        ledger.close()
    order: dict[str, list[int]] = defaultdict(list)
    for session, sequence in rows:
        order[session].append(sequence)
    return dict(order)


def frame_order(ids: list[str]) -> dict[str, list[int]]:
    """Each session's positions in SSE frame order, from ``evt:session:<ref>:<position>`` ids."""
    order: dict[str, list[int]] = defaultdict(list)
    for event_id in ids:
        reference, _, position = event_id.rpartition(":")
        order[reference.rsplit("/", 1)[-1]].append(int(position))
    return dict(order)
