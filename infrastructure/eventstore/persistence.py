"""The trace as an eventsourcing persistence module: select it with
``PERSISTENCE_MODULE=pentrace.infrastructure.eventstore.persistence``.

:class:`Factory` builds the :class:`~pentrace.infrastructure.eventstore.recorder.TraceRecorder`
(the events of each session are the lines of its JSONL shards) and the
:class:`~pentrace.infrastructure.eventstore.recorder.TraceMapper` (stored state = the
line).  Notifications, tracking and snapshots are not kept in traces; the
ledger provides them (``NotSupportedError`` here).

Environment (read through eventsourcing's ``Environment``, so the
``<APPNAME>_`` prefixed names win): ``PENTRACE_DATA_ROOT`` (default:
``PENGUIN_HOME`` or ``~/.penguin/data``), ``PENTRACE_PROJECT``,
``PENTRACE_AGENT``, ``PENTRACE_DURABILITY`` (``none``, ``per_request``,
``every_record``) and ``PENTRACE_LOCK_WAIT`` (seconds; unset fails at once).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from eventsourcing.persistence import (
    InfrastructureFactory,
    Mapper,
    NotSupportedError,
    ProcessRecorder,
    TrackingRecorder,
    Transcoder,
)
from eventsourcing.utils import Environment, EnvType

from pentrace.errors import ConfigError
from pentrace.infrastructure.eventstore.recorder import TraceMapper, TraceRecorder
from pentrace.infrastructure.storage.layout import DataRoot
from pentrace.infrastructure.trace.durability import Durability

__all__ = ["Factory", "TraceRecorder"]

DATA_ROOT: Final = "PENTRACE_DATA_ROOT"
PROJECT: Final = "PENTRACE_PROJECT"
AGENT: Final = "PENTRACE_AGENT"
DURABILITY: Final = "PENTRACE_DURABILITY"
LOCK_WAIT: Final = "PENTRACE_LOCK_WAIT"


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Factory(InfrastructureFactory[TrackingRecorder]):
    """Builds the trace recorder and mapper from the environment (see the module docstring)."""

    def __init__(
        self, env: Environment | EnvType | None, *, clock: Callable[[], datetime] = _utc_now
    ) -> None:
        super().__init__(env)
        self.clock = clock
        self._recorder: TraceRecorder | None = None

    def mapper(
        self,
        transcoder: Transcoder | None = None,
        mapper_class: type[Mapper[Any]] | None = None,
    ) -> Mapper[Any]:
        """A :class:`TraceMapper`, unless a class or MAPPER_TOPIC names another."""
        if mapper_class is None and not self.env.get(self.MAPPER_TOPIC):
            mapper_class = TraceMapper
        return super().mapper(transcoder=transcoder, mapper_class=mapper_class)

    def aggregate_recorder(self, purpose: str = "events") -> TraceRecorder:
        """The trace recorder; traces keep no snapshots."""
        if purpose != "events":
            raise NotSupportedError(
                f"the trace store keeps only session events, not {purpose!r} "
                "(aggregate state is small, rebuild from the trace instead)"
            )
        if self._recorder is None:
            self._recorder = TraceRecorder(
                self._data_root(),
                self._required(PROJECT),
                self._required(AGENT),
                durability=self._durability(),
                wait=self._wait(),
                clock=self.clock,
            )
        return self._recorder

    def application_recorder(self) -> TraceRecorder:
        """The same trace recorder (its notification methods say to use the ledger)."""
        return self.aggregate_recorder()

    def tracking_recorder(
        self, tracking_recorder_class: type[TrackingRecorder] | None = None
    ) -> TrackingRecorder:
        """Not kept in traces: the ledger implements tracking."""
        raise NotSupportedError("traces keep no tracking records; use the ledger")

    def process_recorder(self) -> ProcessRecorder:
        """Not kept in traces: the ledger implements process recording."""
        raise NotSupportedError("traces keep no tracking records; use the ledger")

    def close(self) -> None:
        """Close the recorder's writers and release the session locks."""
        if self._recorder is not None:
            self._recorder.close()
        super().close()

    def _required(self, key: str) -> str:
        value = self.env.get(key)
        if not value:
            raise ConfigError(
                f"the trace store needs {key}, found it unset",
                hint=f"set {key} in the application's environment",
            )
        return value

    def _data_root(self) -> DataRoot:
        configured = self.env.get(DATA_ROOT)
        if configured:
            return DataRoot(Path(configured).expanduser().absolute())
        return DataRoot.from_env(self.env)

    def _durability(self) -> Durability:
        value = self.env.get(DURABILITY, Durability.PER_REQUEST.value)
        try:
            return Durability(value)
        except ValueError:
            choices = ", ".join(d.value for d in Durability)
            raise ConfigError(
                f"{DURABILITY} must be one of {choices}, found {value!r}",
                hint=f"set {DURABILITY}=per_request (the default)",
            ) from None

    def _wait(self) -> float | None:
        value = self.env.get(LOCK_WAIT)
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            raise ConfigError(
                f"{LOCK_WAIT} must be a number of seconds, found {value!r}",
                hint=f"unset {LOCK_WAIT} to fail at once on a locked session",
            ) from None
