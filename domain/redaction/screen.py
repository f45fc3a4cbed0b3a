"""One pass over a record's JSON bytes that says when no redaction rule can apply.

Every rule has a literal it cannot fire without: a shape its gates, a key,
name or flag rule a secret word (``screen_words``: the text rules' words but
``session``, which no secret name needs alone), a user rule its keywords.
The screen looks for all of them at once over the bytes of the record as
written (Hyperscan; without it, redaction walks every record: ADR 0021).  A
record in which none occurs is left as it is.  Which engine runs is the
installed policy's (:class:`~pentrace.domain.redaction.policy.Policy`
``engine``), chosen at the edge; nothing here reads the environment.

A hit is not yet a secret: ``max_tokens`` and ``token_usage`` hold secret
words.  For each hit the screen takes the JSON string around it (JSON has
letters only inside strings, and no unescaped quote inside one), decodes it
and asks the policy itself whether it would change that string as a key, a
value or a name; verdicts on short strings are remembered.  Only a hit in a
string the policy would change, or one longer than ``_LONGEST``, sends the
record to the full walk.

Never less recall: what the bytes do not show, the screen does not trust.
``\\u`` and ``\\/`` escapes, the two non-ASCII letters whose lowercase is
ASCII (``K`` KELVIN SIGN, ``İ``), deep nesting and user rules without
keywords all send the record to the walk.

This is a fast path beside a reference: the full walk
(:func:`~pentrace.domain.redaction.walk.redact_reference`).  Property tests
over generated records hold screened and unscreened redaction to the same
output: ``tests/property/test_redaction_screen.py`` (both engines, hostile
strings) and ``tests/property/test_redaction_planted.py`` (credentials planted
in every position and encoding).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Final

import msgspec

from pentrace.domain.redaction import shapes as _shapes
from pentrace.domain.redaction import text as _text
from pentrace.domain.redaction.keys import is_secret_key
from pentrace.domain.redaction.policy import ENGINES, Engine, current, install, on_install
from pentrace.domain.redaction.shapes import HYPERSCAN, engine_of
from pentrace.domain.redaction.shapes import hs as _hs
from pentrace.domain.redaction.walk import MAX_DEPTH, MAX_NAME_LENGTH, SCALAR_SECRET_KEYS

__all__ = [
    "ENGINES",
    "HYPERSCAN",
    "engine",
    "may_change",
    "screen_patterns",
    "screen_words",
    "use_engine",
]

_ALWAYS_WALK: Final = (b"\\u", b"\\/", b"\xe2\x84\xaa", b"\xc4\xb0")
_NESTING: Final = MAX_DEPTH // 2
# Matches where a record holds ``_NESTING`` brackets (``{`` or ``[``, in strings too):
# what ``data.count(b"{") + data.count(b"[") >= _NESTING`` says, in Hyperscan's pass.
_NESTED: Final = rb"(?:[^{\[]*[{\[]){%d}" % _NESTING
# Strings judged alone at most (longer ones: the record is walked), and
# cached when at most ``_CACHED`` bytes long (ids and names repeat, text not).
_LONGEST: Final = 65_536
_CACHED: Final = 512
_string_decoder: Final = msgspec.json.Decoder(str)
# ``walk._NAME_SHAPE`` over bytes: a JSON string body of this shape has no
# escape, so it reads the same decoded.
_NAME: Final = re.compile(rb"-{0,2}[A-Za-z_][A-Za-z0-9_.-]*")
_MAX_VERDICTS: Final = 16384
# The verdicts of :func:`_benign` on short strings, as a value and as a mapping key.
_verdicts: dict[bytes, bool] = {}
_key_verdicts: dict[bytes, bool] = {}


# Secret words no secret name holds alone: every key rule that reads
# ``session`` also needs ``token`` or ``key`` (``session_token``, ``sessionKey``),
# and ``session`` is in most texts.  A property test holds this.
_REDUNDANT_WORDS: Final = frozenset({"session"})


def screen_words() -> tuple[str, ...]:
    """The words the screen looks for: the policy's secret words, less the redundant."""
    policy_words = {max(name.split("_"), key=len) for name in current().secret_keys}
    return tuple(
        word
        for word in _text.secret_words()
        if word not in _REDUNDANT_WORDS or word in policy_words
    )


