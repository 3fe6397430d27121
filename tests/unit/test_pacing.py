"""Pacing under GitHub's secondary limits: how long a request waits, and the Pacer that makes
every adapter of a process wait its turn."""

from __future__ import annotations

import pytest

from thirdshift.github.pacing import HOUR, MINUTE, PaceBudget, Pacer, wait_before

BUDGET = PaceBudget(requests_per_minute=3, writes_per_minute=2, writes_per_hour=4)


def test_under_every_limit_a_request_goes_at_once() -> None:
    assert wait_before(100.0, [90.0, 95.0], [95.0], write=True, budget=BUDGET) == 0.0


def test_a_full_minute_of_requests_waits_for_its_oldest_to_leave_the_minute() -> None:
    assert wait_before(100.0, [50.0, 70.0, 90.0], [], write=False, budget=BUDGET) == 10.0


def test_requests_older_than_a_minute_no_longer_count() -> None:
    assert wait_before(100.0, [10.0, 20.0, 30.0], [], write=False, budget=BUDGET) == 0.0


def test_a_write_waits_for_the_writes_of_the_minute_but_a_read_does_not() -> None:
    writes = [80.0, 90.0]
    assert wait_before(100.0, [], writes, write=True, budget=BUDGET) == 40.0
    assert wait_before(100.0, [], writes, write=False, budget=BUDGET) == 0.0


def test_a_write_waits_for_the_hours_writes_when_the_minute_has_room() -> None:
    writes = [0.0, 1000.0, 2000.0, 3000.0]  # four in the hour, none in the last minute
    assert wait_before(3500.0, [], writes, write=True, budget=BUDGET) == pytest.approx(
        0.0 + HOUR - 3500.0
    )


class Timeline:
    """A monotonic clock the test moves, and a sleep that moves it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_pacer_spaces_requests_to_the_budget_and_says_so_once_a_minute() -> None:
    time = Timeline()
    said: list[str] = []
    pacer = Pacer(BUDGET, monotonic=time.monotonic, waiting=said.append)
    for _ in range(7):
        pacer.before("GET", time.sleep)
        pacer.sent()
    # Three a minute: the fourth waits for the first to leave the minute, and so on.
    assert time.slept == [MINUTE, MINUTE]
    assert len(said) == 2
    assert said[0] == (
        "pacing GitHub requests: waiting 60.0s to stay under github_requests_per_minute (3) "
        "(GitHub's secondary limits)"
    )


def test_the_pacer_counts_writes_as_they_go_and_holds_the_third_of_a_minute() -> None:
    time = Timeline()
    pacer = Pacer(
        PaceBudget(requests_per_minute=100, writes_per_minute=2, writes_per_hour=10),
        monotonic=time.monotonic,
    )
    for _ in range(3):
        pacer.before("POST", time.sleep)
        pacer.sent()
    assert time.slept == [MINUTE]


def test_a_request_that_is_never_sent_costs_no_read_of_the_budget() -> None:
    """A read is counted when it goes out (every page and retry), not when it is asked for."""
    time = Timeline()
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    for _ in range(10):
        pacer.before("GET", time.sleep)
    assert time.slept == []


def test_a_wait_github_asked_for_holds_every_request_of_the_process_until_it_is_over() -> None:
    """One adapter met a rate-limit refusal: the pacer holds the others (its whole process)
    for the wait GitHub asked for, then lets them go."""
    time = Timeline()
    said: list[str] = []
    pacer = Pacer(BUDGET, monotonic=time.monotonic, waiting=said.append)
    pacer.hold(30.0)
    pacer.before("GET", time.sleep)
    assert time.slept == [30.0]
    assert said == ["pacing GitHub requests: waiting 30.0s, as GitHub's rate limit asked"]
    pacer.before("GET", time.sleep)
    assert time.slept == [30.0]
