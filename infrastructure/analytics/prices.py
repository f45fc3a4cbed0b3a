"""Model prices: the bundled dataset, the user's TOML table over it, and pricing token counts.

Where a price comes from (ADR 0099), in this order:

1. the user's table (``--prices FILE``, ``PENTRACE_PRICES``, else the shipped
   ``prices.toml``), by the model's full name and then by its bare id;
2. the ``genai-prices`` dataset installed with pentrace (pydantic's curated price
   list, read offline), unless the table says ``dataset = false``;
3. the table's ``[default]`` rate: a *fallback*, flagged wherever the cost is shown;
4. nothing: the model is *unpriced*, listed by name and never counted as 0.

A table looks like this (US dollars per million tokens)::

    currency = "USD"
    dataset = true     # false: only this table's own prices

    [models."deepseek-v4-pro"]
    input = 0.27
    output = 1.10
    cache_read = 0.07
    cache_write = 0.27

    [default]          # optional: a fallback rate for models nobody prices
    input = 1.0
    output = 3.0

Parsing is pure (the text comes in, a :class:`PriceTable` comes out);
:func:`load_prices` reads the file.  A bad table raises
:class:`~pentrace.errors.ConfigError` naming the file and the key.
:class:`CostTally` is the one place token counts become a cost with its flags:
``pentrace stats cost``, ``list``, ``show``, ``report``, the web pages and the
HTTP API all add their counts up through it.
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from pentrace.errors import ConfigError
from pentrace.infrastructure.storage.inputs import read_config_text

__all__ = [
    "DEFAULT_PRICES",
    "CostTally",
    "ModelPrice",
    "PriceTable",
    "Priced",
    "dataset_version",
    "load_prices",
    "parse_prices",
]

_PER: Final = 1_000_000.0
Source = Literal["table", "dataset", "default"]


class ModelPrice(BaseModel):
    """Prices of one model per million tokens; cache prices default to the input price."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def cost(self, fresh: int, output: int, cache_read: int, cache_write: int) -> float:
        """The cost of these token counts."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            fresh * self.input + output * self.output + cache_read * read + cache_write * write
        ) / _PER


class Priced(NamedTuple):
    """A model's price and where it came from (``default`` is a fallback, a guess)."""

    price: ModelPrice
    source: Source


class PriceTable(BaseModel):
    """The user's prices per model, an optional fallback, the currency, and whether the
    bundled dataset prices what the table does not name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = "USD"
    dataset: bool = True
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    default: ModelPrice | None = None
    _memo: dict[str, Priced | None] = PrivateAttr(default_factory=dict)

    def resolve(self, model: str) -> Priced | None:
        """``model``'s price (``provider/model_id`` or a bare id) and its source, or None."""
        if model not in self._memo:
            self._memo[model] = self._resolve(model)
        return self._memo[model]

    def _resolve(self, model: str) -> Priced | None:
        names = list(_names(model))
        for name in names:
            own = self.models.get(name)
            if own is not None:
                return Priced(own, "table")
        if self.dataset and self.currency.upper() == "USD":
            found = _dataset_price(model.lower())
            if found is not None:
                return Priced(found, "dataset")
        return None if self.default is None else Priced(self.default, "default")

    def price_for(self, model: str) -> ModelPrice | None:
        """The model's prices from wherever they come, or None (its cost is unknown)."""
        priced = self.resolve(model)
        return None if priced is None else priced.price


def _names(model: str) -> Iterator[str]:
    """``a/b/c``, then ``b/c``, then ``c``: the full name first, the bare id last."""
    yield model
    rest = model
    while "/" in rest:
        rest = rest.split("/", 1)[1]
        if rest:
            yield rest


def _base(value: object) -> float | None:
    """A dataset price as a float: a tiered price's base rate (ADR 0099: aggregates)."""
    base = getattr(value, "base", value)
    return float(base) if isinstance(base, Decimal | int | float) else None


