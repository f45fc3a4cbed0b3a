"""Which ``Host`` and ``Origin`` values the service answers (ADR 0011), as pure functions.

A web page the user visits can make the browser send requests to the service:
with DNS rebinding its own name (``attacker.example``) resolves to 127.0.0.1,
the request carries ``Host: attacker.example``, and the browser lets the page
read the answer because, to the browser, it is same-origin.  So the service
answers only Host names it is bound to:

- bound to a loopback address or ``localhost``: ``localhost``, ``127.0.0.1`` (any
  127.0.0.0/8 address) and ``[::1]``;
- bound to another address: that address, and the loopback names (a local proxy);
- bound to every interface (``0.0.0.0``, ``::``): the loopback names and any IP
  literal, because a browser sends an IP literal as Host only when the page's own
  origin is that IP (a rebinding page always has a DNS name), and a token is
  required there anyway;
- plus the names the operator allows (``--allowed-host``; ``*`` allows any).

The port is not compared: it does not help against rebinding (the attacker's
page uses the server's port) and a tunnel or proxy may forward another one.

``Origin``, sent by browsers on cross-origin requests (and on every non-GET), must
be the request's own origin (same host and port as ``Host``) or one the operator
allows (``--allowed-origin``).  Without ``Origin``, ``Sec-Fetch-Site: cross-site``
or ``same-site`` marks a no-cors load by another page (``<script src>``,
``<img>``): refused too, except a top-level navigation (a link the user followed,
which shows the page to the user and to nobody else).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["LOOPBACK_NAMES", "HostPolicy", "normalize_origin", "split_host"]

LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})  # noqa: S104  # names of a wildcard bind
_NAME: Final = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")
_ORIGIN: Final = re.compile(r"(https?)://([^/?#@]+)")


def split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a Host header value (``localhost:8765``, ``[::1]``), names
    lowercased, IPv6 without brackets, one trailing dot dropped; None when malformed."""
    value = value.strip().lower()
    port: str | None = None
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
        if not _is_ip(name) or ":" not in name:
            return None
    else:
        name, colon, port_text = value.rpartition(":")
        if not colon:
            name, port_text = value, ""
        elif ":" in name:
            return None  # an IPv6 literal must be bracketed in a Host header
        port = port_text if colon else None
        name = name.removesuffix(".")
        if not (_is_ip(name) or _NAME.fullmatch(name)):
            return None
    if port is not None and not (
        0 < len(port) <= 5 and port.isascii() and port.isdigit() and 0 < int(port) < 65536
    ):
        return None
    return name, None if port is None else int(port)


def normalize_origin(value: str) -> str | None:
    """``scheme://host[:port]`` of an origin, lowercased, default port dropped; None when
    the value is not an http(s) origin (``null``, a path, user info)."""
    match = _ORIGIN.fullmatch(value.strip().lower().removesuffix("/"))
    if match is None:
        return None
    scheme, authority = match.groups()
    parts = split_host(authority)
    if parts is None:
        return None
    return f"{scheme}://{_authority(parts, scheme)}"


def _authority(parts: tuple[str, int | None], scheme: str = "http") -> str:
    name, port = parts
    shown = f"[{name}]" if ":" in name else name
    default = 443 if scheme == "https" else 80
    return shown if port in (None, default) else f"{shown}:{port}"


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HostPolicy:
    """The Host and Origin rules of one server (see the module docstring)."""

    bind: str
    allowed_hosts: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()

    @classmethod
    def of(cls, bind: str, hosts: Iterable[str] = (), origins: Iterable[str] = ()) -> HostPolicy:
        """A policy from the bind address and the operator's lists (already validated)."""
        names = set()
        for host in hosts:
            parts = split_host(host) if host != "*" else ("*", None)
            if parts is not None:
                names.add(parts[0])
        return cls(
            bind=bind.strip("[]").lower(),
            allowed_hosts=frozenset(names),
            allowed_origins=frozenset(filter(None, map(normalize_origin, origins))),
        )

    def host_refusal(self, header: str | None) -> tuple[int, str] | None:
        """The status (400 missing or malformed, 421 not ours) and reason for refusing a
        request with this Host header, or None when it is answered."""
        if header is None:
            return 400, "the request has no Host header"
        parts = split_host(header)
        if parts is None:
            return 400, f"the Host header {header[:80]!r} is not a host name or address"
        name = parts[0]
        if "*" in self.allowed_hosts or name in self.allowed_hosts or name == self.bind:
            return None
        if name in LOOPBACK_NAMES or (_is_ip(name) and _is_loopback(name)):
            return None
        if self.bind in _WILDCARDS and _is_ip(name):
            return None
        return 421, f"this server does not answer for Host {name!r}"

    def origin_refusal(
        self, origin: str | None, host: str | None, site: str | None, navigation: bool
    ) -> str | None:
        """Why a request with this ``Origin`` (and ``Sec-Fetch-Site``) is refused, or None."""
        if origin is None:
            if site in ("cross-site", "same-site") and not navigation:
                return f"a {site} request (Sec-Fetch-Site) without an allowed Origin"
            return None
        normal = normalize_origin(origin)
        if normal is None:
            return f"the Origin {origin[:80]!r} is not an allowed origin"
        if normal in self.allowed_origins or self.same_origin(normal, host):
            return None
        return f"the Origin {normal!r} is not this server's and not an allowed origin"

    def same_origin(self, normal_origin: str, host: str | None) -> bool:
        """Whether an origin (normalized) names the host and port the request was sent to."""
        parts = split_host(host or "")
        if parts is None:
            return False
        scheme, _, authority = normal_origin.partition("://")
        return authority == _authority(parts, scheme)

    def cors_allowed(self, origin: str | None) -> str | None:
        """The origin to echo in ``Access-Control-Allow-Origin``, when the operator allows it."""
        normal = normalize_origin(origin) if origin else None
        return normal if normal is not None and normal in self.allowed_origins else None
