"""The scheduler's jobs that poll: one interval job a repository, at ``poll_seconds`` or, once
webhook deliveries arrive, at the backstop interval (adr/0046); and one-shot polls beside them,
for a delivery's wake and for an issue as it settles."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.parts import Limits
from thirdshift.daemon.poll import RepositoryPoll

EXTRA_POLLS = ("wake", "settle")
"""Why a one-shot poll is asked for; one may wait per repository and reason."""


class PollJobs:
    """The poll jobs of ``scheduler``, each running ``run_poll``."""

    def __init__(
        self,
        scheduler: BackgroundScheduler,
        run_poll: Callable[[RepositoryPoll], None],
        limits: Limits,
        activity: ActivityLog,
    ) -> None:
        self._scheduler = scheduler
        self._run_poll = run_poll
        self._limits = limits
        self._activity = activity
        self._lock = threading.Lock()
        self._slowed = False  # the polls are a backstop: webhook deliveries arrive

    def add(self, poll: RepositoryPoll, first_in: float) -> None:
        """Poll ``poll`` on its interval from ``first_in`` seconds on."""
        backstop = self._limits.watch_times.poll_seconds_with_webhooks
        with self._lock:
            slowed = self._slowed
        interval = backstop if slowed and backstop is not None else self._limits.poll_seconds
        self._scheduler.add_job(
            self._run_poll,
            self._interval(interval),
            args=(poll,),
            id=f"poll:{poll.full_name}",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=datetime.now().astimezone() + timedelta(seconds=first_in),
        )

    def soon(self, poll: RepositoryPoll, delay: float, why: str) -> None:
        """One extra poll of ``poll`` after ``delay`` seconds, beside its schedule: a later ask
        for the same ``why`` replaces one still waiting, and the one scheduler worker runs it
        after any poll in progress, so news that came during a poll is seen by the next."""
        self._scheduler.add_job(
            self._run_poll,
            DateTrigger(run_date=datetime.now().astimezone() + timedelta(seconds=delay)),
            args=(poll,),
            id=f"{why}:{poll.full_name}",
            replace_existing=True,
            misfire_grace_time=None,
        )

    def slow_to_backstop(self, polls: Iterable[RepositoryPoll]) -> None:
        """Webhook deliveries arrive: every poll from now on at the backstop interval, said
        once. Nothing when webhooks are not set up."""
        backstop = self._limits.watch_times.poll_seconds_with_webhooks
        with self._lock:
            if backstop is None or self._slowed:
                return
            self._slowed = True
        for poll in polls:
            if self._scheduler.get_job(f"poll:{poll.full_name}") is not None:
                self._scheduler.reschedule_job(
                    f"poll:{poll.full_name}", trigger=self._interval(backstop)
                )
        self._activity.line(
            "webhook",
            f"webhook deliveries arrive: polls every {backstop:g}s from now on, as a backstop",
        )

    def remove(self, full_name: str) -> None:
        """No more polls of ``full_name``, scheduled or extra."""
        for why in ("poll", *EXTRA_POLLS):
            if self._scheduler.get_job(f"{why}:{full_name}") is not None:
                self._scheduler.remove_job(f"{why}:{full_name}")

    def next_poll(self, full_name: str) -> datetime | None:
        job = self._scheduler.get_job(f"poll:{full_name}")
        return job.next_run_time if job is not None else None

    def _interval(self, seconds: float) -> IntervalTrigger:
        return IntervalTrigger(seconds=seconds, jitter=self._limits.poll_jitter_seconds)
