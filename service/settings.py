"""Settings of the event service: where it binds, what it reads, who may call it.

The bearer token comes from ``PENTRACE_API_TOKEN`` or from a file (``--token-file``
or ``PENTRACE_API_TOKEN_FILE``), never from a command-line value (it would show in
``ps``).  It is held as a pydantic ``SecretStr`` so no repr, log line or error ever
prints it.  Binding to anything but a loopback address without a token is refused.

``allowed_hosts`` and ``allowed_origins`` widen the Host and Origin checks of
:mod:`pentrace.service.edge.hosts` (``--allowed-host``, ``--allowed-origin``, or the
comma-separated ``PENTRACE_ALLOWED_HOSTS`` / ``PENTRACE_ALLOWED_ORIGINS``).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from pentrace.errors import ConfigError
from pentrace.infrastructure.operations.ledger import LedgerSettings
from pentrace.infrastructure.operations.projections import ENV_ANALYTICS_URL
from pentrace.infrastructure.operations.sessions import read_config_text
from pentrace.service.edge.hosts import HostPolicy, normalize_origin, split_host

__all__ = [
    "ENV_ALLOWED_HOSTS",
    "ENV_ALLOWED_ORIGINS",
    "ENV_TOKEN",
    "ENV_TOKEN_FILE",
    "ServiceSettings",
    "is_loopback",
    "read_list",
    "read_token",
]

ENV_ALLOWED_HOSTS: Final = "PENTRACE_ALLOWED_HOSTS"
ENV_ALLOWED_ORIGINS: Final = "PENTRACE_ALLOWED_ORIGINS"

ENV_TOKEN: Final = "PENTRACE_API_TOKEN"  # noqa: S105  # a variable name, not a secret
ENV_TOKEN_FILE: Final = "PENTRACE_API_TOKEN_FILE"  # noqa: S105  # a variable name
_MIN_TOKEN_CHARS: Final = 16


class ServiceSettings(BaseModel):
    """Everything :func:`pentrace.service.app.create_app` needs."""

    model_config = ConfigDict(frozen=True)

    data_root: Path
    # The ledger, its table prefix included (LedgerSettings.table_prefix).
    ledger: LedgerSettings = Field(default_factory=LedgerSettings)
    # The analytics read models' database; None: <data_root>/analytics/analytics.db.
    analytics_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    token: SecretStr | None = None
    # Host names answered besides the bound ones ("*": any); origins allowed CORS reads.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    keepalive_seconds: float = 15.0
    poll_interval_seconds: float = 0.05
    page_size: int = 500
    frame_cache_bytes: int = 4 * 1024 * 1024
    retry_ms: int = 1000
    # The largest image the viewer serves or asks for (bytes, decoded); larger ones are named.
    image_max_bytes: int = Field(default=5 * 2**20, ge=0)
    test_page: bool = False

    @model_validator(mode="before")
    @classmethod
    def _earlier_prefix_field(cls, data: Any) -> Any:
        """``ledger_table_prefix=`` (before ADR 0034) still works for one release: it
        becomes ``ledger.table_prefix``."""
        if not isinstance(data, dict) or "ledger_table_prefix" not in data:
            return data
        data = dict(data)
        prefix = str(data.pop("ledger_table_prefix"))
        ledger = data.get("ledger") or LedgerSettings()
        if isinstance(ledger, LedgerSettings):
            data["ledger"] = ledger.model_copy(update={"table_prefix": prefix})
        else:
            data["ledger"] = {**dict(ledger), "table_prefix": prefix}
        return data

    def analytics_env(self) -> dict[str, str]:
        """These settings as the variables the analytics runners read (the ledger they
        follow, its table prefix, the read models' database), overriding the process's."""
        return {
            **self.ledger.to_env(),
            ENV_ANALYTICS_URL: self.analytics_url or "",
        }

    def policy(self) -> HostPolicy:
        """The Host and Origin rules of a server with these settings."""
        return HostPolicy.of(self.host, self.allowed_hosts, self.allowed_origins)

    def check_binding(self) -> None:
        """Refuse a non-loopback bind without a token, and malformed allowed hosts or
        origins (``ConfigError``)."""
        for host in self.allowed_hosts:
            parts = split_host(host) if host != "*" else ("*", None)
            if parts is None or parts[1] is not None:
                raise ConfigError(
                    f"allowed host {host[:80]!r}: expected a host name or address without "
                    "a port (ports are not compared), or *",
                    hint="for example --allowed-host pentrace.lan",
                )
        for origin in self.allowed_origins:
            if normalize_origin(origin) is None:
                raise ConfigError(
                    f"allowed origin {origin[:80]!r}: expected scheme://host[:port] with "
                    "scheme http or https and nothing after it",
                    hint="for example --allowed-origin https://viewer.example:8443",
                )
        if self.token is None and not is_loopback(self.host):
            raise ConfigError(
                f"binding the event service to {self.host}: expected a bearer token for a "
                "non-loopback address, found none",
                hint=f"set {ENV_TOKEN} or pass --token-file, or bind to 127.0.0.1",
            )


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(
    token_file: Path | None = None, environ: Mapping[str, str] | None = None
) -> SecretStr | None:
    """The configured token: ``token_file``, else ``$PENTRACE_API_TOKEN_FILE``, else
    ``$PENTRACE_API_TOKEN``; None when nothing is configured."""
    env = os.environ if environ is None else environ
    path = token_file or (Path(env[ENV_TOKEN_FILE]) if env.get(ENV_TOKEN_FILE) else None)
    if path is not None:
        hint = "check the path and its permissions"
        value = read_config_text(path, "API token file", hint).strip()
        where = str(path)
    else:
        value = env.get(ENV_TOKEN, "").strip()
        where = ENV_TOKEN
        if not value:
            return None
    if len(value) < _MIN_TOKEN_CHARS or any(ch.isspace() for ch in value):
        # The message names the source and the rule, never the value.
        raise ConfigError(
            f"the API token from {where}: expected at least {_MIN_TOKEN_CHARS} characters "
            "without whitespace, found a shorter or spaced value",
            hint="generate one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`",
        )
    return SecretStr(value)


def read_list(
    given: Iterable[str], variable: str, environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Values given as options, else the comma-separated ``$variable``; blanks dropped."""
    values = [value.strip() for value in given if value.strip()]
    if values:
        return tuple(values)
    env = os.environ if environ is None else environ
    return tuple(value.strip() for value in env.get(variable, "").split(",") if value.strip())
