"""The text scanner's two ways of finding secret words judge exactly the same names.

Short texts find the next secret word with one alternation, long ones with one
``str.find`` per word (faster there).  Texts dense in overlapping secret words
(``pwdsn``, ``passession``), long names past the 72-character window, and
separators must give the same spans either way.
"""

from __future__ import annotations

from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from pentrace.domain import secret_patterns
from pentrace.domain.secret_patterns import find_secret_spans

_OVERLAPS = ("pwdsn", "passession", "jwtoken", "credsn", "otpass")
_GLUE = ("_", "-", ".", "=", ":", ": ", ":=", '"', "'", " ", "\n", "?", "&", "x", "A1", "str")
_VALUES = ("hunter2", "Value9", "a" * 40, "https://", "<password>", "</password>", '\\"')
_PIECES = st.sampled_from([*secret_patterns._SECRET_WORDS, *_OVERLAPS, *_GLUE, *_VALUES])
texts = st.lists(_PIECES, max_size=40).map("".join) | st.text(max_size=60)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_the_alternation_and_the_find_loop_find_the_same_spans(text: str) -> None:
    short = find_secret_spans(text)
    with patch.object(secret_patterns, "_ALTERNATION_LENGTH", -1):
        long = find_secret_spans(text)
    assert short == long


def test_the_alternation_tries_shorter_words_first() -> None:
    # Where two words could start at one place, the alternation must take the
    # shorter (as the sorted find hits do); shortest-first order ensures it.
    words = sorted(secret_patterns._SECRET_WORDS, key=len)
    assert secret_patterns._WORD_SEARCH.pattern.split("|") == words
