"""The user's redaction rules: ``<data root>/redaction.toml``, read, checked, installed.

This is the one place the policy for a data root is constructed.  Every path
that redacts for a root (the CLI, the ledger, the live recorder, the search
index, the event service) calls :func:`activate_policy` with that root, so
they all apply the same rules.  The file is optional; ``PENTRACE_REDACTION_RULES``
names another one (an empty value: none at all).  The format is in
``docs/redaction.md``::

    [[rules]]
    id = "acme_token"                # the marker: [redacted:acme_token]
    regex = 'acme_[a-z0-9]{32}'
    keywords = ["acme_"]             # literals the text must hold (speed)

    [keys]
    secret = ["employee_pin"]        # values under these keys are hidden
    allow = ["secret_santa"]         # never secret, whatever the rules say

    [allow]
    values = ['AKIAIOSFODNN7EXAMPLE'] # regexes: a wholly matching span stays
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pentrace.domain.redaction.keys import normalize_key
from pentrace.domain.redaction.policy import DEFAULT, ENGINES, CustomRule, Policy, install
from pentrace.errors import ConfigError
from pentrace.infrastructure.storage.inputs import read_config_text

__all__ = [
    "POLICY_FILE",
    "RULES_ENV",
    "SCREEN_ENV",
    "activate_policy",
    "load_policy",
    "policy_path",
    "with_engine",
]

POLICY_FILE: Final = "redaction.toml"
RULES_ENV: Final = "PENTRACE_REDACTION_RULES"
# The redaction screen's engine (ADR 0021): chosen here, at the edge, and passed to the
# domain inside the policy (the domain reads no environment).
SCREEN_ENV: Final = "PENTRACE_REDACTION_SCREEN"
_HINT: Final = "the format is in docs/redaction.md (Your own rules)"
_loaded: dict[tuple[str, int, int], Policy] = {}
# The file named explicitly (``--redaction-rules``), for the rest of the process.
_explicit: list[Path | None] = [None]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9_]{1,40}$")
    regex: str = Field(min_length=1)
    keywords: list[str] = []
    group: int = Field(default=0, ge=0)
    description: str = ""


class _Keys(BaseModel):
    model_config = ConfigDict(extra="forbid")
    secret: list[str] = []
    allow: list[str] = []


class _Allow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    values: list[str] = []


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = 1
    rules: list[_Rule] = []
    keys: _Keys = _Keys()
    allow: _Allow = _Allow()


def policy_path(root: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The rules file: ``$PENTRACE_REDACTION_RULES``, else ``<root>/redaction.toml``."""
    env = os.environ if environ is None else environ
    if RULES_ENV in env:
        named = env[RULES_ENV]
        return Path(named).expanduser() if named else None
    return root / POLICY_FILE


def _compile(pattern: str, what: str, path: Path) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ConfigError(
            f"{path}: {what} does not compile: {error}",
            hint="fix the regex (Python syntax) or remove it",
        ) from None


def _rule_lines(text: str) -> list[int]:
    """The line of each ``[[rules]]`` table, in order (1-based)."""
    return [n for n, line in enumerate(text.splitlines(), 1) if line.strip() == "[[rules]]"]


def _at(lines: list[int], index: int) -> str:
    return f" at line {lines[index]}" if index < len(lines) else ""


def _problems(error: ValidationError, lines: list[int]) -> str:
    found = []
    for problem in error.errors():
        loc = problem["loc"]
        index = loc[1] if len(loc) > 1 and loc[0] == "rules" else None
        where = _at(lines, index) if isinstance(index, int) else ""
        found.append(f"{'.'.join(str(part) for part in loc)}{where}: {problem['msg']}")
    return "; ".join(found)


def load_policy(path: Path) -> Policy:
    """The policy a rules file describes; :class:`ConfigError` names the file and the rule."""
    text = read_config_text(path, "redaction rules file", "see docs/redaction.md")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"{path}: not valid TOML: {error}", hint="see docs/redaction.md"
        ) from None
    lines = _rule_lines(text)
    try:
        parsed = _File.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(
            f"{path}: invalid redaction rules: {_problems(error, lines)}", hint=_HINT
        ) from None
    rules = []
    for index, rule in enumerate(parsed.rules):
        what = f"rule {rule.id!r} (rules[{index}]{_at(lines, index)})"
        regex = _compile(rule.regex, what, path)
        if rule.group > regex.groups:
            raise ConfigError(
                f"{path}: {what} hides group {rule.group}, but its regex has {regex.groups}",
                hint="set group to 0 (the whole match) or add the group",
            )
        rules.append(CustomRule(rule.id, regex, tuple(rule.keywords), rule.group))
    allowed = tuple(
        _compile(value, f"allow.values[{index}]", path)
        for index, value in enumerate(parsed.allow.values)
    )
    return Policy(
        rules=tuple(rules),
        secret_keys=frozenset(normalize_key(key) for key in parsed.keys.secret) - {""},
        allowed_keys=frozenset(normalize_key(key) for key in parsed.keys.allow) - {""},
        allowed_values=allowed,
        source=str(path),
    )


def activate_policy(
    root: Path, environ: Mapping[str, str] | None = None, *, rules: Path | None = None
) -> Policy:
    """Install the policy of data root ``root`` for this process and return it.

    ``rules`` (the CLI's ``--redaction-rules``) names the file, which must
    exist, for the rest of the process: the ledger, the search index and the
    recorder opened later call this again without it and get the same rules.
    Otherwise :func:`policy_path` finds the file; none means the built-in
    rules alone.  Read once per file version (path, modification time, size):
    callers may call it on every command.
    """
    if rules is not None:
        _explicit[0] = rules.expanduser()
    path = _explicit[0] if _explicit[0] is not None else policy_path(root, environ)
    policy = DEFAULT
    if path is not None:
        try:
            stat = path.stat()
        except FileNotFoundError:
            if _explicit[0] is not None:
                raise ConfigError(
                    f"{path}: the redaction rules file does not exist",
                    hint="check --redaction-rules (without it: <data root>/redaction.toml)",
                ) from None
            stat = None
        if stat is not None:
            key = (str(path), stat.st_mtime_ns, stat.st_size)
            policy = _loaded.get(key) or _loaded.setdefault(key, load_policy(path))
    policy = with_engine(policy, environ)
    install(policy)
    return policy


def with_engine(policy: Policy, environ: Mapping[str, str] | None = None) -> Policy:
    """``policy`` with the screen engine ``$PENTRACE_REDACTION_SCREEN`` names (``hs``, ``re``
    or ``off``); unset or empty: the policy as it is (Hyperscan where installed)."""
    env = os.environ if environ is None else environ
    name = env.get(SCREEN_ENV, "")
    if not name:
        return policy
    for engine in ENGINES:
        if name == engine:
            return replace(policy, engine=engine)
    raise ConfigError(
        f"{SCREEN_ENV}={name[:40]!r}: expected one of {', '.join(ENGINES)}",
        hint=f"unset {SCREEN_ENV} to screen with Hyperscan where it is installed",
    )
