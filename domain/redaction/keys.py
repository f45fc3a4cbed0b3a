"""Which mapping keys name a secret: Penguin's four rules plus the names it misses.

A key is first normalised the way Penguin does it (``apiKey`` -> ``api_key``,
``X-Api-Key`` -> ``x_api_key``, ``APIKey`` -> ``apikey``), then judged on its
``_`` segments and on its *compact* form (the segments glued together), so that
``PGPASSWORD``, ``XApiKey`` and ``password2`` are caught as well as
``db_password``.  Token *telemetry* (``tokens``, ``input_tokens``,
``token_usage``, ``max_tokens``, ``context_window``) is never a secret, nor
are words that merely contain a secret word (``secretary``) or name a property
of a credential (``credential_id``).  The policy's own key names
(:mod:`pentrace.domain.redaction.policy`) come first, allowed before secret.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise
from typing import Final

from pentrace.domain.redaction.policy import current, on_install

__all__ = ["is_secret_key", "is_secret_name_alone", "normalize_key"]

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
    "accountkey",
    "storagekey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "clientkey",
    "licensekey",
)
# Whole normalised names that are credentials though none of the rules says so.
# A bare ``auth`` is not one: it often holds a dict of settings (Penguin's own
# paths name ``auth.password``); a ``Basic`` value under it is a value rule.
_SECRET_NAMES: Final = frozenset(
    {"basic_auth", "http_auth", "proxy_auth", "auth_header", "auth_value", "auth_string"}
)
# Words that hold a secret word by chance; blanked before the substring rules look.
_BENIGN_WORDS: Final = re.compile(r"secretar(?:y|ies|iat)|secretion|credentials?_?(?:id|type)")
# Glued lower-case names (``accesstoken``, ``authkey``): a credential word
# before a closing ``token`` or ``key`` makes the segment a secret.
_GLUED: Final = re.compile(
    r"(?:access|auth|api|refresh|id|bearer|session|oauth|secret|client|bot|personal|deploy"
    r"|github|gitlab|slack|npm|pypi|hf|csrf|xsrf|service|app)(?:token|key)s?\d*"
)
# ``<credential word>_<suffix>`` names a property of a credential, not the
# credential (``credential_id``, ``cookie_consent``, ``jwt_alg``): the extra
# rules yield to it for the soft words alone, Penguin's rules never do.
_SOFT_WORDS: Final = frozenset({"credential", "cookie", "jwt", "bearer"})
_BENIGN_SUFFIXES: Final = frozenset(
    {"id", "ids", "name", "names", "type", "types", "kind", "count", "len", "length"}
    | {"alg", "algorithm", "format", "consent", "policy", "expiry", "expires", "expiration"}
    | {"ttl", "version", "scope", "scopes", "status", "source", "provider", "store", "helper"}
    | {"enabled", "disabled", "required", "domain", "size", "banner", "settings"}
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


def _is_extra_secret(normal: str, segments: list[str]) -> bool:
    if normal in _SECRET_NAMES:
        return True
    stems = [_TRAILING_DIGITS.sub("", segment) for segment in segments]
    compact = _BENIGN_WORDS.sub("-", "".join(segments))
    words = [word for word in _SECRET_WORDS if word in compact]
    if len(stems) > 1 and stems[-1] in _BENIGN_SUFFIXES and set(words) <= _SOFT_WORDS:
        return False
    if words:
        return True
    if any(_GLUED.fullmatch(segment) for segment in segments):
        return True
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
    policy = current()
    if normal in policy.allowed_keys:
        return False
    if normal in policy.secret_keys:
        return True
    segments = [segment for segment in normal.split("_") if segment]
    return _is_penguin_secret(normal, normal.split("_")) or _is_extra_secret(normal, segments)


on_install(is_secret_key.cache_clear)


# Words a secret's *name* is made of, and no other: what follows a secret name in a pair
# (``["password", "api_key"]``) is another name only when it is made of these alone.
_NAME_WORDS: Final = (
    _SECRET_SEGMENTS
    | _KEY_SEGMENTS
    | _KEY_QUALIFIERS
    | _TOKEN_PREFIXES
    | _SECRET_EXACT_SEGMENTS
    | _CREDENTIAL_TOKEN_OWNERS
    | _PASS_OWNERS
    | frozenset(_SECRET_WORDS)
    | frozenset(segment for name in _EXACT | _SECRET_NAMES for segment in name.split("_"))
    | {"token", "tokens", "pass", "client", "x", "openai", "anthropic", "aws", "gcp", "azure"}
)


@lru_cache(maxsize=4096)
def is_secret_name_alone(name: str) -> bool:
    """True when ``name`` names a secret and is made of name words alone (``OPENAI_API_KEY``,
    ``db_password``), so that it reads as a name, never as a value: ``sk-argv-secret-789``
    and ``supersecret`` name a secret by the key rules, but are values after a secret name."""
    if not is_secret_key(name):
        return False
    normal = normalize_key(name)
    if normal in current().secret_keys:
        return True
    return all(segment in _NAME_WORDS for segment in normal.split("_") if segment)


on_install(is_secret_name_alone.cache_clear)
