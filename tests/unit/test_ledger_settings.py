"""Ledger settings from the environment: Penguin's names, one meaning for 0/off."""

from __future__ import annotations

from pathlib import Path

import pytest

from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger.settings import (
    DatabaseTimeouts,
    LedgerSettings,
    default_ledger_path,
    safe_url,
)

PREFIX = "PENGUIN_RUNTIME_EVENT_LEDGER_"


def test_defaults_match_penguin() -> None:
    settings = LedgerSettings.from_env({})
    assert settings.path is None
    assert settings.url is None
    assert settings.max_events == 100_000
    assert settings.max_age_days == 14.0
    assert settings.max_bytes == 268_435_456
    assert settings.cleanup_interval_seconds == 60.0
    assert settings.table_prefix == ""


def test_every_setting_is_read_from_its_variable() -> None:
    settings = LedgerSettings.from_env(
        {
            f"{PREFIX}PATH": "/var/lib/pentrace/events.db",
            f"{PREFIX}MAX_EVENTS": "500",
            f"{PREFIX}MAX_AGE_DAYS": "0.5",
            f"{PREFIX}MAX_BYTES": "1048576",
            f"{PREFIX}CLEANUP_INTERVAL_SECONDS": "5",
            "PENTRACE_LEDGER_URL": "postgresql+psycopg://app@db/ledger",
            "PENTRACE_LEDGER_TABLE_PREFIX": "harness_",
        }
    )
    assert settings.table_prefix == "harness_"
    assert settings.path == Path("/var/lib/pentrace/events.db")
    assert (settings.max_events, settings.max_age_days, settings.max_bytes) == (500, 0.5, 1048576)
    assert settings.cleanup_interval_seconds == 5.0
    assert settings.url == "postgresql+psycopg://app@db/ledger"


@pytest.mark.parametrize("off", ["0", "off", "OFF", " none "])
def test_zero_or_off_disables_every_limit_alike(off: str) -> None:
    names = ["MAX_EVENTS", "MAX_AGE_DAYS", "MAX_BYTES", "CLEANUP_INTERVAL_SECONDS"]
    settings = LedgerSettings.from_env({f"{PREFIX}{name}": off for name in names})
    assert settings.max_events is None
    assert settings.max_age_days is None
    assert settings.max_bytes is None
    assert settings.cleanup_interval_seconds is None


@pytest.mark.parametrize(("value", "problem"), [("lots", "found 'lots'"), ("-3", "found '-3'")])
def test_a_bad_number_names_the_variable_and_the_problem(value: str, problem: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"{PREFIX}MAX_EVENTS: expected a non-negative int.*{problem}"
    ):
        LedgerSettings.from_env({f"{PREFIX}MAX_EVENTS": value})


def test_a_url_without_a_scheme_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError, match="PENGUIN_RUNTIME_EVENT_LEDGER_URL") as caught:
        LedgerSettings.from_env({"PENGUIN_RUNTIME_EVENT_LEDGER_URL": "user:s3cret@dbhost/ledger"})
    assert "s3cret" not in str(caught.value)


def test_a_urls_password_is_hidden_in_messages() -> None:
    assert (
        safe_url("postgresql+psycopg://app:s3cret@db:5432/x")
        == "postgresql+psycopg://app:***@db:5432/x"
    )
    assert safe_url("postgresql://app@db/x") == "postgresql://app@db/x"
    assert safe_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


def test_the_default_file_lives_under_the_data_root() -> None:
    assert default_ledger_path(Path("/data")) == Path("/data/runtime_events/runtime_events.db")


@pytest.mark.parametrize(
    "settings",
    [
        LedgerSettings(),
        LedgerSettings(path=Path("/srv/ledger/events.db"), max_events=5, max_age_days=0.5),
        LedgerSettings(url="postgresql+psycopg://app@db/ledger").with_limits_off(),
        LedgerSettings(max_bytes=1, cleanup_interval_seconds=2.25),
        LedgerSettings(table_prefix="t1_").with_lock_wait(0.25),
    ],
)
def test_settings_written_as_variables_read_back_the_same(settings: LedgerSettings) -> None:
    # Every variable is written, so what the process environment holds cannot leak in.
    noisy = {
        "PENTRACE_LEDGER_URL": "postgresql+psycopg://other@host/db",
        "PENGUIN_RUNTIME_EVENT_LEDGER_URL": "postgresql+psycopg://alias@host/db",
        "PENGUIN_RUNTIME_EVENT_LEDGER_PATH": "/elsewhere.db",
        "PENGUIN_RUNTIME_EVENT_LEDGER_MAX_EVENTS": "7",
        "PENTRACE_LEDGER_TABLE_PREFIX": "noise_",
    }
    assert LedgerSettings.from_env({**noisy, **settings.to_env()}) == settings


def test_database_timeouts_have_defaults_and_are_read_from_their_variables() -> None:
    assert LedgerSettings.from_env({}).timeouts == DatabaseTimeouts(
        connect_seconds=5.0, statement_seconds=30.0, lock_seconds=5.0
    )
    timeouts = DatabaseTimeouts.from_env(
        {
            "PENTRACE_DB_CONNECT_TIMEOUT": "2",
            "PENTRACE_DB_STATEMENT_TIMEOUT": "off",
            "PENTRACE_DB_LOCK_TIMEOUT": "0.5",
        }
    )
    assert timeouts == DatabaseTimeouts(connect_seconds=2, statement_seconds=None, lock_seconds=0.5)
    settings = LedgerSettings(timeouts=timeouts)
    assert LedgerSettings.from_env(settings.to_env()).timeouts == timeouts


def test_a_bad_timeout_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="PENTRACE_DB_STATEMENT_TIMEOUT: expected a non-negative"):
        DatabaseTimeouts.from_env({"PENTRACE_DB_STATEMENT_TIMEOUT": "soon"})


def test_the_url_never_appears_in_the_settings_repr() -> None:
    settings = LedgerSettings(url="postgresql://app@db/ledger?password=Hunter2x")
    assert "Hunter2x" not in repr(settings)
    assert "Hunter2x" not in str(settings)


def test_the_services_earlier_prefix_field_becomes_the_ledger_settings_prefix(
    tmp_path: Path,
) -> None:
    from pentrace.service.settings import ServiceSettings

    given = LedgerSettings(url="postgresql+psycopg://app@db/ledger")
    settings = ServiceSettings.model_validate(
        {"data_root": tmp_path, "ledger": given, "ledger_table_prefix": "old_"}
    )
    assert settings.ledger == given.model_copy(update={"table_prefix": "old_"})
    assert settings.analytics_env()["PENTRACE_LEDGER_TABLE_PREFIX"] == "old_"
