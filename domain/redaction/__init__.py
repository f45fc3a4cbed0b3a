"""The one redaction policy for everything that leaves a trace.

The public face of the package; the parts live in its modules:

* :mod:`~pentrace.domain.redaction.core`: :func:`redact` (a fast loop over
  plain dicts) and :func:`is_redacted`, the ledger's check;
* :mod:`~pentrace.domain.redaction.walk`: the full walk (every rule, every
  node), the reference the fast loop is held to;
* :mod:`~pentrace.domain.redaction.keys`: which mapping keys name a secret;
* :mod:`~pentrace.domain.redaction.text`: secrets inside free text, with
  :mod:`~pentrace.domain.redaction.named` for the values after a secret name;
* :mod:`~pentrace.domain.redaction.shapes` and ``providers``: credential
  formats, one rule each;
* :mod:`~pentrace.domain.redaction.policy`: the user's own rules, installed
  once per process for a data root;
* :mod:`~pentrace.domain.redaction.screen`: one multi-pattern pass over a
  record's bytes that says when no rule can apply.
"""

from pentrace.domain.redaction.core import is_redacted, redact, redact_string, redact_text
from pentrace.domain.redaction.keys import is_secret_key, normalize_key
from pentrace.domain.redaction.screened import is_redacted_encoded, redact_decoded
from pentrace.domain.redaction.walk import (
    REDACTED,
    TOO_DEEP,
    Classification,
    Redacted,
    redact_reference,
)

__all__ = [
    "REDACTED",
    "TOO_DEEP",
    "Classification",
    "Redacted",
    "is_redacted",
    "is_redacted_encoded",
    "is_secret_key",
    "normalize_key",
    "redact",
    "redact_decoded",
    "redact_reference",
    "redact_string",
    "redact_text",
]
