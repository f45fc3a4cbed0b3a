"""Projections by name: the built-ins, or ``package.module:Class`` for your own."""

from __future__ import annotations

import importlib
from typing import Final

from pentrace.errors import UsageError
from pentrace.infrastructure.analytics.api import AnalyticsProjection
from pentrace.infrastructure.analytics.builtin.sessions import SessionActivity
from pentrace.infrastructure.analytics.builtin.tokens import TokenUse
from pentrace.infrastructure.analytics.builtin.tools import ToolCalls

__all__ = ["BUILTINS", "resolve"]

BUILTINS: Final[dict[str, type[AnalyticsProjection]]] = {
    TokenUse.name: TokenUse,
    ToolCalls.name: ToolCalls,
    SessionActivity.name: SessionActivity,
}


def resolve(name: str) -> type[AnalyticsProjection]:
    """A built-in projection by name, or a class named ``package.module:Class``."""
    if name in BUILTINS:
        return BUILTINS[name]
    module_name, sep, attr = name.partition(":")
    if sep:
        try:
            found = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as error:
            raise UsageError(
                f"projection {name!r}: expected an importable module:Class, found {error}",
                hint="check the module is on PYTHONPATH and the class name",
            ) from None
        if isinstance(found, type) and issubclass(found, AnalyticsProjection):
            return found
    raise UsageError(
        f"projection: expected one of {', '.join(BUILTINS)} or module:Class, found {name!r}",
        hint="`pentrace projections status` lists the built-ins",
    )
