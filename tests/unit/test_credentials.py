"""Credential masking: every URL and DSN form, and driver messages that echo them."""

from __future__ import annotations

import pytest

from pentrace.infrastructure.ledger.backend.credentials import mask_text, mask_url
from pentrace.infrastructure.ledger.settings import safe_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://app:Hunter2x@db:5432/ledger",
            "postgresql+psycopg://app:***@db:5432/ledger",
        ),
        ("postgresql://app@db/ledger?password=Hunter2x", "postgresql://app@db/ledger?password=***"),
        (
            "postgresql://app@db/l?sslmode=require&sslpassword=Hunter2x&passfile=/h/.pgpass",
            "postgresql://app@db/l?sslmode=require&sslpassword=***&passfile=***",
        ),
        ("postgresql://app:p/w?x#y@db/ledger", "postgresql://app:***@db/ledger"),
        ("https://api.example/x?token=Hunter2x&page=2", "https://api.example/x?token=***&page=2"),
        ("postgresql://db/ledger?api_key=Hunter2x", "postgresql://db/ledger?api_key=***"),
        (
            "host=db port=5432 password='two words' user=app",
            "host=db port=5432 password=*** user=app",
        ),
        ("sqlite:////var/lib/pentrace/ledger.db", "sqlite:////var/lib/pentrace/ledger.db"),
        (
            "postgresql://app@db/ledger?application_name=x",
            "postgresql://app@db/ledger?application_name=x",
        ),
    ],
)
def test_every_credential_form_of_a_url_is_masked(url: str, shown: str) -> None:
    assert mask_url(url) == shown
    assert safe_url(url) == shown  # the name the rest of pentrace imports


def test_a_driver_message_that_echoes_a_masked_urls_secret_loses_it_too() -> None:
    mask_url("postgresql://app:Sup3r%2Fsecret@db/ledger")
    message = "couldn't parse conninfo: Sup3r/secret near 'Sup3r%2Fsecret'"
    assert "Sup3r" not in mask_text(message)


def test_a_dsn_or_url_inside_a_message_is_masked_without_knowing_it_first() -> None:
    message = (
        'invalid dsn: "host=db password=Never-Seen-1 user=x" '
        "from postgresql://u:Never-Seen-2@db/l?sslpassword=Never-Seen-3"
    )
    masked = mask_text(message)
    assert "Never-Seen" not in masked
    assert "host=db" in masked
    assert "postgresql://u:***@db/l" in masked


def test_ordinary_words_in_a_message_stay() -> None:
    text = 'FATAL:  password authentication failed for user "app"'
    assert mask_text(text) == text
