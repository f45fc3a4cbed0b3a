"""pentrace: record, replay, resume and audit LLM agent sessions.

The package is laid out in layers (see ``docs/architecture.md``):

* :mod:`pentrace.domain` - pure types and rules: OmniMessage envelopes, the
  Session aggregate, RuntimeEvent envelopes and redaction.
* :mod:`pentrace.projections` - pure folds over trace records (resume, replay,
  analytics).
* :mod:`pentrace.infrastructure` - files and databases: the trace log store,
  the RuntimeEvent ledger, the application wiring.
* :mod:`pentrace.cli` and :mod:`pentrace.service` - the operator CLI and the
  HTTP event service, thin layers over the library.
"""

from pentrace.errors import PentraceError

__all__ = ["PentraceError", "__version__"]

__version__ = "0.1.0.dev0"
