"""Which gate literals a text holds: the first step of every shape scan.

Each shape runs only on a text holding one of its gates (``shapes``).  With
some 140 gates, asking ``gate in text`` for each one was most of the cost of
redacting a string, so the gates are looked for together: by one Hyperscan
pass over the text's UTF-8 bytes where Hyperscan is installed (ADR 0021), else
one ``in`` per distinct gate.  Both give the same set: an ASCII gate occurs in
the UTF-8 bytes exactly where it occurs in the text, and a text whose
lowercasing could make ASCII out of other letters (KELVIN SIGN, ``İ``) takes
the ``in`` path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

try:  # pragma: no cover - which branch runs depends on the installed extras
    import hyperscan as hs
except ImportError:  # pragma: no cover
    hs = None  # type: ignore[assignment]  # the optional extra is absent

__all__ = ["GateIndex", "hs"]

_ODD_LOWER: Final = ("\u212a", "\u0130")


class GateIndex:
    """The rows (shape indices) whose gates occur in a text, from one pass."""

    def __init__(
        self,
        exact: Iterable[tuple[str, int]],
        lowered: Iterable[tuple[str, int]],
        regexes: Iterable[tuple[bytes, int]] = (),
        *,
        fast: bool,
    ) -> None:
        self._exact: dict[str, list[int]] = {}
        self._lowered: dict[str, list[int]] = {}
        # Shapes without a literal gate, by the regex (over bytes) that finds
        # wherever they could match: Hyperscan runs it, ``in`` cannot (always).
        self._regexes: dict[bytes, list[int]] = {}
        for table, pairs in ((self._exact, exact), (self._lowered, lowered)):
            for gate, row in pairs:
                table.setdefault(gate, []).append(row)
        for pattern, row in regexes:
            self._regexes.setdefault(pattern, []).append(row)
        self._always = {row for rows in self._regexes.values() for row in rows}
        self._database: Any = None
        if fast and hs is not None and (self._exact or self._lowered or self._regexes):
            self._rows = [*self._exact.values(), *self._lowered.values(), *self._regexes.values()]
            patterns = [_escape(gate) for gate in [*self._exact, *self._lowered]]
            patterns += list(self._regexes)
            flags = [hs.HS_FLAG_SINGLEMATCH] * len(self._exact)
            flags += [hs.HS_FLAG_SINGLEMATCH | hs.HS_FLAG_CASELESS] * len(self._lowered)
            flags += [hs.HS_FLAG_SINGLEMATCH] * len(self._regexes)
            self._database = hs.Database()
            self._database.compile(
                expressions=patterns, ids=list(range(len(patterns))), flags=flags
            )
            self._scratch = hs.Scratch(self._database)

    def rows(self, text: str, lowered: str) -> set[int]:
        """Rows with a gate in ``text`` (exact gates) or ``lowered`` (lowered gates)."""
        if self._database is not None and not any(odd in text for odd in _ODD_LOWER):
            found: set[int] = set()
            rows = self._rows

            def on_match(index: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
                found.update(rows[index])

            data = text.encode("utf-8", "surrogatepass")
            self._database.scan(data, match_event_handler=on_match, scratch=self._scratch)
            return found
        present = set(self._always)
        for gate, indices in self._exact.items():
            if gate in text:
                present.update(indices)
        for gate, indices in self._lowered.items():
            if gate in lowered:
                present.update(indices)
        return present


def _escape(gate: str) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in gate.encode("ascii"))
