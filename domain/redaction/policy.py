"""The user's part of the redaction policy, and the one policy a process applies.

Built-in rules are code; an operator adds rules of their own (a regex, key
names, an allow-list) in ``<data root>/redaction.toml``.  The file is read and
validated outside the domain (:mod:`pentrace.infrastructure.redaction_policy`)
into a :class:`Policy`, and :func:`install` makes it the one every redaction
in this process applies: ledger rows, SSE frames, the search index and
redacted exports cannot disagree, because there is only one.

The policy also names the *engine* the screen and the shape gates use
(``hs``: Hyperscan, ``re``: the standard library, ``off``: walk every
record; ADR 0021).  The domain reads no environment: the edge that builds the
policy chooses it (``PENTRACE_REDACTION_SCREEN``, read in
:mod:`pentrace.infrastructure.redaction_policy`) and passes it in here.

Installing a different policy empties every memo of the redaction modules
(they remember verdicts of the policy they were made under), through the
hooks those modules register with :func:`on_install`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

__all__ = [
    "DEFAULT",
    "ENGINES",
    "CustomRule",
    "Engine",
    "Policy",
    "current",
    "install",
    "on_install",
]

Engine = Literal["hs", "re", "off"]
ENGINES: Final[tuple[Engine, ...]] = get_args(Engine)


@dataclass(frozen=True)
class CustomRule:
    """One user regex: the text it matches (or its ``group``) becomes ``[redacted:<id>]``.

    ``keywords`` are literals, compared case-insensitively, one of which the
    text must hold before the regex runs at all (as gitleaks' keywords); a
    rule without keywords runs on every string and turns the screen off.
    """

    id: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    group: int = 0


@dataclass(frozen=True)
class Policy:
    """The user's additions to the built-in rules; the empty policy adds nothing."""

    rules: tuple[CustomRule, ...] = ()
    # Normalised key names (``normalize_key``) whose values are secrets.
    secret_keys: frozenset[str] = frozenset()
    # Normalised key names that are never secrets, whatever the built-in rules say.
    allowed_keys: frozenset[str] = frozenset()
    # A span of text wholly matched by one of these is never hidden.
    allowed_values: tuple[re.Pattern[str], ...] = ()
    # Where the policy came from, for messages (a file path), or None.
    source: str | None = field(default=None, compare=False)
    # The screen's engine (see the module docstring); None: ``hs`` where Hyperscan is
    # installed, else ``off`` (the standard-library screen costs more than it saves).
    engine: Engine | None = None

    def __post_init__(self) -> None:
        if self.engine is not None and self.engine not in ENGINES:
            raise ValueError(f"expected an engine in {', '.join(ENGINES)}, found {self.engine!r}")

    def allows(self, text: str) -> bool:
        """True when ``text`` is allow-listed as a whole."""
        return any(pattern.fullmatch(text) for pattern in self.allowed_values)

    @property
    def screenable(self) -> bool:
        """False when a rule without keywords must run on every string."""
        return all(rule.keywords for rule in self.rules)


DEFAULT: Final = Policy()
_state: list[Policy] = [DEFAULT]
_hooks: list[Callable[[], None]] = []


def current() -> Policy:
    """The policy this process applies."""
    return _state[0]


def on_install(hook: Callable[[], None]) -> None:
    """Call ``hook`` whenever another policy is installed (modules empty their memos)."""
    _hooks.append(hook)


def install(policy: Policy) -> bool:
    """Make ``policy`` the one this process applies; True when it changed anything."""
    if policy == _state[0]:
        return False
    _state[0] = policy
    for hook in _hooks:
        hook()
    return True
