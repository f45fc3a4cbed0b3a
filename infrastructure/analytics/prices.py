"""The user-editable price table: parse TOML text, validate it, price token counts.

A table looks like this (prices in US dollars per million tokens)::

    currency = "USD"

    [models."deepseek-v4-pro"]
    input = 0.27
    output = 1.10
    cache_read = 0.07
    cache_write = 0.27

    [default]          # optional: models the table does not name
    input = 1.0
    output = 3.0

Parsing is pure (the text comes in, a :class:`PriceTable` comes out);
:func:`load_prices` reads the file.
A bad table raises :class:`~pentrace.errors.ConfigError` naming the file and
the key.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pentrace.errors import ConfigError
from pentrace.infrastructure.storage.inputs import read_config_text

__all__ = ["DEFAULT_PRICES", "ModelPrice", "PriceTable", "load_prices", "parse_prices"]

_PER: Final = 1_000_000.0


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


class PriceTable(BaseModel):
    """Prices per model, an optional default, and the currency they are in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = "USD"
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    default: ModelPrice | None = None

    def price_for(self, model: str) -> ModelPrice | None:
        """The model's prices, else the default, else None (its cost is unknown)."""
        return self.models.get(model, self.default)


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
    """Read a price table file (default: ``PENTRACE_PRICES``, else the shipped example)."""
    chosen = path or Path(os.environ.get("PENTRACE_PRICES") or DEFAULT_PRICES)
    text = read_config_text(chosen, "price table", "pass --prices FILE or set PENTRACE_PRICES")
    return parse_prices(text, str(chosen))
