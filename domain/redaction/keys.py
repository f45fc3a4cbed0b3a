"""Which mapping keys name a secret: Penguin's four rules plus the names it misses.

A key is first normalised the way Penguin does it (``apiKey`` -> ``api_key``,
``X-Api-Key`` -> ``x_api_key``, ``APIKey`` -> ``apikey``), then judged on its
``_`` segments and on its *compact* form (the segments glued together), so that
``PGPASSWORD``, ``XApiKey`` and ``password2`` are caught as well as
``db_password``.  Token *telemetry* (``tokens``, ``input_tokens``,
``token_usage``, ``max_tokens``, ``context_window``) is never a secret.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise
from typing import Final

__all__ = ["is_secret_key", "normalize_key"]

_CAMEL: Final = re.compile(r"([a-z0-9])([A-Z])")
_NON_ALNUM: Final = re.compile(r"[^A-Za-z0-9_]+")
_TRAILING_DIGITS: Final = re.compile(r"\d+$")

# Penguin's rules, verbatim (docs/runtime-events.md, "Redaction").
_EXACT: Final = frozenset(
    {
        "authorization",
        "bearer_token",
        "client_secret",
        "id_token",
        "password",
        "private_key",
        "refresh_token",
        "secret",
        "secret_key",
        "token",
    }
)
_SECRET_SEGMENTS: Final = frozenset({"authorization", "password", "secret"})
_KEY_SEGMENTS: Final = frozenset({"key", "keys"})
_KEY_QUALIFIERS: Final = frozenset({"api", "private"})
_TOKEN_PREFIXES: Final = frozenset({"access", "auth", "bearer", "id", "refresh", "session"})

# pentrace's additions (W12).
_SECRET_WORDS: Final = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "privatekey",
    "accesskey",
    "sessionkey",
    "credential",
    "cookie",
    "authorization",
    "bearer",
    "jwt",
    "databaseurl",
    "databaseuri",
    "dburl",
    "dburi",
    "connectionstring",
    "connstr",
    "openaikey",
    "anthropickey",
    "webhookurl",
)
_SECRET_EXACT_SEGMENTS: Final = frozenset(
    {"pwd", "dsn", "creds", "jwt", "dburl", "dburi", "connstr", "otp", "totp"}
)
# ``<word>_token`` is a secret unless <word> says it is a count or a tokenizer symbol.
_TOKEN_TELEMETRY: Final = frozenset(
    {
        "max",
        "min",
        "input",
        "output",
        "total",
        "prompt",
        "completion",
        "cache",
        "cached",
        "reasoning",
        "used",
        "num",
        "count",
        "per",
        "eos",
        "bos",
        "pad",
        "unk",
        "sep",
        "cls",
        "mask",
        "special",
        "first",
        "last",
    }
)
# ``<word>_tokens`` (plural) is usage telemetry unless <word> names a credential.
_CREDENTIAL_TOKEN_OWNERS: Final = frozenset(
    {"api", "access", "auth", "refresh", "oauth", "bearer", "id", "github", "gh", "hf", "slack"}
    | {"npm", "csrf", "xsrf", "personal", "deploy", "bot"}
)
# ``<word>_pass`` is a password for these (``DB_PASS``), a test count otherwise.
_PASS_OWNERS: Final = frozenset(
    {"db", "smtp", "mysql", "postgres", "pg", "redis", "mongo", "ftp", "sftp", "ssh", "ldap"}
    | {"proxy", "admin", "root", "user", "mail", "email", "imap", "vnc", "wifi", "amqp", "basic"}
    | {"http", "auth", "login", "account", "app", "api", "service", "sql", "database", "rabbitmq"}
)
# ``<word>_key`` is a secret unless <word> says it is a lookup or public key.
_BENIGN_KEY_QUALIFIERS: Final = frozenset(
    {
        "cache",
        "sort",
        "primary",
        "foreign",
        "partition",
        "public",
        "idempotency",
        "dedup",
        "dedupe",
        "group",
        "lookup",
        "hash",
        "map",
        "row",
        "column",
        "col",
        "index",
        "message",
        "msg",
        "event",
        "stream",
        "shard",
        "object",
        "routing",
        "unique",
        "composite",
        "join",
        "dict",
        "cursor",
        "page",
        "order",
        "config",
        "setting",
        "settings",
        "translation",
        "i18n",
        "list",
        "item",
        "entry",
        "record",
        "field",
        "attribute",
        "attr",
        "name",
        "option",
        "node",
        "cell",
        "table",
        "query",
        "search",
        "match",
        "shortcut",
        "keyboard",
        "hot",
        "file",
        "path",
        "bucket",
        "blob",
        "prefix",
        "lock",
        "namespace",
        "registry",
        "metric",
        "label",
        "tag",
        "feature",
        "flag",
        "s3",
        "storage",
        "sub",
        "parent",
        "child",
        "host",
    }
)


@lru_cache(maxsize=8192)
def normalize_key(key: str) -> str:
    """Penguin's key normalisation: camelCase -> snake, punctuation -> ``_``, lowercase."""
    snake = _CAMEL.sub(r"\1_\2", key).replace("-", "_")
    return _NON_ALNUM.sub("_", snake).strip("_").lower()


def _is_penguin_secret(normal: str, segments: list[str]) -> bool:
    if normal in _EXACT:
        return True
    if any(segment in _SECRET_SEGMENTS for segment in segments):
        return True
    present = set(segments)
    if present & _KEY_SEGMENTS and present & _KEY_QUALIFIERS:
        return True
    return any(
        first in _TOKEN_PREFIXES and second == "token" for first, second in pairwise(segments)
    )


def _is_extra_secret(segments: list[str]) -> bool:
    compact = "".join(segments)
    if any(word in compact for word in _SECRET_WORDS):
        return True
    stems = [_TRAILING_DIGITS.sub("", segment) for segment in segments]
    if any(stem in _SECRET_EXACT_SEGMENTS for stem in stems):
        return True
    for index, stem in enumerate(stems):
        before = stems[index - 1] if index else ""
        if index == len(stems) - 1 and stem == "token":
            return before not in _TOKEN_TELEMETRY
        if index == len(stems) - 1 and stem == "tokens":
            return before in _CREDENTIAL_TOKEN_OWNERS
        if index == len(stems) - 1 and stem == "pass":
            return before in _PASS_OWNERS
        if stem in _KEY_SEGMENTS and before and before not in _BENIGN_KEY_QUALIFIERS:
            return True
    return False


@lru_cache(maxsize=16384)
def is_secret_key(key: str) -> bool:
    """True when a mapping key (or flag, header or variable name) names a secret."""
    normal = normalize_key(key)
    if not normal:
        return False
    segments = [segment for segment in normal.split("_") if segment]
    return _is_penguin_secret(normal, normal.split("_")) or _is_extra_secret(segments)
