"""Pacing under GitHub's secondary limits: how long a request waits, and the Pacer that makes
every adapter of a process wait its turn."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from github.GithubException import GithubException

from thirdshift.bootstrap.credentials import process_pacer
from thirdshift.clock import ManualClock, SystemClock
from thirdshift.errors import RateLimited
from thirdshift.github.pacing import HOUR, MARGIN, MINUTE, PaceBudget, Pacer, wait_before
from thirdshift.github.requests import Calls, Request
from thirdshift.settings import load_settings

BUDGET = PaceBudget(requests_per_minute=3, writes_per_minute=2, writes_per_hour=4)


def test_under_every_limit_a_request_goes_at_once() -> None:
    assert wait_before(100.0, [90.0, 95.0], [95.0], write=True, budget=BUDGET) == 0.0


def test_a_full_minute_of_requests_waits_for_its_oldest_to_leave_the_minute_and_a_margin() -> None:
    """GitHub counts a request as it arrives, a little after it is counted here: a second more
    than the minute, or the first request after the wait could still find it in GitHub's."""
    assert wait_before(100.0, [50.0, 70.0, 90.0], [], write=False, budget=BUDGET) == 10.0 + MARGIN


def test_requests_older_than_a_minute_no_longer_count() -> None:
    assert wait_before(100.0, [10.0, 20.0, 30.0], [], write=False, budget=BUDGET) == 0.0


def test_a_write_waits_for_the_writes_of_the_minute_but_a_read_does_not() -> None:
    writes = [80.0, 90.0]
    assert wait_before(100.0, [], writes, write=True, budget=BUDGET) == 40.0 + MARGIN
    assert wait_before(100.0, [], writes, write=False, budget=BUDGET) == 0.0


def test_a_write_waits_for_the_hours_writes_when_the_minute_has_room() -> None:
    writes = [0.0, 1000.0, 2000.0, 3000.0]  # four in the hour, none in the last minute
    assert wait_before(3500.0, [], writes, write=True, budget=BUDGET) == pytest.approx(
        0.0 + HOUR - 3500.0
    )


class Timeline:
    """A monotonic clock the test moves, and a sleep that moves it."""

    def __init__(self) -> None:
        self.at = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += seconds


def test_the_pacer_spaces_requests_to_the_budget_and_says_each_wait() -> None:
    time = Timeline()
    said: list[str] = []
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    for _ in range(7):
        pacer.before(False, time.sleep, say=said.append)
        pacer.sent()
    # Three a minute: the fourth waits for the first to leave the minute, and so on.
    assert time.slept == [MINUTE + MARGIN, MINUTE + MARGIN]
    assert (
        said
        == [
            "pacing GitHub requests: waiting 61s to stay under github_requests_per_minute (3) "
            "(GitHub's secondary limits)"
        ]
        * 2
    )


def test_the_pacer_counts_writes_as_they_go_and_holds_the_third_of_a_minute() -> None:
    time = Timeline()
    pacer = Pacer(
        PaceBudget(requests_per_minute=100, writes_per_minute=2, writes_per_hour=10),
        monotonic=time.monotonic,
    )
    for _ in range(3):
        pacer.before(True, time.sleep)
        pacer.sent()
    assert time.slept == [MINUTE + MARGIN]


def test_the_last_place_of_a_minute_goes_to_one_thread_not_to_each_that_asks_before_sending() -> (
    None
):
    """Counted when it is let go, not when it is sent: two Runs asking at once for the last
    place of the minute cannot both have it."""
    time = Timeline()
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    for _ in range(2):
        pacer.before(False, time.sleep)
        pacer.sent()
    let_go: list[float | None] = []

    def ask() -> None:
        let_go.append(pacer.before(False, time.sleep, most=0.0))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(let_go, key=lambda wait: wait is not None) == [None, MINUTE + MARGIN]


def test_each_page_after_the_first_counts_as_it_goes() -> None:
    """One call, several requests (its pages, a redirect followed): the first was counted when
    it was let go, the others as they are sent."""
    time = Timeline()
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    pacer.before(False, time.sleep)
    for _ in range(3):  # the call's three pages
        pacer.sent()
    assert pacer.before(False, time.sleep, most=0.0) == MINUTE + MARGIN


def test_a_request_that_is_never_sent_costs_no_read_of_the_budget() -> None:
    """A read is counted when it goes out (every page and retry), not when it is asked for."""
    time = Timeline()
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    for _ in range(10):
        pacer.before(False, time.sleep)
    assert time.slept == []


def test_a_wait_github_asked_for_holds_every_request_of_the_process_until_it_is_over() -> None:
    """One adapter met a rate-limit refusal: the pacer holds the others (its whole process)
    for the wait GitHub asked for, then lets them go."""
    time = Timeline()
    said: list[str] = []
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    pacer.hold(30.0)
    pacer.hold(10.0)  # a shorter ask later does not cut the first short
    pacer.before(False, time.sleep, say=said.append)
    assert time.slept == [30.0]
    assert said == ["pacing GitHub requests: waiting 30s, as GitHub's rate limit asked"]
    pacer.before(False, time.sleep)
    assert time.slept == [30.0]


