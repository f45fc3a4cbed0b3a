"""Which database URLs pentrace accepts, and the timeouts it gives a PostgreSQL connection."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger.backend.connections import connect_args, database_url
from pentrace.infrastructure.ledger.settings import DatabaseTimeouts


@pytest.mark.parametrize(
    "url", ["postgresql://a@h/d", "postgres://a@h/d", "postgresql+psycopg://a@h/d"]
)
def test_every_postgresql_spelling_means_psycopg(url: str) -> None:
    assert database_url(url, setting="X").drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    "url", ["mysql://a:Hunter2x@h/d", "foo://h", "postgresql+psycopg2://a@h/d"]
)
def test_other_schemes_are_a_config_error_naming_the_setting_not_the_password(url: str) -> None:
    with pytest.raises(
        ConfigError, match="PENTRACE_LEDGER_URL: unsupported database URL"
    ) as caught:
        database_url(url, setting="PENTRACE_LEDGER_URL")
    assert "Hunter2x" not in str(caught.value)
    assert caught.value.hint is not None
    assert "sqlite" in caught.value.hint


def test_defaults_go_first_so_the_urls_own_settings_win() -> None:
    url = make_url("postgresql+psycopg://a@h/d?options=-c%20statement_timeout%3D99")
    args = connect_args(url, DatabaseTimeouts(connect_seconds=0.5, statement_seconds=30))
    assert args["connect_timeout"] == 2  # psycopg's minimum
    assert args["options"] == (
        "-c statement_timeout=30000 -c lock_timeout=5000 -c statement_timeout=99"
    )


def test_a_connect_timeout_in_the_url_is_kept() -> None:
    url = make_url("postgresql+psycopg://a@h/d?connect_timeout=9")
    assert "connect_timeout" not in connect_args(url, DatabaseTimeouts())


def test_off_leaves_a_timeout_out() -> None:
    timeouts = DatabaseTimeouts(connect_seconds=None, statement_seconds=None, lock_seconds=None)
    assert connect_args(make_url("postgresql+psycopg://a@h/d"), timeouts) == {}
