"""A TCP forwarder that plays the database host's network face: listen on veth addresses,
relay to the real PostgreSQL on 127.0.0.1.

    python -m tests.multihost.forwarder --to 127.0.0.1:5432 10.9.1.1:5432 10.9.2.1:5432

It prints ``READY`` once every address is bound.  The machine's PostgreSQL
listens on loopback only and is shared, so instead of editing its
``listen_addresses`` (which needs a restart) the namespaces reach it through
this process (ADR 0033).  To behave like a database server's kernel, the
sockets facing the agent hosts have short TCP keepalives and a user timeout:
when a host's link is cut, its connections die within seconds here too, and
the relayed PostgreSQL session ends (releasing any lock it held), as a real
server with ``tcp_keepalives_idle`` / ``tcp_user_timeout`` set would do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket

_KEEPALIVE = ((socket.TCP_KEEPIDLE, 1), (socket.TCP_KEEPINTVL, 1), (socket.TCP_KEEPCNT, 3))
_USER_TIMEOUT_MS = 4000


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def _harden(writer: asyncio.StreamWriter) -> None:
    """Keepalives and a user timeout on the socket facing an agent host."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in _KEEPALIVE:
        sock.setsockopt(socket.IPPROTO_TCP, option, value)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, _USER_TIMEOUT_MS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:
        pass
    finally:
        sink.close()


async def _serve(target: tuple[str, int], listen: list[tuple[str, int]]) -> None:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _harden(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        with contextlib.suppress(OSError):
            up_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    servers = [await asyncio.start_server(relay, host, port) for host, port in listen]
    print("READY", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", type=_address, default=("127.0.0.1", 5432))
    parser.add_argument("listen", type=_address, nargs="+", help="host:port to listen on")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args.to, args.listen))


if __name__ == "__main__":
    main()
