"""Axis and bar labels in human units: never an offset, never a small cost shown as 0.00."""

from __future__ import annotations

import pytest

from pentrace.infrastructure.analytics.plots import human


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0, "", "0"),
        (950, "", "950"),
        (12_000, "", "12k"),
        (12_345, "", "12.3k"),
        (3_400_000, "", "3.4M"),
        (208_170_000, "", "208.2M"),
        (1_200_000_000, "", "1.2G"),
        (0.0023, "USD", "0.0023 USD"),
        (0.0005, "USD", "0.0005 USD"),
        (257.63, "USD", "257.63 USD"),
        (2.5, "", "2.5"),
    ],
)
def test_human(value: float, unit: str, text: str) -> None:
    assert human(value, unit) == text
