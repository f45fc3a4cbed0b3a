"""The trace as an eventsourcing event store: application, mapper, recorder, recording setup."""
