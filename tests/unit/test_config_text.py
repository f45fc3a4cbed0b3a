"""Small configuration files (price table, API token file) read through one helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.errors import ConfigError
from pentrace.infrastructure.analytics.prices import load_prices
from pentrace.infrastructure.storage.inputs import read_config_text
from pentrace.service.settings import read_token


def test_a_config_file_is_read_as_utf8_text(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('currency = "€"\n', encoding="utf-8")
    assert read_config_text(path, "price table", "unused") == 'currency = "€"\n'


def test_a_missing_file_names_what_and_where_with_the_hint(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    with pytest.raises(
        ConfigError,
        match=rf"^API token file {missing}: expected a readable file, found No such file",
    ) as caught:
        read_token(missing, environ={})
    assert caught.value.hint == "check the path and its permissions"
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


def test_bytes_that_are_not_utf8_are_refused_without_quoting_them(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(b"tok-\xff-Zq8vW3mN5pL2xR7sK4jH9dF6")
    with pytest.raises(
        ConfigError, match=r"found bytes that are not UTF-8 \(at byte 4\)"
    ) as caught:
        read_token(token, environ={})
    assert "Zq8vW3" not in str(caught.value)
    prices = tmp_path / "prices.toml"
    prices.write_bytes(b'currency = "\xe9"\n')
    with pytest.raises(ConfigError, match=rf"^price table {prices}: .* not UTF-8") as caught:
        load_prices(prices)
    assert caught.value.hint == "pass --prices FILE or set PENTRACE_PRICES"
