"""The price table: TOML parsed with tomllib, validated by pydantic, errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.errors import ConfigError
from pentrace.infrastructure.analytics.prices import DEFAULT_PRICES, load_prices, parse_prices


def test_the_shipped_example_table_parses_and_prices_a_request() -> None:
    table = load_prices(DEFAULT_PRICES)
    price = table.price_for("deepseek-v4-pro")
    assert price is not None
    assert price.cost(1_000_000, 0, 0, 0) == pytest.approx(price.input)
    assert table.price_for("a model nobody listed") == table.default


def test_cache_prices_default_to_the_input_price() -> None:
    table = parse_prices("[models.m]\ninput = 2.0\noutput = 8.0\ncache_read = 0.5\n", "t.toml")
    price = table.price_for("m")
    assert price is not None
    assert price.cost(1_000_000, 1_000_000, 1_000_000, 1_000_000) == pytest.approx(2 + 8 + 0.5 + 2)


def test_without_a_default_an_unknown_model_has_no_price() -> None:
    assert parse_prices("[models.m]\ninput = 1\noutput = 1\n", "t.toml").price_for("x") is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[models.m]\ninput = "cheap"\noutput = 1\n', "models.m.input"),
        ("[models.m]\ninput = -1\noutput = 1\n", "models.m.input"),
        ("[models.m]\ninput = 1\n", "models.m.output"),
        ("[models.m]\ninput = 1\noutput = 1\ncache_red = 1\n", "models.m.cache_red"),
        ("[default]\ninput = 1\noutput = []\n", "default.output"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_file_and_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"price table /etc/p\.toml: key {key}:"):
        parse_prices(text, "/etc/p.toml")


def test_bad_toml_and_a_missing_file_are_config_errors_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"price table x\.toml: expected TOML"):
        parse_prices("[models\n", "x.toml")
    missing = tmp_path / "none.toml"
    with pytest.raises(ConfigError, match=rf"price table {missing}: expected a readable file"):
        load_prices(missing)
