"""The user's redaction rules: the file format, its errors, and one policy for every path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from pentrace.domain.redaction import redact, redact_decoded
from pentrace.domain.redaction.policy import DEFAULT, current, install
from pentrace.domain.redaction.shapes import HYPERSCAN
from pentrace.errors import ConfigError
from pentrace.infrastructure.ledger import LedgerSettings, RuntimeEventLedger
from pentrace.infrastructure.redaction_policy import RULES_ENV, activate_policy, load_policy
from pentrace.infrastructure.search.index import SearchIndex
from pentrace.infrastructure.storage.layout import DataRoot

ACME = "acme" + "_" + "0123456789abcdef0123456789abcdef"
RULES = """
[[rules]]
id = "acme_token"
regex = 'acme_[0-9a-f]{32}'
keywords = ["ACME_"]

[[rules]]
id = "ticket_pin"
regex = 'pin (\\d{6})'
group = 1

[keys]
secret = ["employeePin"]
allow = ["secret_santa"]

[allow]
values = ['AKIAIOSFODNN7EXAMPLE']
"""


@pytest.fixture(autouse=True)
def _default_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(RULES_ENV, raising=False)
    yield
    install(DEFAULT)


def _rules(tmp_path: Path, text: str = RULES) -> Path:
    path = tmp_path / "redaction.toml"
    path.write_text(text, "utf-8")
    return path


def test_custom_regex_rules_hide_their_match_or_their_group(tmp_path: Path) -> None:
    activate_policy(_rules(tmp_path).parent)
    assert redact(f"token {ACME} ok").value == "token [redacted:acme_token] ok"
    assert redact("your pin 123456 expires").value == "your pin [redacted:ticket_pin] expires"


def test_custom_keys_are_secret_in_any_spelling_and_allowed_keys_stay(tmp_path: Path) -> None:
    activate_policy(_rules(tmp_path).parent)
    value = {"EMPLOYEE_PIN": "4711", "employee-pin": "4712", "secret_santa": "Ada"}
    assert redact(value).value == {
        "EMPLOYEE_PIN": "[redacted]",
        "employee-pin": "[redacted]",
        "secret_santa": "Ada",
    }
    assert redact("export EMPLOYEE_PIN=4711").value == "export EMPLOYEE_PIN=[redacted:secret]"


def test_an_allow_listed_value_is_kept_where_a_rule_would_hide_it(tmp_path: Path) -> None:
    example = "AKIA" + "IOSFODNN7EXAMPLE"
    other = "AKIA" + "Z3XK7PQ2RT5LMNOP"
    activate_policy(_rules(tmp_path).parent)
    assert redact(f"docs use {example}; prod uses {other}").value == (
        f"docs use {example}; prod uses [redacted:aws_access_key]"
    )


def test_the_screen_agrees_with_the_walk_under_a_custom_policy(tmp_path: Path) -> None:
    activate_policy(_rules(tmp_path).parent)
    for value in ({"out": f"x {ACME}"}, {"employee_pin": "1"}, {"note": "pin 123456"}):
        data = msgspec.json.encode(value)
        for engine in ("re", "hs") if HYPERSCAN else ("re",):
            assert redact_decoded(value, data, engine=engine) == redact(value)


def test_no_file_means_the_built_in_rules_and_an_empty_variable_means_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _rules(tmp_path)
    monkeypatch.setenv(RULES_ENV, "")
    assert activate_policy(tmp_path) is DEFAULT
    monkeypatch.setenv(RULES_ENV, str(tmp_path / "redaction.toml"))
    assert activate_policy(tmp_path / "other-root").rules[0].id == "acme_token"
    monkeypatch.delenv(RULES_ENV)
    assert activate_policy(tmp_path / "other-root") is DEFAULT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[[rules]]\nid = "broken"\nregex = "acme_[0-9"\n',
            r"rule 'broken' \(rules\[0\] at line 1\) does not",
        ),
        ('[[rules]]\nid = "Bad Id"\nregex = "x"\n', r"rules\.0\.id"),
        ('[[rules]]\nid = "g"\nregex = "x"\ngroup = 2\n', r"rule 'g' .* hides group 2"),
        ('[keys]\nsecrets = ["x"]\n', r"keys\.secrets: Extra inputs"),
        ("[[rules]\n", r"not valid TOML"),
        ('[allow]\nvalues = ["("]\n', r"allow\.values\[0\] does not compile"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_file_and_the_rule(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _rules(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as raised:
        load_policy(path)
    assert str(path) in raised.value.message
    assert raised.value.hint


def test_every_path_that_redacts_for_a_root_installs_that_roots_policy(tmp_path: Path) -> None:
    # One construction point: the ledger, the search index and the recorder
    # (and the CLI, through data_root) call activate_policy with their root.
    _rules(tmp_path)
    ledger = RuntimeEventLedger.open(tmp_path, LedgerSettings())
    ledger.close()
    assert current().source == str(tmp_path / "redaction.toml")
    install(DEFAULT)
    with SearchIndex(DataRoot(tmp_path)):
        assert current().rules[0].id == "acme_token"
    install(DEFAULT)
    from pentrace.infrastructure.eventstore.application import TraceApplication

    TraceApplication(tmp_path, "p", "a")
    assert current().source == str(tmp_path / "redaction.toml")
    assert json.loads(json.dumps(sorted(current().secret_keys))) == ["employee_pin"]


def test_the_rules_file_in_docs_redaction_md_loads(tmp_path: Path) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "redaction.md").read_text("utf-8")
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    policy = load_policy(_rules(tmp_path, example))
    assert [rule.id for rule in policy.rules] == ["acme_token", "ticket_pin"]
    assert policy.secret_keys == frozenset({"employee_pin"})
