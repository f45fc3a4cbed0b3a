"""The application layer: what the CLI and the HTTP service both do (ADR 0036).

Each module is one job, called the same way by ``pentrace ...`` and by the
service's routes; the CLI parses arguments and formats the result, the service
routes and serializes it, and neither holds logic of its own:

* :mod:`.documents` - the one JSON document of a session (list entry and detail);
* :mod:`.stats` - which projections a stat needs, catching them up, the document;
* :mod:`.exports` - the byte stream of an export (verbatim, redacted, archive);
* :mod:`.audit` - audit, fix, refresh and re-audit as one workflow.
"""
