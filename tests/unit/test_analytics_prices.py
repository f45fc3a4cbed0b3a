"""The price table: TOML parsed with tomllib, validated by pydantic, errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.errors import ConfigError
from pentrace.infrastructure.analytics.prices import (
    DEFAULT_PRICES,
    CostTally,
    load_prices,
    parse_prices,
)


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


# Model ids as the four agents write them, each with the dataset provider that prices it.
AGENT_IDS = [
    ("anthropic/claude-sonnet-4-6", "anthropic", "claude-sonnet-4-6"),
    ("claude-opus-4-5-20251101", "anthropic", "claude-opus-4-5-20251101"),
    ("gpt-5-codex", "openai", "gpt-5-codex"),
    ("openai/gpt-5.1-codex", "openai", "gpt-5.1-codex"),
    ("gemini-2.5-pro", "google", "gemini-2.5-pro"),
    ("google/gemini-2.5-flash", "google", "gemini-2.5-flash"),
    ("deepseek-chat", "deepseek", "deepseek-chat"),
    ("opencode/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
]


@pytest.mark.parametrize(("model", "provider", "ref"), AGENT_IDS)
def test_provider_qualified_and_bare_ids_are_priced_by_the_dataset_as_genai_prices_prices_them(
    model: str, provider: str, ref: str
) -> None:
    """Each kind at its own rate: the cost of a request below any tier equals what the
    genai-prices package itself computes (its input count includes the cache counts)."""
    from genai_prices import Usage, calc_price

    priced = parse_prices('currency = "USD"\n', "t.toml").resolve(model)
    assert priced is not None
    assert priced.source == "dataset"
    fresh, output, read = 40_000, 3_000, 90_000
    write = 20_000 if provider == "anthropic" else 0  # OpenAI and Google list no write price
    theirs = calc_price(
        Usage(input_tokens=fresh + read + write, output_tokens=output,
              cache_read_tokens=read, cache_write_tokens=write),
        model_ref=ref, provider_id=provider,
    )  # fmt: skip
    assert priced.price.cost(fresh, output, read, write) == pytest.approx(float(theirs.total_price))


def test_the_users_table_overrides_the_dataset_by_full_name_or_bare_id() -> None:
    table = parse_prices('[models."claude-sonnet-4-6"]\ninput = 1\noutput = 2\n', "t.toml")
    for name in ("claude-sonnet-4-6", "anthropic/claude-sonnet-4-6"):
        priced = table.resolve(name)
        assert priced is not None
        assert (priced.source, priced.price.input, priced.price.output) == ("table", 1, 2)


def test_the_dataset_can_be_turned_off_and_is_never_used_for_another_currency() -> None:
    for text in ("dataset = false\n", 'currency = "EUR"\n'):
        assert parse_prices(text, "t.toml").resolve("claude-sonnet-4-6") is None


def test_a_tally_flags_fallback_and_unpriced_models_and_never_shows_0_for_no_price() -> None:
    guessing = parse_prices("[default]\ninput = 1\noutput = 1\n", "t.toml")
    tally = CostTally(guessing)
    tally.add("acme-llm-1", 1_000_000, 0, 0, 0)
    tally.add("claude-sonnet-4-6", 0, 1_000_000, 0, 0)
    assert tally.flags() == {"unpriced": [], "fallback": ["acme-llm-1"]}
    sonnet = guessing.price_for("claude-sonnet-4-6")
    assert sonnet is not None
    assert tally.amount() == pytest.approx(1 + sonnet.output)
    strict = CostTally(parse_prices("", "t.toml"))
    strict.add("acme-llm-1", 1_000_000, 0, 0, 0)
    strict.add("no-tokens-model", 0, 0, 0, 0)  # nothing used, nothing to price
    assert strict.flags() == {"unpriced": ["acme-llm-1"], "fallback": []}
    assert strict.amount() is None
    assert "unpriced: acme-llm-1" in strict.note()
