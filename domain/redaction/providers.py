"""Provider token formats: one rule per published credential shape.

Which providers and formats exist comes from the public rule sets (gitleaks'
default rules, detect-secrets' plugins, GitHub secret scanning's pattern
list; ``docs/redaction.md`` cites them per rule); the regexes are our own.
Each rule names literals (``gates``), one of which a text must hold before
the regex runs.  The screen (:mod:`pentrace.domain.redaction.screen`) looks
for the same literals in a record's bytes, so it can only skip a record that
no rule here could match.  A rule whose format has no fixed literal (Discord
bot tokens) has no gates and a ``screen`` regex instead.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from pentrace.domain.redaction.shape import Shape

__all__ = ["PROVIDER_SHAPES"]

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
