"""The one redaction policy for everything that leaves a trace.

The public face of the package; its modules, one concept each:

* :mod:`~pentrace.domain.redaction.policy`: the user's rules and the screen's
  engine, installed once per process (chosen at the edge);
* :mod:`~pentrace.domain.redaction.keys`: which mapping keys name a secret;
* :mod:`~pentrace.domain.redaction.shapes`: credential formats (generic and
  providers'), one rule each, and the index of their gate literals;
* :mod:`~pentrace.domain.redaction.text`: secrets inside free text, by shape
  and by the secret name before a value;
* :mod:`~pentrace.domain.redaction.walk`: the full walk (every rule, every
  node), the reference;
* :mod:`~pentrace.domain.redaction.screen`: one multi-pattern pass over a
  record's bytes that says when no rule can apply (a fast path);
* :mod:`~pentrace.domain.redaction.core`: :func:`redact` and :func:`is_redacted`
  (the fast loop, the memo and the screened entry points, held to the walk by
  property tests) and the findings ``pentrace scan`` reports.
"""

from pentrace.domain.redaction.core import (
    is_redacted,
    is_redacted_encoded,
    redact,
    redact_decoded,
    redact_string,
    redact_text,
)
from pentrace.domain.redaction.keys import is_secret_key, normalize_key
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
