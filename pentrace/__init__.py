"""pentrace: record, replay, resume and audit LLM agent sessions.

The common uses, on one data root (``docs/sessions.md``, "The short way")::

    import pentrace

    root = pentrace.open_root("~/.penguin/data")
    with root.record("default_project", "default_agent") as recording:
        handle = recording.application.start_session(...)
    root.sessions()            # the session documents of `pentrace list --json`
    root.replay(session_id)    # the committed history, record by record
    root.stats("tokens")       # the document of `pentrace stats tokens --json`
    with root.resume(session_id) as resumed:
        resumed.handle.record_user_input("go on")

The package is laid out in layers (see ``docs/architecture.md``):

* :mod:`pentrace.domain` - pure types and rules: OmniMessage envelopes, the
  Session aggregate, RuntimeEvent envelopes and redaction.
* :mod:`pentrace.projections` - pure folds over trace records (resume, replay,
  analytics).
* :mod:`pentrace.infrastructure` - files and databases: the trace log store,
  the RuntimeEvent ledger, and :mod:`pentrace.infrastructure.operations`, the
  application layer the CLI, the service and these names share.
* :mod:`pentrace.cli` and :mod:`pentrace.service` - the operator CLI and the
  HTTP event service, thin layers over the library.

The names below are imported when first used, so ``import pentrace`` stays
cheap for the CLI (ADR 0008).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pentrace.errors import PentraceError

if TYPE_CHECKING:
    from pentrace.infrastructure.eventstore.application import SaveMode, SessionApplication
    from pentrace.infrastructure.eventstore.recording import Recording, open_recording
    from pentrace.infrastructure.operations.facade import Root, open_root

__all__ = [
    "PentraceError",
    "Recording",
    "Root",
    "SaveMode",
    "SessionApplication",
    "__version__",
    "open_recording",
    "open_root",
]

__version__ = "0.1.0.dev0"

_LAZY = {
    "Recording": "pentrace.infrastructure.eventstore.recording",
    "open_recording": "pentrace.infrastructure.eventstore.recording",
    "SaveMode": "pentrace.infrastructure.eventstore.application",
    "SessionApplication": "pentrace.infrastructure.eventstore.application",
    "Root": "pentrace.infrastructure.operations.facade",
    "open_root": "pentrace.infrastructure.operations.facade",
}


def __getattr__(name: str) -> Any:
    """The facade's names, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'pentrace' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