@functools.cache
def _dataset_price(model: str) -> ModelPrice | None:
    """The dataset's price of ``model`` (``provider/id`` tries that provider, then any)."""
    from genai_prices.data_snapshot import get_snapshot  # 0.2 s: only when pricing

    snapshot = get_snapshot()
    tries: list[tuple[str | None, str]] = []
    rest = model
    while "/" in rest:
        named, rest = rest.split("/", 1)
        tries.append((named, rest))
    tries.append((None, rest))
    for provider, ref in tries:
        if not ref:
            continue
        try:
            _, info = snapshot.find_provider_model(ref, None, provider, None)
        except (LookupError, ValueError):  # not listed, or a name the dataset cannot take
            continue
        prices = info.get_prices(datetime.now(UTC))
        fresh, output = _base(prices.input_mtok), _base(prices.output_mtok)
        if fresh is None or output is None:
            continue  # priced per request or per second, not per token
        return ModelPrice(
            input=fresh,
            output=output,
            cache_read=_base(prices.cache_read_mtok),
            cache_write=_base(prices.cache_write_mtok),
        )
    return None


def dataset_version() -> str:
    """The installed genai-prices release (the dataset's version)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("genai-prices")
    except PackageNotFoundError:  # pragma: no cover - it is a dependency
        return "missing"


class CostTally:
    """Token counts per model added up into one cost, with the models priced by a fallback
    and the ones nobody prices named: the one cost every surface shows."""

    def __init__(self, prices: PriceTable) -> None:
        self.prices = prices
        self.cost = 0.0
        self.priced = False
        self.unpriced: list[str] = []
        self.fallback: list[str] = []

    def add(self, model: str, fresh: int, output: int, cache_read: int, cache_write: int) -> None:
        """Price one model's counts (a model without a price is listed, not counted as 0)."""
        if not (fresh or output or cache_read or cache_write):
            return
        priced = self.prices.resolve(model)
        if priced is None:
            if model not in self.unpriced:
                self.unpriced.append(model)
            return
        if priced.source == "default" and model not in self.fallback:
            self.fallback.append(model)
        self.priced = True
        self.cost += priced.price.cost(fresh, output, cache_read, cache_write)

    def amount(self) -> float | None:
        """The cost; None when every model with tokens is unpriced (no figure to show)."""
        return None if self.unpriced and not self.priced else self.cost

    def flags(self) -> dict[str, Any]:
        """``unpriced`` and ``fallback``: the models each list names (sorted)."""
        return {"unpriced": sorted(self.unpriced), "fallback": sorted(self.fallback)}

    def note(self) -> str:
        """The flags as words for a table or a page; empty when the cost is all real prices."""
        parts = []
        if self.unpriced:
            parts.append("unpriced: " + ", ".join(sorted(self.unpriced)))
        if self.fallback:
            parts.append("fallback rate: " + ", ".join(sorted(self.fallback)))
        return "; ".join(parts)


def parse_prices(text: str, source: str) -> PriceTable:
    """Parse and validate a price table; ``source`` names the file in errors."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"price table {source}: expected TOML, found a syntax error ({error})",
            hint="fix the file, or start again from the shipped prices.toml example",
        ) from None
    try:
        return PriceTable.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(
            f"price table {source}: key {key}: {first['msg']} "
            f"({len(error.errors())} problem(s) in all)",
            hint="prices are numbers >= 0 per million tokens: input, output, "
            "cache_read, cache_write",
        ) from None


DEFAULT_PRICES: Final = Path(__file__).with_name("prices.toml")


def load_prices(path: Path | None = None) -> PriceTable:
    """Read a price table file (default: ``PENTRACE_PRICES``, else the shipped example).

    The file is read again when it changed (its size or modification time), else the
    table read last is returned: a listing prices every row with one table."""
    chosen = path or Path(os.environ.get("PENTRACE_PRICES") or DEFAULT_PRICES)
    try:
        stat = chosen.stat()
        key = (str(chosen), stat.st_size, stat.st_mtime_ns)
    except OSError:
        key = None  # read_config_text says what is wrong with it
    if key is not None and key in _LOADED:
        return _LOADED[key]
    text = read_config_text(chosen, "price table", "pass --prices FILE or set PENTRACE_PRICES")
    table = parse_prices(text, str(chosen))
    if key is not None:
        _LOADED.clear()
        _LOADED[key] = table
    return table


_LOADED: dict[tuple[str, int, int], PriceTable] = {}
