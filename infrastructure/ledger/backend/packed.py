"""Positional rows grouped by which of their columns are NULL (ADR 0066).

A bulk sync's rows of row form 2 leave five to seven of their seventeen
columns NULL, and binding a parameter costs the driver about as much per
value as SQLite's own work on it.  :func:`pack` groups a run of rows by the
set of columns they hold, and keeps per group one flat list: for each row,
its offset in the run, then the values it holds.  The backend then inserts
each group with multi-row ``INSERT ... VALUES`` statements that name only
those columns and give each row the notification id ``base + offset``
(:meth:`.sqlite.SQLiteDialect.packed_insert`), so the ids follow the rows'
order whatever the grouping.  The packing runs in the sync's worker
processes, where it is spread over the cores, and the flat lists cross the
pipe with fewer objects than the tuples would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

__all__ = ["PackedGroup", "PackedRows", "pack", "unpack"]


@dataclass(frozen=True, slots=True)
class PackedGroup:
    """The rows of one run that hold exactly the columns ``present`` (their positions in
    the row, ascending): ``values`` is, per row, its offset in the run then those values."""

    present: tuple[int, ...]
    values: list[Any]

    @property
    def rows(self) -> int:
        """How many rows the group holds."""
        return len(self.values) // (len(self.present) + 1)


@dataclass(frozen=True, slots=True)
class PackedRows:
    """A run of ``count`` consecutive rows, grouped (see the module docstring)."""

    count: int
    groups: tuple[PackedGroup, ...]


_is_none: Callable[[object], object] = None.__eq__  # True for None, NotImplemented otherwise


def pack(rows: Sequence[tuple[Any, ...]]) -> PackedRows:
    """``rows`` (tuples of one width) grouped by the columns they hold, order kept by offset."""
    groups: dict[tuple[object, ...], tuple[Callable[[tuple[Any, ...]], Any], list[Any]]] = {}
    for offset, row in enumerate(rows):
        shape = tuple(map(_is_none, row))
        found = groups.get(shape)
        if found is None:
            present = tuple(i for i, null in enumerate(shape) if null is not True)
            found = groups[shape] = (_getter(present), [])
        take, values = found
        values.append(offset)
        values.extend(take(row))
    packed = tuple(
        PackedGroup(tuple(i for i, null in enumerate(shape) if null is not True), values)
        for shape, (_, values) in groups.items()
    )
    return PackedRows(len(rows), packed)


def unpack(packed: PackedRows, width: int) -> list[tuple[Any, ...]]:
    """The rows :func:`pack` was given (each ``width`` columns wide), in their order."""
    rows: list[tuple[Any, ...] | None] = [None] * packed.count
    for group in packed.groups:
        step = len(group.present) + 1
        values = group.values
        for start in range(0, len(values), step):
            row: list[Any] = [None] * width
            for column, value in zip(group.present, values[start + 1 : start + step], strict=True):
                row[column] = value
            rows[values[start]] = tuple(row)
    assert all(row is not None for row in rows), "a packed run misses rows"
    return [row for row in rows if row is not None]


def _getter(present: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """The values at ``present`` of a row, as a tuple (itemgetter of one index gives a scalar)."""
    if len(present) == 1:
        index = present[0]
        return lambda row: (row[index],)
    return itemgetter(*present)
