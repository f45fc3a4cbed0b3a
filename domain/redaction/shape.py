"""One credential format: a regex, the literals that gate it, and how to cut the match."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["Shape"]


class Shape(NamedTuple):
    """A rule that finds one kind of secret inside free text.

    The regex runs only on a text holding one of ``gates`` (case-insensitively,
    on the lowercased text, when ``lowered``); a shape without gates runs on
    every text and needs a ``screen`` regex over bytes that matches wherever
    it could.  ``group`` is the part hidden; ``check`` may veto a match.
    """

    kind: str
    regex: re.Pattern[str]
    gates: tuple[str, ...]
    group: int = 0
    lowered: bool = False
    # The match must not continue a word (what a leading ``\\b`` would say).
    boundary: bool = True
    check: Callable[[str], bool] | None = None
    screen: bytes | None = None