# Names the key rules judge on their glued form (``db_url`` -> ``dburl``) may
# join the two halves with any run of other characters as a mapping key
# (``db/url``, ``conn str``); these find them in any spelling.
_GLUED_WORDS: Final = (rb"db[^A-Za-z0-9]*ur", rb"conn[^A-Za-z0-9]*str")


def screen_patterns() -> tuple[list[bytes], list[bytes], list[bytes]]:
    """``(exact literals, caseless literals, regexes)`` the current policy needs looked for."""
    exact = sorted({gate.encode() for gate in _shapes.GATES} | set(_ALWAYS_WALK))
    caseless = {gate.encode() for gate in _shapes.LOWERED_GATES}
    caseless |= {word.encode() for word in screen_words()}
    caseless |= {k.lower().encode() for rule in current().rules for k in rule.keywords}
    regexes = [shape.screen for shape in _shapes.shapes() if not shape.gates and shape.screen]
    return exact, sorted(caseless), regexes


def _benign(content: bytes, is_key: bool) -> bool:
    """True when the policy changes this JSON string (its body, quotes off) in no role.

    The text rules read every string.  The key rules read keys, of any
    length; the list and name/value rules read a value as a name only when
    it is name-shaped and short (``walk._names_a_secret``).  Other values
    need no key verdict: unique ids such as ``evt:session:<id>:<n>`` cost a
    cached text verdict per id stem and nothing more.  The verdict is a
    function of the bytes and the role alone (and the policy, whose change
    empties the caches): short strings keep theirs, one cache per role.
    """
    verdicts = _key_verdicts if is_key else _verdicts
    clean = verdicts.get(content)
    if clean is None:
        clean = _judged(content, is_key)
        if len(content) <= _CACHED:
            if len(verdicts) >= _MAX_VERDICTS:
                verdicts.clear()
            verdicts[content] = clean
    return clean


def _judged(content: bytes, is_key: bool) -> bool:
    text = _decoded(content)
    if not _text_is_clean(text):
        return False
    if is_key or (len(content) <= MAX_NAME_LENGTH and _NAME.fullmatch(content)):
        return not is_secret_key(text) and not (is_key and text in SCALAR_SECRET_KEYS)
    return True


def _decoded(content: bytes) -> str:
    try:
        return _string_decoder.decode(b'"' + content + b'"')
    except msgspec.DecodeError:
        return ""


def _text_is_clean(text: str) -> bool:
    # JSON-looking text is walked as a structure: not judged here.
    return (
        bool(text)
        and text[0] not in "[{"
        and not text[0].isspace()
        and _text.redact_secrets_in_text(text) == text
    )


def _quote(data: bytes, at: int, step: int) -> int:
    """The nearest unescaped ``"`` from ``at`` going left (-1) or right (+1), or -1."""
    while True:
        at = data.rfind(b'"', 0, at) if step < 0 else data.find(b'"', at)
        if at <= 0:
            return at
        slashes = 0
        while data[at - 1 - slashes] == 0x5C:
            slashes += 1
        if slashes % 2 == 0:
            return at
        if step > 0:
            at += 1


def _hit_is_benign(data: bytes, start: int, end: int, last: list[int]) -> bool:
    # JSON has letters only inside strings, and no unescaped quote inside
    # one: the string around a hit runs between the nearest unescaped quotes.
    # ``last`` is the span of the string judged benign last in this record
    # (a long text holds many hits; it is judged once).
    if last[0] < start and end <= last[1]:
        return True
    opening = _quote(data, start, -1)
    closing = _quote(data, end, 1)
    if opening < 0 or closing < 0 or closing - opening > _LONGEST:
        return False
    after = data[closing + 1 : closing + 2]
    is_key = after == b":" or (after.isspace() and data[closing + 1 :].lstrip()[:1] == b":")
    if not _benign(data[opening + 1 : closing], is_key):
        return False
    last[0], last[1] = opening, closing
    return True


