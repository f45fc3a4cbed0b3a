"""The cold analytics build: a read model straight from the traces, a fast path beside the
projection runner (its reference).  See ``README.md`` in this folder."""

from pentrace.infrastructure.analytics.cold.build import ColdReport, cold_build

__all__ = ["ColdReport", "cold_build"]
