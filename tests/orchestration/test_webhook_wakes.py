"""A webhook delivery wakes the poll of its repository at once (adr/0046): a serving daemon with
a ten-minute poll takes a Ready issue as soon as a delivery says it changed, slows its polls
to the backstop, ignores a repository it does not watch, and looks again at an issue still
settling as it settles."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from tests.orchestration.conftest import PR_TEXT, RunWorld
from tests.orchestration.test_daemon import DaemonWorld
from tests.support.scripted_sessions import commit_file
from thirdshift.daemon import Limits, RepositoryPoll
from thirdshift.daemon.poll_jobs import PollJobs

TEN_MINUTES = 600.0
WAKE = "webhook issues.labeled (delivery d-1)"


def until(check: Callable[[], bool], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


class Serving:
    """``dw``'s daemon serving in a thread, with a ten-minute poll and, once deliveries
    arrive, a backstop of its own."""

    def __init__(self, dw: DaemonWorld, *, backstop: float | None = 900) -> None:
        self.dw = dw
        dw.daemon = dw.daemon_of(
            dw.starter,
            max_runs=2,
            poll_seconds=TEN_MINUTES,
            poll_seconds_with_webhooks=backstop,
        )
        dw.daemon.watch(dw.poll)
        self.thread = threading.Thread(target=dw.daemon.serve, daemon=True)

    def __enter__(self) -> Serving:
        self.thread.start()
        # The first poll runs as the daemon starts; wait for it to have looked.
        assert until(lambda: self.dw.daemon.snapshot().polls[0].last_poll_at is not None)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.dw.stop.set()
        self.thread.join(60)

    def runs_of(self, number: int) -> int:
        return sum(run.issue_number == number for run in self.dw.world.store.list_runs())


@pytest.fixture
def dw(world: RunWorld) -> DaemonWorld:
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    return DaemonWorld(world)


def test_a_delivery_wakes_the_poll_and_the_issue_is_claimed_long_before_the_next_poll(
    dw: DaemonWorld,
) -> None:
    with Serving(dw) as serving:
        number = dw.ready_issue("Labelled after the first poll")
        time.sleep(0.5)
        assert serving.runs_of(number) == 0  # nothing polls for ten minutes

        assert dw.daemon.wake("acme/widgets", WAKE)

        assert until(lambda: serving.runs_of(number) == 1)
        # The scheduled poll moved out to the backstop: fifteen minutes, not ten.
        [state] = dw.daemon.snapshot().polls
        assert state.next_poll_at is not None
        assert (state.next_poll_at - datetime.now(UTC)).total_seconds() > TEN_MINUTES
    assert dw.lines("webhook") == [
        "webhook deliveries arrive for acme/widgets: it is polled every 900s from now on, as "
        "a backstop"
    ]
    assert any(line.endswith(f"{WAKE}; polling it now") for line in dw.world.lines)


def test_a_wake_that_comes_while_the_woken_poll_runs_brings_a_poll_of_its_own(
    dw: DaemonWorld,
) -> None:
    """GitHub sends several deliveries within milliseconds (a label, then a comment): one that
    comes while the poll the first asked for is still running brings another poll, so what
    changed after the first poll read GitHub is seen now, not at the backstop."""
    scheduler = BackgroundScheduler(
        timezone="UTC", executors={"default": ThreadPoolExecutor(max_workers=1)}
    )
    running, release = threading.Event(), threading.Event()
    polls: list[str] = []

    def poll(_poll: RepositoryPoll, fresh: bool) -> None:
        polls.append("poll" if fresh else "scheduled poll")
        running.set()
        release.wait(10)

    limits = Limits(2, 1, poll_seconds=600, poll_jitter_seconds=0, reap_seconds=60, stop_seconds=5)
    jobs = PollJobs(scheduler, poll, limits, dw.activity)
    scheduler.start()
    try:
        jobs.soon(dw.poll, 0.0, "wake")
        assert running.wait(10)
        jobs.soon(dw.poll, 0.0, "wake")  # the comment's delivery, during the first poll
        time.sleep(0.5)  # the scheduler hands it on while the first poll still runs
        release.set()
        assert until(lambda: len(polls) == 2, seconds=10)
    finally:
        release.set()
        scheduler.shutdown(wait=True)


def test_the_name_a_delivery_gives_is_matched_without_case(dw: DaemonWorld) -> None:
    with Serving(dw) as serving:
        number = dw.ready_issue("Named otherwise")
        assert dw.daemon.wake("ACME/Widgets", WAKE)
        assert until(lambda: serving.runs_of(number) == 1)


def test_a_delivery_for_a_repository_not_watched_is_ignored_with_one_line(
    dw: DaemonWorld,
) -> None:
    with Serving(dw) as serving:
        number = dw.ready_issue("Not woken")
        assert not dw.daemon.wake("acme/elsewhere", WAKE)
        time.sleep(1)
        assert serving.runs_of(number) == 0
    assert dw.lines("webhook") == [f"{WAKE} ignored: this daemon does not watch acme/elsewhere"]


def test_without_a_webhook_secret_a_wake_polls_but_the_polls_keep_their_interval(
    dw: DaemonWorld,
) -> None:
    with Serving(dw, backstop=None) as serving:
        number = dw.ready_issue("Woken by hand")
        assert dw.daemon.wake("acme/widgets", WAKE)
        assert until(lambda: serving.runs_of(number) == 1)
    assert dw.lines("webhook") == []


def test_an_issue_still_settling_when_woken_is_taken_as_it_settles(world: RunWorld) -> None:
    """The delivery comes as the label lands, before the settle time: the poll passes the
    issue over, and looks again as it settles rather than at the (backstop) interval."""
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    dw = DaemonWorld(world, settle_seconds=1)
    with Serving(dw) as serving:
        number = dw.ready_issue("Just labelled")
        assert dw.daemon.wake("acme/widgets", WAKE)
        assert until(lambda: any("changed recently" in line for line in dw.lines("pass-over")))
        dw.poll_clock.advance(1)  # the settle time passes, as far as the poll can tell
        assert until(lambda: serving.runs_of(number) == 1, seconds=10)