class _Matcher:
    """The compiled patterns of one policy, by engine."""

    def __init__(self, engine_name: str) -> None:
        exact, caseless, regexes = screen_patterns()
        self.engine = engine_name
        self.regex_count = len(regexes)
        self.off = engine_name == "off" or not current().screenable
        if engine_name == "hs" and _hs is not None:
            self._database = _hs.Database()
            patterns = [re.escape(p) for p in exact] + [re.escape(p) for p in caseless]
            patterns += [*_GLUED_WORDS, *regexes]
            flags = [_hs.HS_FLAG_SOM_LEFTMOST] * len(exact)
            flags += [_hs.HS_FLAG_SOM_LEFTMOST | _hs.HS_FLAG_CASELESS] * len(caseless)
            # Glued words report where they end: the string around that is theirs.
            flags += [_hs.HS_FLAG_CASELESS] * len(_GLUED_WORDS)
            flags += [_hs.HS_FLAG_SOM_LEFTMOST] * len(regexes)
            # Deep nesting, in the same pass: at least ``_NESTING`` of ``{`` and ``[`` in all.
            patterns.append(_NESTED)
            flags.append(_hs.HS_FLAG_SINGLEMATCH)
            self._first_glued = len(exact) + len(caseless)
            self._first_regex = self._first_glued + len(_GLUED_WORDS)
            self._database.compile(
                expressions=patterns, ids=list(range(len(patterns))), flags=flags
            )
            self._scratch = _hs.Scratch(self._database)
        else:
            # The standard library has no multi-literal search that beats one
            # ``bytes.find`` per literal (an alternation tries each at every byte).
            self._exact = tuple(exact)
            self._caseless = tuple(caseless)
            self._glued = [re.compile(regex, re.IGNORECASE) for regex in _GLUED_WORDS]
            self._regexes = [re.compile(regex) for regex in regexes]

    def clean(self, data: bytes) -> bool:
        if self.off:
            return False
        if self.engine == "hs":
            return self._clean_hs(data)  # it counts the brackets too (``_NESTED``)
        if data.count(b"{") + data.count(b"[") >= _NESTING:
            return False
        last = [-1, -1]
        for literals, haystack in ((self._exact, data), (self._caseless, data.lower())):
            for literal in literals:
                at = haystack.find(literal)
                while at != -1:
                    end = at + len(literal)
                    if not _hit_is_benign(data, at, end, last):
                        return False
                    at = haystack.find(literal, end)
        for glued in self._glued:
            for match in glued.finditer(data):
                if not _hit_is_benign(data, match.end() - 1, match.end(), last):
                    return False
        return not any(regex.search(data) for regex in self._regexes)

    def _clean_hs(self, data: bytes) -> bool:
        found = [False]
        first_regex = self._first_regex
        last = [-1, -1]

        first_glued = self._first_glued

        def on_match(index: int, start: int, end: int, _flags: int, _context: object) -> bool:
            if index >= first_glued:
                start = end - 1  # no start of match asked for: the last byte is in the string
            if index >= first_regex or not _hit_is_benign(data, start, end, last):
                found[0] = True
                return True  # stop scanning
            return False

        try:
            self._database.scan(data, match_event_handler=on_match, scratch=self._scratch)
        except _hs.ScanTerminated:
            return False
        return not found[0]


_matchers: dict[str, _Matcher] = {}
# The matcher of the installed policy's engine (may_change runs once per record).
_active: list[_Matcher | None] = [None]


def _reset() -> None:
    _matchers.clear()
    _active[0] = None
    _verdicts.clear()
    _key_verdicts.clear()


on_install(_reset)


def _matcher(name: Engine) -> _Matcher:
    matcher = _matchers.get(name)
    if matcher is None:
        matcher = _matchers[name] = _Matcher(name)
    return matcher


def _current(engine_name: str | None = None) -> _Matcher:
    if engine_name is None:
        active = _active[0]
        if active is None:
            active = _active[0] = _matcher(engine_of(current()))
        return active
    if engine_name == "hs":
        return _matcher("hs" if HYPERSCAN else "re")
    return _matcher("re" if engine_name == "re" else "off")


def engine() -> str:
    """``hs`` (Hyperscan), ``re`` (the standard library) or ``off``: what screens records."""
    return _current().engine


def use_engine(name: str) -> None:
    """Screen with ``name`` from now on: the current policy with that engine, installed.

    ``off`` walks every record: the reference the benchmarks compare against.
    The edge picks the engine the same way (``PENTRACE_REDACTION_SCREEN``).
    """
    for known in ENGINES:
        if name == known:
            install(replace(current(), engine=known))
            return
    raise ValueError(f"expected one of {', '.join(ENGINES)}, found {name!r}")


def may_change(data: bytes, *, engine_name: str | None = None) -> bool:
    """False when redaction leaves the JSON document ``data`` encodes exactly as it is."""
    return not _current(engine_name).clean(data)
