"""The text scanner's shortcuts find exactly the spans of its full loops.

Short texts find the next secret word with one alternation, long ones with one
``str.find`` per word (faster there).  Texts dense in overlapping secret words
(``pwdsn``, ``passession``), long names past the 72-character window, and
separators must give the same spans either way.  Ids (name characters and
``:`` only) skip the name loop when no part around a secret word is a secret
name; with the shortcut switched off the spans must be the same.  An id
ending in a number (``evt:<stream>:00000042``) is judged by its stem once,
whatever the number; the full scan must agree for every number.
"""

from __future__ import annotations

import re
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain.redaction import text as named
from pentrace.domain.redaction import text as secret_patterns
from pentrace.domain.redaction.shapes import GATES, LOWERED_GATES
from pentrace.domain.redaction.text import find_secret_spans

_OVERLAPS = ("pwdsn", "passession", "jwtoken", "credsn", "otpass")
_GLUE = ("_", "-", ".", "=", ":", ": ", ":=", '"', "'", " ", "\n", "?", "&", "x", "A1", "str")
_VALUES = ("hunter2", "Value9", "a" * 40, "https://", "<password>", "</password>", '\\"')
_PIECES = st.sampled_from([*named._SECRET_WORDS, *_OVERLAPS, *_GLUE, *_VALUES])
texts = st.lists(_PIECES, max_size=40).map("".join) | st.text(max_size=60)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_the_alternation_and_the_find_loop_find_the_same_spans(text: str) -> None:
    short = find_secret_spans(text)
    with patch.object(named, "_ALTERNATION_LENGTH", -1):
        long = find_secret_spans(text)
    assert short == long


def test_the_alternation_tries_shorter_words_first() -> None:
    # Where two words could start at one place, the alternation must take the
    # shorter (as the sorted find hits do); shortest-first order ensures it.
    words = sorted(named._SECRET_WORDS, key=len)
    assert named._WORD_SEARCH.pattern.split("|") == [re.escape(w) for w in words]


_NAMES = ("password", "api_key", "OPENAI_API_KEY", "max_tokens", "session-2026-07-18", "evt")
_ID_GLUE = ("message.updated", "call_95", "00000006", "-", "--", ":", "::", "_", ".", "x" * 70)
_ID_ODD = ("y" * 80, "sk-", "AKIA", "hunter2", "[redacted]")
_ID_PIECES = st.sampled_from([*named._SECRET_WORDS, *_NAMES, *_ID_GLUE, *_ID_ODD])
# Parts glued from a few pieces, joined by ``:`` the way ids are.
ids = st.lists(st.lists(_ID_PIECES, min_size=1, max_size=3).map("".join), max_size=5).map(":".join)


@settings(max_examples=400, deadline=None)
@given(ids)
def test_the_id_shortcut_finds_what_the_name_loop_finds(text: str) -> None:
    fast = find_secret_spans(text)
    with patch.object(named, "IDENTIFIER", re.compile(r"(?!)")):
        slow = find_secret_spans(text)
    assert fast == slow


_STEM_PIECES = st.sampled_from(
    [*_NAMES, *_ID_GLUE, *_ID_ODD, *GATES, *LOWERED_GATES, "Authorization", "COOKIE", "token"]
)
stems = st.lists(st.lists(_STEM_PIECES, min_size=1, max_size=3).map("".join), max_size=4).map(
    lambda parts: ":".join([*parts, ""])
)
numbers = st.integers(0, 10**12).map(str) | st.sampled_from(["0", "00000006", "9" * 30])


@settings(max_examples=500, deadline=None)
@given(stems, numbers, numbers)
def test_an_id_ending_in_a_number_is_redacted_as_the_full_scan_redacts_it(
    stem: str, number: str, other: str
) -> None:
    # ``other`` first, so the stem's verdict may already be remembered.
    for text in (stem + other, stem + number):
        assert secret_patterns.redact_secrets_in_text(text) == secret_patterns._replace(text)


def test_no_gate_can_start_in_a_number_or_reach_into_one_across_a_colon() -> None:
    # What ``_clean_with_any_number`` relies on: digits after a ``:`` never
    # complete a gate, so a stem without gates has none with any number.
    for gate in GATES | LOWERED_GATES:
        assert not gate.isdigit()
        assert re.search(r":[0-9]", gate) is None
        assert not gate[:1].isdigit()
