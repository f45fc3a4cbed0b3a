"""Agent hosts as Linux network namespaces, joined to the root namespace by veth links.

Each :class:`Host` is a namespace with a loopback and one veth link to the
root namespace on its own /30 subnet (``10.X.N.1`` on the root side,
``10.X.N.2`` inside).  PostgreSQL is reached at the root side's address
through :mod:`tests.multihost.forwarder`.  :func:`netns_unavailable` says why
the tests cannot run here (not root, no ``ip netns``, no database URL, not
asked for); :class:`Network` removes every namespace, link and process it
made, even when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import make_url

from pentrace.infrastructure.ledger import LedgerDatabase

REPO = Path(__file__).resolve().parents[2]
ENABLE = "PENTRACE_NETNS_TESTS"
PG_PORT = 5432


def netns_unavailable(url: str | None) -> str | None:
    """Why the namespace tests are skipped here, or None when they can run."""
    if os.environ.get(ENABLE) != "1":
        return f"set {ENABLE}=1 (as root, with iproute2) to run the network namespace tests"
    if url is None:
        return "set PENTRACE_TEST_DATABASE_URL to a PostgreSQL URL"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"`ip netns` does not work here: {probe.stderr.decode(errors='replace').strip()}"
    return None


def _ip(*args: str, check: bool = True) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _free_octet() -> int:
    """A second octet for 10.X.0.0/16 that no interface of the root namespace uses."""
    used = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True, check=True)
    while True:
        octet = random.randint(64, 250)
        if f" 10.{octet}." not in used.stdout:
            return octet


@dataclass
class Host:
    """One namespace: its name, its veth ends and addresses."""

    netns: str
    outer: str  # the veth end in the root namespace (cut it to drop the host's link)
    gateway: str  # the root side's address: where the forwarder listens
    address: str  # the host's own address

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def cut(self) -> None:
        """Take the link down (the host keeps its address; packets go nowhere)."""
        _ip("link", "set", self.outer, "down")

    def restore(self) -> None:
        """Bring the link back up."""
        _ip("link", "set", self.outer, "up")


@dataclass
class Network:
    """Namespaces, veth links, a forwarder to PostgreSQL, and the processes run in them."""

    database_url: str
    octet: int = field(default_factory=_free_octet)
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    # The ledger's table prefix for this network's deployment; its tables are dropped on close.
    prefix: str = field(default_factory=lambda: f"mh_{uuid.uuid4().hex[:10]}_")
    hosts: list[Host] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    forwarder: subprocess.Popen[bytes] | None = None

    def add_host(self, name: str) -> Host:
        """A new namespace linked to the root namespace (forwarder not yet listening)."""
        number = len(self.hosts) + 1
        host = Host(
            netns=f"pt-{self.tag}-{name}",
            outer=f"pt{self.tag}{number}o",
            gateway=f"10.{self.octet}.{number}.1",
            address=f"10.{self.octet}.{number}.2",
        )
        inner = f"pt{self.tag}{number}i"
        self.hosts.append(host)  # before creating anything, so close() removes it
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", host.netns)
        _ip("addr", "add", f"{host.gateway}/30", "dev", host.outer)
        _ip("link", "set", host.outer, "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/30", "dev", inner)
        _ip("-n", host.netns, "link", "set", inner, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")
        return host

    def start_forwarder(self) -> None:
        """Relay each host's gateway address, port 5432, to the real server."""
        parsed = make_url(self.database_url)
        target = f"{parsed.host or '127.0.0.1'}:{parsed.port or PG_PORT}"
        listen = [f"{host.gateway}:{PG_PORT}" for host in self.hosts]
        self.forwarder = subprocess.Popen(
            [sys.executable, "-m", "tests.multihost.forwarder", "--to", target, *listen],
            cwd=REPO,
            stdout=subprocess.PIPE,
        )
        assert self.forwarder.stdout is not None
        if self.forwarder.stdout.readline().strip() != b"READY":
            raise RuntimeError("the PostgreSQL forwarder did not start")

    def url_from(self, host: Host, options: str | None = None) -> str:
        """The database URL as ``host`` sees it: the server at its gateway address, with
        extra libpq ``options`` (``-c name=value``) for its sessions."""
        parsed = make_url(self.database_url).set(host=host.gateway, port=PG_PORT)
        if options:
            parsed = parsed.update_query_dict({"options": options})
        return parsed.render_as_string(hide_password=False)

    def spawn(
        self, host: Host, argv: Sequence[str], *, env: dict[str, str], log: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``host``; output to ``log`` (or discarded)."""
        sink = log.open("ab") if log is not None else subprocess.DEVNULL
        try:
            process = subprocess.Popen(
                host.command(argv), env=env, cwd=REPO, stdout=sink, stderr=subprocess.STDOUT
            )
        finally:
            if log is not None and not isinstance(sink, int):
                sink.close()
        self.processes.append(process)
        return process

    def close(self) -> None:
        """Kill what is left, stop the forwarder, delete every namespace and link."""
        for process in [*self.processes, self.forwarder]:
            if process is not None and process.poll() is None:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(10)
        if self.forwarder is not None and self.forwarder.stdout is not None:
            self.forwarder.stdout.close()
        for host in self.hosts:
            _kill_inside(host.netns)
            _ip("netns", "del", host.netns, check=False)
            _ip("link", "del", host.outer, check=False)
        database = LedgerDatabase(self.database_url, table_prefix=self.prefix)
        try:
            database.drop_all()
        finally:
            database.close()


def _kill_inside(netns: str) -> None:
    """SIGKILL any process still running in one of our own namespaces."""
    found = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    for pid in found.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
