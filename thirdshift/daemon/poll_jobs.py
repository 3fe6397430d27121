"""The scheduler's jobs that poll: one interval job a repository, at ``poll_seconds`` or, once
webhook deliveries arrive for that repository, at the backstop interval (adr/0046); and
one-shot polls beside them, for a webhook delivery's wake and for an issue as it settles."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.parts import Limits
from thirdshift.daemon.poll import RepositoryPoll

EXTRA_POLLS = ("wake", "settle")
"""Why a one-shot poll is asked for; one may wait per repository and reason."""


class PollJobs:
    """The poll jobs of ``scheduler``, each running ``run_poll`` (with whether to look afresh:
    the one-shot polls do)."""

    def __init__(
        self,
        scheduler: BackgroundScheduler,
        run_poll: Callable[[RepositoryPoll, bool], None],
        limits: Limits,
        activity: ActivityLog,
    ) -> None:
        self._scheduler = scheduler
        self._run_poll = run_poll
        self._limits = limits
        self._activity = activity
        self._lock = threading.Lock()
        # The repositories (lower case) whose polls are a backstop: webhook deliveries arrive.
        self._slowed: set[str] = set()

    def add(self, poll: RepositoryPoll, first_in: float) -> None:
        """Poll ``poll`` on its interval from ``first_in`` seconds on."""
        with self._lock:
            slowed = poll.full_name.lower() in self._slowed
        self._scheduler.add_job(
            self._run_poll,
            self._interval(self._backstop() if slowed else self._limits.poll_seconds),
            args=(poll, False),
            id=f"poll:{poll.full_name}",
            max_instances=2,
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
            args=(poll, True),  # news may have come: an owner's listing is asked afresh
            id=f"{why}:{poll.full_name}",
            replace_existing=True,
            misfire_grace_time=None,
            # One may run while the next waits: an ask that comes during the poll it asked for
            # must not be refused as a second instance.
            max_instances=2,
        )

    def slow_to_backstop(self, poll: RepositoryPoll) -> None:
        """Webhook deliveries arrive for ``poll``'s repository: its scheduled polls from now on
        at the backstop interval, said once. Other repositories keep theirs (a hook may be on
        one repository only). Nothing when webhooks are not set up."""
        if self._limits.watch_times.poll_seconds_with_webhooks is None:
            return
        with self._lock:
            if poll.full_name.lower() in self._slowed:
                return
            self._slowed.add(poll.full_name.lower())
        backstop = self._backstop()
        try:
            self._scheduler.reschedule_job(
                f"poll:{poll.full_name}", trigger=self._interval(backstop)
            )
        except JobLookupError:
            return  # no longer watched
        self._activity.line(
            "webhook",
            f"webhook deliveries arrive for {poll.full_name}: it is polled every {backstop:g}s "
            "from now on, as a backstop",
        )

    def _backstop(self) -> float:
        # Never faster than the polls without webhooks.
        backstop = self._limits.watch_times.poll_seconds_with_webhooks
        return max(backstop or 0.0, self._limits.poll_seconds)

    def remove(self, full_name: str) -> None:
        """No more polls of ``full_name``, scheduled or extra."""
        for why in ("poll", *EXTRA_POLLS):
            # A one-shot job leaves the store by itself as it runs, perhaps in between.
            with contextlib.suppress(JobLookupError):
                self._scheduler.remove_job(f"{why}:{full_name}")
        with self._lock:
            self._slowed.discard(full_name.lower())

    def next_poll(self, full_name: str) -> datetime | None:
        job = self._scheduler.get_job(f"poll:{full_name}")
        return job.next_run_time if job is not None else None

    def _interval(self, seconds: float) -> IntervalTrigger:
        return IntervalTrigger(seconds=seconds, jitter=self._limits.poll_jitter_seconds)
