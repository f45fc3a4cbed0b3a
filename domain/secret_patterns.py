"""Well-known secret shapes inside free text, and their replacement.

Every pattern is scanned on its own over the original string and yields the
span to hide; overlapping spans are merged and each merged span becomes one
marker such as ``[redacted:github_token]``.  Scanning the patterns separately
(rather than one alternation in one pass) means a match of one pattern can
never swallow the first half of another secret and leave its tail behind.

Each pattern has cheap literal triggers checked against the lowercased text
first, so ordinary prose and code never reach a regex at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, NamedTuple

from pentrace.domain.secret_keys import is_secret_key, normalize_key

__all__ = ["MARKER", "find_secret_spans", "is_marker", "redact_secrets_in_text"]

MARKER: Final = re.compile(r"\[redacted(?::[a-z0-9_]+)?\]")
_QUERY_ONLY_NAMES: Final = frozenset(
    {"key", "sig", "signature", "x_amz_signature", "x_amz_credential", "x_amz_security_token"}
)
_NAME: Final = r"-{0,2}[A-Za-z_][A-Za-z0-9_.-]{0,63}"
_B64URL: Final = r"[A-Za-z0-9_-]"
_SECRET_WORDS: Final = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "cookie",
    "credential",
    "creds",
    "jwt",
    "dsn",
    "sig",
    "bearer",
    "session",
    "private",
    "database",
    "db_ur",
    "connection",
    "otp",
)


class _Pattern(NamedTuple):
    kind: str
    regex: re.Pattern[str]
    group: int
    triggers: tuple[str, ...]
    accept: Callable[[re.Match[str]], bool] | None = None
    # Name-driven patterns only run when the text mentions a secret-ish word.
    needs_word: bool = False


def _named_secret(match: re.Match[str]) -> bool:
    return is_secret_key(match.group(1).lstrip("-"))


def _assignment(match: re.Match[str]) -> bool:
    name = match.group(1).lstrip("-")
    if is_secret_key(name):
        return True
    start = match.start(1)
    in_query = start > 0 and match.string[start - 1] in "?&;"
    return in_query and normalize_key(name) in _QUERY_ONLY_NAMES


_PATTERNS: Final = (
    _Pattern(
        "private_key",
        re.compile(
            r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
        0,
        ("-----begin",),
    ),
    _Pattern(
        "authorization",
        re.compile(r"(?i)\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?([^\r\n\"']+)"),
        1,
        ("authorization",),
    ),
    _Pattern(
        "cookie",
        re.compile(r"(?i)\b(?:set-)?cookie[\"']?[ \t]*:[ \t]*[\"']?([^\r\n\"']+)"),
        1,
        ("cookie",),
    ),
    _Pattern(
        "bearer_token",
        re.compile(r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/=-]{8,})"),
        1,
        ("bearer",),
    ),
    _Pattern(
        "api_key",
        re.compile(
            r"\bsk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
            r"[A-Za-z0-9_-]{20,}"
        ),
        0,
        ("sk-",),
    ),
    _Pattern("stripe_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0, ("k_",)),
    _Pattern(
        "aws_access_key",
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}"),
        0,
        ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "abia", "acca"),
    ),
    _Pattern(
        "jwt",
        re.compile(rf"\beyJ{_B64URL}{{8,}}\.{_B64URL}{{8,}}\.{_B64URL}*"),
        0,
        ("eyj",),
    ),
    _Pattern(
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        0,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _Pattern("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), 0, ("glpat-",)),
    _Pattern(
        "slack_token",
        re.compile(
            r"\b(?:xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,})"
            r"|hooks\.slack\.com/services/[A-Za-z0-9/_-]+"
        ),
        0,
        ("xox", "xapp-", "hooks.slack.com"),
    ),
    _Pattern("google_api_key", re.compile(rf"\bAIza{_B64URL}{{35}}"), 0, ("aiza",)),
    _Pattern("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), 0, ("hf_",)),
    _Pattern("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}"), 0, ("npm_",)),
    _Pattern("webhook_secret", re.compile(r"\bwhsec_[A-Za-z0-9+/=]{16,}"), 0, ("whsec_",)),
    _Pattern(
        "url_password",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"'<>]*:([^/\s@\"'<>]+)@"),
        1,
        ("://",),
    ),
    _Pattern(
        "url_token",
        re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://([A-Za-z0-9_.~-]{20,})@"),
        1,
        ("://",),
    ),
    _Pattern(
        "secret",
        re.compile(
            rf"(?<![A-Za-z0-9_])({_NAME})[ \t]*:?=[ \t]*"
            r"(\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s&\"',;<>]+)"
        ),
        2,
        ("=",),
        _assignment,
        True,
    ),
    _Pattern(
        "secret",
        re.compile(
            r"(?<![A-Za-z0-9_])[\"']?([A-Za-z_][A-Za-z0-9_.-]{0,63})[\"']?[ \t]*:[ \t]*"
            r"(?:\"((?:[^\"\\\r\n]|\\.)*)\"|'((?:[^'\\\r\n]|\\.)*)'|(?!\")(\S[^\r\n,}]*))"
        ),
        -1,
        (":",),
        _named_secret,
        True,
    ),
    _Pattern(
        "secret",
        re.compile(r"\\\"([A-Za-z_][A-Za-z0-9_.-]{0,63})\\\"[ \t]*:[ \t]*\\\"(.*?)\\\""),
        2,
        ('\\"',),
        _named_secret,
        True,
    ),
)


def is_marker(text: str) -> bool:
    """True when ``text`` is nothing but redaction markers (already redacted)."""
    return MARKER.sub("", text).strip() == ""


def _span(pattern: _Pattern, match: re.Match[str]) -> tuple[int, int] | None:
    if pattern.group >= 0:
        start, end = match.span(pattern.group)
    else:
        # The colon form has one group per quoting style; the one that matched wins.
        group = next(index for index in (2, 3, 4) if match.group(index) is not None)
        start, end = match.span(group)
        end = start + len(match.group(group).rstrip())
    if end <= start or is_marker(match.string[start:end]):
        return None
    return start, end


def find_secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Merged, sorted ``(start, end, kind)`` spans of every secret found in ``text``."""
    lowered = text.lower()
    has_word: bool | None = None
    spans: list[tuple[int, int, str]] = []
    for pattern in _PATTERNS:
        if not any(trigger in lowered for trigger in pattern.triggers):
            continue
        if pattern.needs_word:
            if has_word is None:
                has_word = any(word in lowered for word in _SECRET_WORDS)
            if not has_word:
                continue
        for match in pattern.regex.finditer(text):
            if pattern.accept is not None and not pattern.accept(match):
                continue
            found = _span(pattern, match)
            if found is not None:
                spans.append((found[0], found[1], pattern.kind))
    if not spans:
        return []
    spans.sort()
    merged = [spans[0]]
    for start, end, kind in spans[1:]:
        last_start, last_end, last_kind = merged[-1]
        if start < last_end:
            merged[-1] = (last_start, max(last_end, end), last_kind)
        else:
            merged.append((start, end, kind))
    return merged


def redact_secrets_in_text(text: str) -> str:
    """``text`` with every secret span replaced by ``[redacted:<kind>]``."""
    spans = find_secret_spans(text)
    if not spans:
        return text
    pieces: list[str] = []
    cursor = 0
    for start, end, kind in spans:
        pieces.append(text[cursor:start])
        pieces.append(f"[redacted:{kind}]")
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)
