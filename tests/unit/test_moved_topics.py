"""Topics stored before the session modules moved into ``domain/session/`` resolve (ADR 0029)."""

from __future__ import annotations

from eventsourcing.utils import get_topic, resolve_topic

from pentrace.domain.session.aggregate import Session
from pentrace.domain.session.events import EVENT_CLASSES, RequestBegan


def test_the_aggregate_topic_of_the_old_layout_resolves_to_the_moved_class() -> None:
    assert resolve_topic("pentrace.domain.session:Session") is Session
    assert get_topic(Session) == "pentrace.domain.session.aggregate:Session"


def test_every_event_topic_of_the_old_layout_resolves_to_its_moved_class() -> None:
    for cls in EVENT_CLASSES:
        assert resolve_topic(f"pentrace.domain.session_events:{cls.__qualname__}") is cls
    assert resolve_topic("pentrace.domain.session_events:RequestBegan") is RequestBegan
