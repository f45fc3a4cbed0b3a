"""Secret shapes: credential formats found inside free text, each a regex with literal gates.

A :class:`Shape` is one rule: a regex, the literals (``gates``) one of which a
text must hold before the regex runs, and how to cut the match.  Regexes
start with a literal so the regex engine skips to candidates with a fast
substring search (a leading ``\\b`` would defeat that, so word boundaries are
checked in Python on the few hits).  Case-insensitive shapes check their gates
on the lowercased text.  The rules in force are the generic ones (headers,
bearer values, URLs, command lines), the providers' published formats, then
the user's (the policy).

Provider formats: which providers and formats exist comes from the public rule
sets (gitleaks' default rules, detect-secrets' plugins, GitHub secret
scanning's pattern list; ``docs/redaction.md`` cites them per rule); the
regexes are our own.  The screen (:mod:`pentrace.domain.redaction.screen`)
looks for the same literals in a record's bytes, so it can only skip a record
that no rule here could match.  A rule whose format has no fixed literal
(Discord bot tokens) has no gates and a ``screen`` regex instead.

Gates: with some 140 of them, asking ``gate in text`` for each one was most of
the cost of redacting a string, so :class:`GateIndex` looks for them together:
one Hyperscan pass over the text's UTF-8 bytes when the policy's engine is
``hs`` (ADR 0021), else one ``in`` per distinct gate.  Both give the same set:
an ASCII gate occurs in the UTF-8 bytes exactly where it occurs in the text,
and a text whose lowercasing could make ASCII out of other letters (KELVIN
SIGN, ``İ``) takes the ``in`` path.  Whether Hyperscan is installed is known
here (``HYPERSCAN``); which engine runs is the policy's choice, made at the
edge (:mod:`pentrace.infrastructure.redaction_policy`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, NamedTuple

from pentrace.domain.redaction.policy import CustomRule, Engine, Policy, current, on_install

try:  # pragma: no cover - which branch runs depends on the installed extras
    import hyperscan as hs
except ImportError:  # pragma: no cover
    hs = None  # type: ignore[assignment]  # the optional extra is absent

__all__ = [
    "GATES",
    "HYPERSCAN",
    "LOWERED_GATES",
    "PROVIDER_SHAPES",
    "UNGATED_CUSTOM",
    "GateIndex",
    "Shape",
    "engine_of",
    "hs",
    "shape_spans",
    "shapes",
]

HYPERSCAN: Final = hs is not None


def engine_of(policy: Policy) -> Engine:
    """The engine ``policy`` runs on this machine: its own, ``re`` for ``hs`` without
    Hyperscan; by default ``hs`` where Hyperscan is installed, else ``off`` (ADR 0021)."""
    wanted = policy.engine or ("hs" if HYPERSCAN else "off")
    return "re" if wanted == "hs" and not HYPERSCAN else wanted


class Shape(NamedTuple):
    """A rule that finds one kind of secret inside free text.

    The regex runs only on a text holding one of ``gates`` (case-insensitively,
    on the lowercased text, when ``lowered``); a shape without gates runs on
    every text and needs a ``screen`` regex over bytes that matches wherever
    it could.  ``group`` is the part hidden; ``check`` may veto a match.
    """

    kind: str
    regex: re.Pattern[str]
    gates: tuple[str, ...]
    group: int = 0
    lowered: bool = False
    # The match must not continue a word (what a leading ``\\b`` would say).
    boundary: bool = True
    check: Callable[[str], bool] | None = None
    screen: bytes | None = None


_ODD_LOWER: Final = ("\u212a", "\u0130")


class GateIndex:
    """The rows (shape indices) whose gates occur in a text, from one pass."""

    def __init__(
        self,
        exact: Iterable[tuple[str, int]],
        lowered: Iterable[tuple[str, int]],
        regexes: Iterable[tuple[bytes, int]] = (),
        *,
        fast: bool,
    ) -> None:
        self._exact: dict[str, list[int]] = {}
        self._lowered: dict[str, list[int]] = {}
        # Shapes without a literal gate, by the regex (over bytes) that finds
        # wherever they could match: Hyperscan runs it, ``in`` cannot (always).
        self._regexes: dict[bytes, list[int]] = {}
        for table, pairs in ((self._exact, exact), (self._lowered, lowered)):
            for gate, row in pairs:
                table.setdefault(gate, []).append(row)
        for pattern, row in regexes:
            self._regexes.setdefault(pattern, []).append(row)
        self._always = {row for rows in self._regexes.values() for row in rows}
        self._database: Any = None
        if fast and hs is not None and (self._exact or self._lowered or self._regexes):
            self._rows = [*self._exact.values(), *self._lowered.values(), *self._regexes.values()]
            patterns = [_escape(gate) for gate in [*self._exact, *self._lowered]]
            patterns += list(self._regexes)
            flags = [hs.HS_FLAG_SINGLEMATCH] * len(self._exact)
            flags += [hs.HS_FLAG_SINGLEMATCH | hs.HS_FLAG_CASELESS] * len(self._lowered)
            flags += [hs.HS_FLAG_SINGLEMATCH] * len(self._regexes)
            self._database = hs.Database()
            self._database.compile(
                expressions=patterns, ids=list(range(len(patterns))), flags=flags
            )
            self._scratch = hs.Scratch(self._database)

    def rows(self, text: str, lowered: str) -> set[int]:
        """Rows with a gate in ``text`` (exact gates) or ``lowered`` (lowered gates)."""
        if self._database is not None and not any(odd in text for odd in _ODD_LOWER):
            found: set[int] = set()
            rows = self._rows

            def on_match(index: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
                found.update(rows[index])

            data = text.encode("utf-8", "surrogatepass")
            self._database.scan(data, match_event_handler=on_match, scratch=self._scratch)
            return found
        present = set(self._always)
        for gate, indices in self._exact.items():
            if gate in text:
                present.update(indices)
        for gate, indices in self._lowered.items():
            if gate in lowered:
                present.update(indices)
        return present


def _escape(gate: str) -> bytes:
    return b"".join(b"\\x%02x" % byte for byte in gate.encode("ascii"))


_W: Final = r"[A-Za-z0-9_-]"
_END: Final = r"(?![A-Za-z0-9_-])"
_AWS_IDS: Final = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA")
_AWS_ID: Final = r"(?:A3T[A-Z0-9]|" + "|".join(_AWS_IDS) + r")[A-Z0-9]{16}"
_CONTEXT_NAMES: Final = (
    "discord", "bitbucket", "heroku", "twilio", "mailgun", "sentry", "newrelic", "new_relic",
    "telegram", "atlassian", "sendgrid", "databricks", "okta",
)  # fmt: skip
# Mixed case and a digit in 20 or more key characters, or 32 or more hex digits
# (the case-insensitive rule sees both cases, so the checks spell them out).
_KEYLIKE: Final = (
    r"(?-i:(?=[A-Za-z0-9_=+/.-]*[0-9])(?=[A-Za-z0-9_=+/.-]*[A-Z])(?=[A-Za-z0-9_=+/.-]*[a-z])"
    r"[A-Za-z0-9_=+/.-]{20,}|[0-9a-f]{32,}(?![0-9a-f]))"
)
_CREDENTIAL_PAIR: Final = r"[ \t:,;|=\"'/]{1,6}(?:[A-Za-z_-]{1,40}[ \t:,;|=\"'/]{1,6})?"


def _basic_value(text: str) -> bool:
    # ``Basic <base64>`` is a credential when it decodes to ``user:password``;
    # "basic understanding" and "Basic Plan" are prose.
    try:
        decoded = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    user, colon, _ = decoded.partition(b":")
    return bool(colon and user) and all(0x20 <= byte < 0x7F for byte in decoded)


def _shape(kind: str, pattern: str, *gates: str, group: int = 0, lowered: bool = False) -> Shape:
    return Shape(kind, re.compile(pattern), gates, group, lowered)


PROVIDER_SHAPES: Final[tuple[Shape, ...]] = (
    # Cloud.
    _shape("aws_access_key", _AWS_ID + r"(?![A-Z0-9])", "A3T", *_AWS_IDS),
    _shape(
        "aws_secret_key",
        _AWS_ID + _CREDENTIAL_PAIR + r"([A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])",
        "A3T",
        *_AWS_IDS,
        group=1,
    ),
    _shape("aws_bedrock_key", r"ABSK[A-Za-z0-9+/]{100,}={0,2}", "ABSK"),
    _shape("google_api_key", rf"AIza{_W}{{35}}{_W}*", "AIza"),
    _shape("google_oauth_secret", rf"GOCSPX-{_W}{{20,}}", "GOCSPX-"),
    _shape("google_oauth_token", rf"ya29\.{_W}{{20,}}", "ya29."),
    _shape("google_refresh_token", rf"1//0{_W}{{30,}}", "//0"),
    _shape("azure_client_secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", "Q~"),
    # Source hosting.
    _shape("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _shape("github_token", r"github_pat_[A-Za-z0-9_]{30,}", "github_pat_"),
    _shape(
        "gitlab_token",
        rf"gl(?:pat|dt|ft|rt|cbt|ptt|soat|agent|oas|imt|ffct)-{_W}{{20,}}(?:\.{_W}+)?",
        *("glpat-", "gldt-", "glft-", "glrt-", "glcbt-", "glptt-", "glsoat-", "glagent-"),
        *("gloas-", "glimt-", "glffct-"),
    ),
    _shape("gitlab_token", rf"GR1348941{_W}{{20,}}", "GR1348941"),
    _shape(
        "atlassian_token", r"AT(?:BB|ATT3|CTT3)[A-Za-z0-9_=.-]{24,}", "ATBB", "ATATT3", "ATCTT3"
    ),
    # Chat.
    _shape("slack_token", r"xox[abposre]-[A-Za-z0-9-]{10,}", "xox"),
    _shape("slack_token", r"xapp-\d-[A-Za-z0-9-]{10,}", "xapp-"),
    _shape(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9/_+-]+)",
        "hooks.slack.com",
        group=1,
    ),
    _shape(
        "discord_webhook",
        r"discord(?:app)?\.com/api/webhooks/([0-9]+/[A-Za-z0-9_-]+)",
        "/api/webhooks/",
        group=1,
    ),
    _shape("telegram_bot_token", r"[0-9]{5,16}:A[A-Za-z0-9_-]{34}", ":A"),
    # Payments.
    _shape(
        "stripe_key",
        r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}",
        *("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"),
    ),
    _shape("webhook_secret", r"whsec_[A-Za-z0-9+/=]{16,}", "whsec_"),
    _shape("square_token", rf"sq0(?:atp|csp)-{_W}{{22,}}", "sq0atp-", "sq0csp-"),
    _shape("square_token", rf"EAAA{_W}{{40,}}", "EAAA"),
    _shape("shopify_token", r"shp(?:at|ca|pa|ss)_[A-Fa-f0-9]{32}", "shpat_", "shpca_", "shppa_"),
    _shape("shopify_token", r"shpss_[A-Fa-f0-9]{32}", "shpss_"),
    # Mail and messaging.
    _shape("sendgrid_key", rf"SG\.{_W}{{16,32}}\.{_W}{{30,50}}", "SG."),
    _shape("mailgun_key", r"key-[0-9a-f]{32}(?![0-9a-f])", "key-"),
    _shape("twilio_key", r"SK[0-9a-fA-F]{32}(?![0-9a-fA-F])", "SK"),
    _shape(
        "twilio_auth_token",
        r"AC[0-9a-f]{32}" + _CREDENTIAL_PAIR + r"([0-9a-f]{32})(?![0-9a-f])",
        "AC",
        group=1,
    ),
    _shape("twilio_account_sid", r"AC[0-9a-f]{32}(?![0-9a-f])", "AC"),
    # LLM providers.
    _shape("anthropic_key", rf"sk-ant-(?:api|admin|sid)\d\d-{_W}{{20,}}", "sk-ant-"),
    _shape("openrouter_key", r"sk-or-v1-[0-9a-f]{40,}", "sk-or-"),
    _shape("openai_key", rf"sk-(?:proj|svcacct|admin)-{_W}{{20,}}", "sk-proj-", "sk-svcacct-"),
    _shape("openai_key", rf"sk-admin-{_W}{{20,}}", "sk-admin-"),
    _shape("huggingface_token", r"hf_[A-Za-z0-9]{30,}", "hf_"),
    _shape("huggingface_token", r"api_org_[A-Za-z0-9]{30,}", "api_org_"),
    _shape("groq_key", r"gsk_[A-Za-z0-9]{40,}", "gsk_"),
    _shape("replicate_token", r"r8_[A-Za-z0-9]{30,}", "r8_"),
    _shape("perplexity_key", r"pplx-[A-Za-z0-9]{40,}", "pplx-"),
    _shape("xai_key", r"xai-[A-Za-z0-9]{60,}", "xai-"),
    _shape("langsmith_key", r"lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}", "lsv2_"),
    _shape("pinecone_key", rf"pcsk_{_W}{{40,}}", "pcsk_"),
    _shape("tavily_key", r"tvly-[A-Za-z0-9-]{30,}", "tvly-"),
    # Package registries.
    _shape("npm_token", r"npm_[A-Za-z0-9]{36}", "npm_"),
    _shape("pypi_token", rf"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw){_W}{{30,}}", "pypi-AgE"),
    # Infrastructure.
    _shape("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}", "dop_v1_", "doo_v1_", "dor_v1_"),
    _shape("heroku_key", rf"HRKU-{_W}{{20,}}", "HRKU-"),
    _shape(
        "heroku_key",
        r"(?i)heroku[A-Za-z0-9_.-]{0,30}[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
        "heroku",
        group=1,
        lowered=True,
    ),
    _shape("vault_token", rf"hv[sbr]\.{_W}{{24,}}", "hvs.", "hvb.", "hvr."),
    _shape("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?", "dapi"),
    _shape("doppler_token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{30,}", "dp."),
    _shape("supabase_token", r"sbp_[a-f0-9]{40}", "sbp_"),
    _shape("supabase_token", rf"sb_secret_{_W}{{20,}}", "sb_secret_"),
    _shape("terraform_token", rf"[A-Za-z0-9]{{14}}\.atlasv1\.{_W}{{60,}}", ".atlasv1."),
    _shape("pulumi_token", r"pul-[a-f0-9]{40}", "pul-"),
    _shape("grafana_token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", "glsa_"),
    _shape("grafana_token", r"glc_[A-Za-z0-9+/]{32,}={0,2}", "glc_"),
    _shape("sentry_token", r"sntry[us]_[A-Za-z0-9+/=_]{40,}", "sntryu_", "sntrys_"),
    _shape("linear_key", r"lin_api_[A-Za-z0-9]{40}", "lin_api_"),
    _shape("notion_token", r"ntn_[A-Za-z0-9]{40,}", "ntn_"),
    _shape("postman_key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}", "PMAK-"),
    _shape(
        "newrelic_key", r"NR(?:AK|JS|II|AA)-[A-Za-z0-9]{19,}", "NRAK-", "NRJS-", "NRII-", "NRAA-"
    ),
    _shape("onepassword_token", r"ops_eyJ[A-Za-z0-9+/=_-]{40,}", "ops_eyJ"),
    _shape(
        "onepassword_secret_key",
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        "A3-",
    ),
    _shape("planetscale_token", r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,}", "pscale_"),
    _shape("cloudflare_origin_key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}", "v1.0-"),
    _shape("grafana_token", r"eyJrIjoi[A-Za-z0-9]{50,}={0,2}", "eyJrIjoi"),
    _shape("facebook_token", r"EAA[MC][A-Za-z0-9]{80,}", "EAAM", "EAAC"),
    _shape("gitlab_session", r"_gitlab_session=([0-9a-z]{32})", "_gitlab_session=", group=1),
    _shape("mailgun_key", r"pubkey-[0-9a-f]{32}(?![0-9a-f])", "pubkey-"),
    # A provider's name, a separator, then a value shaped like a key: mixed
    # case with digits, or a long hex run (``DISCORD: <hex64>``, ``bitbucket=...``).
    _shape(
        "provider_secret",
        r"(?i)(?:" + "|".join(_CONTEXT_NAMES) + r")[A-Za-z0-9_.-]{0,30}[\"']?[ \t]*"
        r"(?:=>|:=|=|:)[ \t]*[\"']?(" + _KEYLIKE + r")",
        *_CONTEXT_NAMES,
        group=1,
        lowered=True,
    ),
    # Keys.
    _shape(
        "age_secret_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "AGE-SECRET"
    ),
    # Basic credentials outside an Authorization header (``auth: Basic ...``).
    Shape(
        "basic_auth",
        re.compile(r"(?i)basic[ \t]+([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])"),
        ("basic",),
        1,
        True,
        check=_basic_value,
    ),
    # Discord bot tokens carry no literal: the base64 of a snowflake id, a
    # timestamp, an HMAC.  The screen runs the regex itself.
    Shape(
        "discord_bot_token",
        re.compile(r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}" + _END),
        (),
        screen=rb"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}",
    ),
)


_B64URL: Final = r"[A-Za-z0-9_-]"


_PEM: Final = (
    r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_SK: Final = r"sk-(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Z])(?=[A-Za-z0-9_-]*[a-z])"
# The generic rules: headers, bearer values, URLs and command lines.
_GENERIC: Final = (
    Shape("private_key", re.compile(_PEM, re.DOTALL), ("-----BEGIN",), boundary=False),
    Shape(
        "authorization",
        re.compile(r"(?i)(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?([^\r\n\"']+)"),
        ("authorization",),
        1,
        lowered=True,
    ),
    Shape(
        "cookie",
        re.compile(r"(?i)(?:set-)?cookie[\"']?[ \t]*:[ \t]*[\"']?([^\r\n\"']+)"),
        ("cookie",),
        1,
        lowered=True,
    ),
    Shape(
        "bearer_token",
        re.compile(r"(?i)bearer[ \t]+([A-Za-z0-9._~+/=-]{8,})"),
        ("bearer",),
        1,
        lowered=True,
    ),
    Shape("api_key", re.compile(_SK + r"[A-Za-z0-9_-]{20,}"), ("sk-",)),
    Shape("jwt", re.compile(rf"eyJ{_B64URL}{{8,}}\.{_B64URL}{{8,}}\.{_B64URL}*"), ("eyJ",)),
    Shape(
        "user_password",
        re.compile(r"(?<![^\s\"'])(?:-u|--user)[ =][\"']?[^\s:\"']+:([^\s\"']+)"),
        ("-u ", "-u=", "--user ", "--user="),
        1,
        boundary=False,
    ),
    Shape(
        "url_password",
        # Greedy up to the last ``@`` of the authority: a raw ``@`` may sit in the password.
        re.compile(r"://[^/\s:@\"'<>]*:([^/\s\"'<>]+)@"),
        ("@",),
        1,
        boundary=False,
    ),
    Shape("url_token", re.compile(r"://([A-Za-z0-9_.~-]{20,})@"), ("@",), 1, boundary=False),
)


def _custom(rule: CustomRule) -> Shape:
    keywords = tuple(keyword.lower() for keyword in rule.keywords)
    return Shape(rule.id, rule.regex, keywords, rule.group, lowered=True, boundary=False)


def shapes() -> tuple[Shape, ...]:
    """Every shape in force: the generic rules, the providers', then the policy's."""
    return (*_GENERIC, *PROVIDER_SHAPES, *map(_custom, current().rules))


def _continues_word(text: str, start: int) -> bool:
    if start == 0:
        return False
    before = text[start - 1]
    return before.isalnum() or before == "_"


# The shapes as plain tuples, found through one index of their gates: one
# loop with tuple unpacking costs far less than attribute reads on every
# shape of every string.  Rebuilt when a policy with other rules is installed.
_Row = tuple[
    Callable[[str], Iterator[re.Match[str]]],
    int,
    bool,
    str,
    Callable[[str], bool] | None,
]
_ROWS: tuple[_Row, ...] = ()
_ALWAYS: tuple[_Row, ...] = ()
_INDEX = GateIndex((), (), fast=False)
# Every gate, by the text it is looked for in: a text holding none of them
# has no gated shape in it at all.
GATES: frozenset[str] = frozenset()
LOWERED_GATES: frozenset[str] = frozenset()
# True when a user rule without keywords may match anywhere (no shortcut holds).
UNGATED_CUSTOM = False


def _row(shape: Shape) -> _Row:
    return (shape.regex.finditer, shape.group, shape.boundary, shape.kind, shape.check)


def _rebuild() -> None:
    global _ROWS, _ALWAYS, _INDEX, GATES, LOWERED_GATES, UNGATED_CUSTOM
    every = shapes()
    indexed = [shape for shape in every if shape.gates or shape.screen]
    _ROWS = tuple(map(_row, indexed))
    _ALWAYS = tuple(_row(shape) for shape in every if not (shape.gates or shape.screen))
    exact = [(g, i) for i, shape in enumerate(indexed) if not shape.lowered for g in shape.gates]
    lowered = [(g, i) for i, shape in enumerate(indexed) if shape.lowered for g in shape.gates]
    regexes = [(shape.screen, i) for i, shape in enumerate(indexed) if shape.screen]
    # Hyperscan only where the policy's engine is ``hs``: ``re`` keeps it out altogether.
    _INDEX = GateIndex(exact, lowered, regexes, fast=engine_of(current()) == "hs")
    GATES = frozenset(gate for gate, _ in exact)
    LOWERED_GATES = frozenset(gate for gate, _ in lowered)
    UNGATED_CUSTOM = any(not rule.keywords for rule in current().rules)


_rebuild()
on_install(_rebuild)


def _find(text: str, rows: Iterable[_Row], spans: list[tuple[int, int, str]]) -> None:
    for finditer, group, boundary, kind, check in rows:
        for match in finditer(text):
            if boundary and _continues_word(text, match.start()):
                continue
            if check is not None and not check(match.group(group)):
                continue
            start, end = match.span(group)
            spans.append((start, end, kind))


def shape_spans(text: str, lowered: str, spans: list[tuple[int, int, str]]) -> None:
    """Append ``(start, end, kind)`` for every shape found; ``lowered`` is ``text`` lowercased."""
    present = _INDEX.rows(text, lowered)
    if present:
        _find(text, [_ROWS[index] for index in sorted(present)], spans)
    if _ALWAYS:
        _find(text, _ALWAYS, spans)
