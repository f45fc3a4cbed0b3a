"""Keep database credentials out of every message, log line and printed URL.

:func:`mask_url` is what any code that shows a database URL calls; it also
remembers the URL's secrets for the life of the process.  :func:`mask_text`
cleans any other text that may echo one (a driver's error message repeats the
connection string it was given, in URL or ``key=value`` form): it masks

* the password of a URL's userinfo (``scheme://user:secret@host``);
* every URL query or DSN ``key=value`` whose key names a credential
  (``password``, ``sslpassword``, ``passfile``, ``token``, ``api_key``,
  ``secret``, ``auth``...);
* every secret a URL passed to :func:`mask_url` held, wherever it appears,
  plain or percent-encoded.

No SQLAlchemy here: the settings module and the CLI's fast paths import it.
"""

from __future__ import annotations

import re
import threading
from typing import Final
from urllib.parse import quote, unquote, unquote_plus

__all__ = ["MASK", "mask_text", "mask_url"]

MASK: Final = "***"

# A key that names a credential: password, sslpassword, passfile, pwd, secret,
# token, access_token, api_key, sslkey, auth, authorization, credentials, sig...
_SECRET_KEY: Final = r"[\w.-]*(?:pass|pwd|secret|token|key|auth|cred|sig)[\w.-]*"  # noqa: S105  # a pattern of key names, not a password
# key=value in a URL query (ends at & or #) or a DSN (ends at a space, may be quoted).
_KEY_VALUE: Final = re.compile(
    rf"(?i)(?<![\w.-])({_SECRET_KEY})(\s*=\s*)('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^\s&#'\"]*)"
)
# scheme://user:password@ (SQLAlchemy's rule: the password holds anything but '@').
_USERINFO: Final = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^:/@\s]*):([^@\s]*)@")
_URL_USERINFO: Final = re.compile(r"^([^:/@]*):([^@]*)@")

_known: set[str] = set()
_known_lock = threading.Lock()


def mask_url(url: str) -> str:
    """``url`` with every credential replaced by ``***``; its secrets are remembered so
    that :func:`mask_text` also hides them where a driver message repeats them."""
    _remember(_secrets_of(url))
    return mask_text(url)


def mask_text(text: str) -> str:
    """``text`` with URL passwords, credential ``key=value`` pairs and remembered
    secrets replaced by ``***``."""
    masked = _USERINFO.sub(rf"\1:{MASK}@", text)
    masked = _KEY_VALUE.sub(_masked_pair, masked)
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in masked:
            masked = masked.replace(secret, MASK)
    return masked


def _masked_pair(match: re.Match[str]) -> str:
    value = match.group(3)
    if not value or value == MASK:
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{MASK}"


def _secrets_of(url: str) -> set[str]:
    """The password and credential query values a URL or DSN holds, as written and decoded."""
    found: set[str] = set()
    _, sep, rest = url.partition("://")
    if sep:
        userinfo = _URL_USERINFO.match(rest)
        if userinfo is not None:
            found.add(userinfo.group(2))
    for match in _KEY_VALUE.finditer(url):
        found.add(match.group(3).strip("'\""))
    variants = set()
    for secret in found:
        variants |= {secret, unquote(secret), unquote_plus(secret), quote(secret, safe="")}
    # A very short value would mask ordinary words everywhere; the structural rules still
    # hide it where it appears as a password.
    return {secret for secret in variants if len(secret) >= 4 and secret != MASK}


def _remember(secrets: set[str]) -> None:
    if secrets:
        with _known_lock:
            _known.update(secrets)