def test_the_pacer_keeps_an_hour_of_writes_and_holds_the_one_past_the_hours_budget() -> None:
    time = Timeline()
    pacer = Pacer(
        PaceBudget(requests_per_minute=100, writes_per_minute=100, writes_per_hour=3),
        monotonic=time.monotonic,
    )
    for _ in range(3):
        pacer.before(True, time.sleep)
        time.at += 600  # ten minutes between writes
    pacer.before(True, time.sleep)
    assert time.slept == [HOUR - 1800]


def test_a_wait_longer_than_the_caller_may_wait_is_returned_not_waited() -> None:
    time = Timeline()
    pacer = Pacer(BUDGET, monotonic=time.monotonic)
    pacer.hold(HOUR)
    assert pacer.before(False, time.sleep, most=900) == HOUR
    assert time.slept == []


# -- through the adapter's calls ------------------------------------------------------------


class SimulatedClock(Timeline):
    """The adapter's clock: its waits move the shared time."""

    def now(self) -> datetime:
        return datetime(2026, 12, 6, tzinfo=UTC) + timedelta(seconds=self.at)

    def salvaging(self, seconds: float) -> None:
        """Waits take no time here."""


def calls(clock: SimulatedClock, pacer: Pacer, lines: list[str] | None = None) -> Calls:
    return Calls(
        "https://api.github.test",
        scrub=lambda text: text,
        progress=(lines if lines is not None else []).append,
        clock=clock,
        retries=2,
        max_rate_limit_wait=900.0,
        pacer=pacer,
    )


def refused_once(status: int, headers: dict[str, str], message: str) -> Callable[[], str]:
    answers: list[GithubException | str] = [
        GithubException(status, {"message": message}, headers),
        "served",
    ]

    def send() -> str:
        answer = answers.pop(0)
        if isinstance(answer, GithubException):
            raise answer
        return answer

    return send


READ = Request("GET", "/repos/acme/widgets", "repository acme/widgets")


def test_a_secondary_limit_refusal_holds_the_other_adapters_of_the_process() -> None:
    clock = SimulatedClock()
    pacer = Pacer(PaceBudget(), monotonic=clock.monotonic)
    refusal = refused_once(403, {"retry-after": "30"}, "You have exceeded a secondary rate limit")
    assert calls(clock, pacer).call(READ, refusal) == "served"
    assert clock.slept == [30.0]  # the refused one waited as told
    # Another adapter, whose request comes while the first still waits, waits too.
    clock.at -= 20.0
    pacer.before(False, clock.sleep)
    assert clock.slept == [30.0, 20.0]


def test_the_hourly_limits_refusal_holds_only_its_own_request() -> None:
    """The hourly budget is spent for everyone at once, and GitHub says when it resets: nothing
    is gained by holding the others, and a hold would outlive the refused Run's bound."""
    clock = SimulatedClock()
    pacer = Pacer(PaceBudget(), monotonic=clock.monotonic)
    reset = str(int(clock.now().timestamp()) + 60)
    refusal = refused_once(
        403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}, "API rate limit exceeded"
    )
    assert calls(clock, pacer).call(READ, refusal) == "served"
    clock.at -= 30.0
    pacer.before(False, clock.sleep)
    assert clock.slept == [60.0]


def test_a_turn_further_off_than_the_bound_is_a_rate_limit_naming_the_settings() -> None:
    clock = SimulatedClock()
    pacer = Pacer(
        PaceBudget(requests_per_minute=600, writes_per_minute=60, writes_per_hour=1),
        monotonic=clock.monotonic,
    )
    write = Request("POST", "/repos/acme/widgets/issues/1/labels", "issue #1 of acme/widgets")
    assert calls(clock, pacer).call(write, lambda: "labelled") == "labelled"
    with pytest.raises(RateLimited) as limited:
        calls(clock, pacer).call(write, lambda: "labelled")
    assert "github_writes_per_hour" in str(limited.value)
    assert clock.slept == []


def test_a_graphql_query_is_no_write() -> None:
    query = Request("POST", "/graphql userContentEdits", "the edits of issue #1", creates=False)
    assert not query.is_write
    assert Request("POST", "/repos/a/b/issues", "an issue").is_write


# -- one pacer a process ----------------------------------------------------------------------


def test_adapters_of_one_identity_share_a_pacer_and_other_identities_do_not(
    tmp_path: Path,
) -> None:
    settings = load_settings({"THIRDSHIFT_HOME": str(tmp_path)})
    system = SystemClock(threading.Event())
    other_system = SystemClock(threading.Event())
    a_run = process_pacer(settings, None, system)
    assert process_pacer(settings, None, other_system) is a_run  # a Run's clock, same time
    assert process_pacer(settings, 7, system) is not a_run  # an App installation of its own
    manual = ManualClock(datetime(2026, 12, 6, tzinfo=UTC))
    assert process_pacer(settings, None, manual) is not a_run  # a test's time is its own
