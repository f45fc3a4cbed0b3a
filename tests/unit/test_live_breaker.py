"""The live path's circuit breaker, on a clock stepped by hand."""

from __future__ import annotations

from pentrace.infrastructure.ledger.live.writer import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_it_opens_after_the_threshold_and_reports_that_once() -> None:
    breaker = CircuitBreaker(threshold=3, base_seconds=1, max_seconds=8, clock=Clock())
    assert [breaker.failed() for _ in range(3)] == [False, False, True]
    assert breaker.is_open
    assert breaker.allow() is False
    assert breaker.skipped == 1


def test_each_failed_trial_doubles_the_pause_up_to_the_cap() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, base_seconds=1, max_seconds=4, clock=clock)
    breaker.failed()
    pauses = []
    for _ in range(4):
        clock.now += breaker.pause_seconds
        assert breaker.allow()  # the trial write after the pause
        assert breaker.failed() is False  # still open: no second "opened" report
        pauses.append(breaker.pause_seconds)
    assert pauses == [2, 4, 4, 4]


def test_after_a_pause_one_trial_goes_through_and_the_rest_wait_for_its_outcome() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, base_seconds=1, clock=clock)
    breaker.failed()
    assert breaker.paused()
    clock.now = 1.0
    assert not breaker.paused()  # asking does not start the trial
    assert breaker.allow()
    assert breaker.paused()
    assert breaker.allow() is False
    assert breaker.skipped == 3


def test_a_working_trial_closes_it_and_reports_that_once() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, base_seconds=1, clock=clock)
    breaker.failed()
    clock.now = 1.0
    assert breaker.allow()
    assert breaker.succeeded() is True
    assert breaker.succeeded() is False
    assert not breaker.is_open
    assert breaker.pause_seconds == 0


def test_a_success_between_failures_resets_the_count() -> None:
    breaker = CircuitBreaker(threshold=2, clock=Clock())
    breaker.failed()
    breaker.succeeded()
    assert breaker.failed() is False
    assert not breaker.is_open
