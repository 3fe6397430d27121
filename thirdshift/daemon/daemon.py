"""The daemon: polls each repository on a schedule, starts Runs side by side within the limits,
and stops cleanly.

A Run executes in a thread of its own with its own interrupt, its own clock (so its salvage
keeps its own time for GitHub's retries) and its own Worktree and process tree; the Lease in the
database decides which daemon runs an issue, so any number of daemons may share one database.
APScheduler drives the polls (one job per repository, with jitter) and the reaper; ``once``
runs a single cycle without it, for cron and tests.

Starting, queueing, stopping and ending Runs share one lock and one table of active Runs, and
read as one state machine here; what starts a Run is the ``RunStarter`` (``ports``), how the
daemon follows one is ``follow``, how it ended is written by ``ends``, the Architect schedule is
``schedule``, and what ``thirdshift status`` shows is ``snapshot``.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Mapping

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from thirdshift.daemon.ends import RunEnds
from thirdshift.daemon.follow import ActiveRun, follow
from thirdshift.daemon.owners import OwnerWatch
from thirdshift.daemon.parts import DaemonParts, Limits
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.daemon.poll_jobs import PollJobs
from thirdshift.daemon.ports import RunWatch
from thirdshift.daemon.schedule import ArchitectSchedule, NextArchitectRun
from thirdshift.daemon.snapshot import Snapshots, StateSources, Work
from thirdshift.daemon.state import DaemonProcess, DaemonState
from thirdshift.errors import ThirdshiftError
from thirdshift.issue_url import IssueRef
from thirdshift.records import Repository
from thirdshift.runs import RunOutcome, RunRequest

PUBLISH_SECONDS = 5.0
"""How often a serving daemon writes its state for ``thirdshift status``."""


class Daemon:
    """Runs what the polls of the repositories it watches find. ``shown``: what its state
    shows besides its work, and where it goes; ``architect_schedules``: each repository's
    Architect schedule, by the name it is polled under."""

    def __init__(
        self,
        parts: DaemonParts,
        limits: Limits,
        stop: threading.Event,
        *,
        shown: StateSources | None = None,
        architect_schedules: Mapping[str, NextArchitectRun] | None = None,
    ) -> None:
        self._parts, self._limits, self._stop = parts, limits, stop
        self._starter, self._activity, self._clock = parts.starter, parts.activity, parts.clock
        self._progress = parts.progress
        shown = shown or StateSources()
        started_at = self._clock.now()
        self._architect = ArchitectSchedule(architect_schedules or {}, parts.store, started_at)
        process = DaemonProcess(shown.name, os.getpid(), started_at)
        self._shown = Snapshots(shown, process, self._clock, self._architect, self._progress)
        self._ends = RunEnds(parts, limits, stop)
        self._jobs: PollJobs | None = None  # while serving
        # Replaced whole, never changed in place: other threads iterate it as the owners' refresh
        # adds and drops repositories.
        self._polls: list[RepositoryPoll] = []
        self._owners: OwnerWatch | None = None
        self._lock = threading.Lock()
        self._active: dict[tuple[str, int | None], ActiveRun] = {}
        self._queue: deque[tuple[RepositoryPoll, Pickup]] = deque()
        self._failures = 0

    def watch(self, poll: RepositoryPoll) -> None:
        """Poll this repository too (before ``once`` or ``serve``)."""
        self._polls = [*self._polls, poll]

    def watch_owners(self, owners: OwnerWatch) -> None:
        """Poll every repository ``owners`` finds, now and after each of its refreshes (every
        ``owner_refresh_seconds`` while serving); a ThirdshiftError when its first listing
        fails."""
        self._owners = owners
        for poll in owners.refresh().started:
            self.watch(poll)

    # -- what polls ask --------------------------------------------------------------------

    def running_here(self, full_name: str, number: int | None) -> bool:
        with self._lock:
            return (full_name, number) in self._active

    def stop_here(self, full_name: str, number: int, reason: str) -> None:
        with self._lock:
            active = self._active.get((full_name, number))
        if active is not None and not active.interrupt.is_set():
            active.reason = reason
            self._activity.line(
                "stop",
                f"stopping its Run: {reason}",
                repository=active.poll.repository(),
                issue_number=number,
            )
            active.interrupt.set()

    def wake(self, full_name: str, why: str) -> bool:
        """Poll ``full_name`` now, because ``why`` (a webhook delivery) says it changed; the
        poll reads GitHub as always and believes nothing of the delivery. Once deliveries
        arrive for it, the repository's scheduled polls slow to the backstop interval. False,
        said in the Activity log, when this daemon does not watch the repository."""
        poll = next((p for p in self._polls if p.full_name.lower() == full_name.lower()), None)
        if poll is None:
            self._activity.line("webhook", f"{why} ignored: this daemon does not watch {full_name}")
            return False
        jobs = self._jobs
        if jobs is None:  # one cycle (--once), or stopping: no poll comes of it
            self._progress(f"{poll.full_name}: {why}; not serving, so no poll comes of it")
            return True
        self._progress(f"{poll.full_name}: {why}; polling it now")
        jobs.slow_to_backstop(poll)
        jobs.soon(poll, 0.0, "wake")
        return True

    # -- what ``thirdshift status`` shows ------------------------------------------------------

    def snapshot(self, *, stopped: bool = False) -> DaemonState:
        """What this daemon is doing now."""
        jobs = self._jobs
        with self._lock:
            work = Work.of(self._queue, self._active.values())
        next_polls = {}
        for poll in self._polls:
            next_polls[poll.full_name] = jobs.next_poll(poll.full_name) if jobs else None
        return self._shown.take(work, next_polls, stopping=self._stop.is_set(), stopped=stopped)

    def _publish_state(self, *, stopped: bool = False) -> None:
        self._shown.publish(lambda: self.snapshot(stopped=stopped))

    # -- one cycle (cron, tests) -----------------------------------------------------------

    def once(self) -> int:
        """Poll every repository once, run everything found (within the limits, queued), wait
        for those Runs, and return 0, or 1 when a poll or a Run failed."""
        with self._lock:
            self._failures = 0
        for poll in self._polls:
            self._poll(poll)
        while True:
            self._start_queued()
            with self._lock:
                threads = [a.thread for a in self._active.values() if a.thread is not None]
                waiting = bool(self._queue)
            if not threads and not waiting:
                break
            for thread in threads:
                thread.join(timeout=1)
            if self._stop.is_set():
                self._stop_runs()
                break
        self._publish_state(stopped=True)
        return 1 if self._failures else 0

    # -- for ever --------------------------------------------------------------------------

    def serve(self) -> int:
        """Poll on a schedule until ``stop`` is set; then take no new work, stop the Runs (each
        saves its work as a Failed run) and return 0."""
        scheduler, self._jobs = self._scheduled()
        scheduler.start()
        publisher = threading.Thread(
            target=self._publish_until_stopped, name="thirdshift-state", daemon=True
        )
        publisher.start()
        self._activity.line("start", f"daemon watching {self._watching()}")
        try:
            while not self._stop.wait(1):
                pass
        finally:
            self._activity.line("stop", "daemon stopping: no new work; saving the running Runs")
            self._publish_state()
            # A poll still running publishes the state as it ends, which asks the scheduler
            # for its next runs; shutdown holds the scheduler's lock while it waits for that
            # poll, so the poll must not ask it (it would wait on shutdown, and shutdown on it).
            self._jobs = None
            scheduler.shutdown(wait=True)
            self._stop_runs()
            publisher.join(timeout=PUBLISH_SECONDS + 1)
            self._publish_state(stopped=True)
        return 0

    def _watching(self) -> str:
        """What the daemon watches, for its first line: the repositories (the first ten when
        there are more) and the owners."""
        names = [p.full_name for p in self._polls]
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        if self._owners is None:
            return shown
        owners = ", ".join(self._owners.owners)
        return f"{len(names)} repositories ({shown or 'none yet'}), every one of {owners}"

    def _scheduled(self) -> tuple[BackgroundScheduler, PollJobs]:
        """The polls (one job a repository, with jitter), the owners' listing and the reaper,
        on a scheduler."""
        # One worker: the polls share one GitHub adapter, and PyGithub's connection is not
        # thread-safe. A poll is a handful of (mostly 304) requests, so they queue briefly.
        scheduler = BackgroundScheduler(
            timezone="UTC", executors={"default": ThreadPoolExecutor(max_workers=1)}
        )
        jobs = PollJobs(scheduler, self._poll, self._limits, self._activity)
        for index, poll in enumerate(self._polls):
            # The first polls are spread a little, not all at once.
            jobs.add(poll, min(index * 0.2, 5))
        if self._owners is not None:
            scheduler.add_job(
                self._refresh_owners,
                IntervalTrigger(
                    seconds=self._limits.watch_times.owner_refresh_seconds,
                    jitter=min(5.0, self._limits.watch_times.owner_refresh_seconds / 10),
                ),
                id="owners",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
            )
        scheduler.add_job(
            self._reap,
            IntervalTrigger(seconds=self._limits.reap_seconds, jitter=1),
            id="reaper",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,  # it may wait behind a poll on the one worker
        )
        return scheduler, jobs

    def _refresh_owners(self) -> None:
        """The owners' repositories listed again: a new one is polled from now on, one gone
        (archived, deleted, out of the token's reach, excluded) is polled no more; its Run in
        flight, if any, goes on to its end."""
        owners, jobs = self._owners, self._jobs
        if owners is None or jobs is None or self._stop.is_set():
            return
        try:
            changes = owners.refresh()
        except ThirdshiftError as error:
            self._progress(
                f"could not list the repositories of {', '.join(owners.owners)}: {error}"
            )
            return
        for poll in changes.started:
            self.watch(poll)
            jobs.add(poll, 0.0)
            self._activity.line("owner", f"now watching {poll.full_name}: a new repository found")
        for full_name in changes.stopped:
            self._polls = [p for p in self._polls if p.full_name != full_name]
            jobs.remove(full_name)
            with self._lock:
                self._queue = deque(e for e in self._queue if e[0].full_name != full_name)
            self._activity.line("owner", f"no longer watching {full_name}: it left the listing")

    def _publish_until_stopped(self) -> None:
        while True:
            self._publish_state()
            if self._stop.wait(PUBLISH_SECONDS):
                return

    # -- jobs ------------------------------------------------------------------------------

    def _reap(self) -> None:
        for poll in self._polls:
            try:
                poll.reap()
            except ThirdshiftError as error:
                self._progress(f"{poll.full_name}: could not look for crashed Runs: {error}")

    def _poll(self, poll: RepositoryPoll, fresh: bool = False) -> None:
        """One poll (``fresh``: asking its owner's listing again); a failure is logged and the
        next poll tries again: never fatal. What it finds replaces what an earlier poll of the
        repository left queued; a Run under its Lease checks again that the issue is still what
        the poll saw."""
        if self._stop.is_set():
            return
        try:
            pickups = poll(fresh=fresh)
            if self._architect.due(poll, self._clock.now()):  # Ready issues first
                pickups = [*pickups, Pickup(None, architect=True)]
        except Exception as error:  # a poll must never take the daemon down
            with self._lock:
                self._failures += 1
            self._shown.polled(poll.full_name, error)
            self._activity.line(
                "poll",
                f"the poll failed and is tried again next cycle: {error}",
                repository=_repository_or_none(poll),
            )
            return
        self._shown.polled(poll.full_name)
        jobs = self._jobs
        settles = poll.settles_in(self._clock.monotonic()) if jobs is not None else None
        if jobs is not None and settles is not None:
            # An issue still settling is looked at again as it settles, not a whole (perhaps
            # backstop) interval later.
            jobs.soon(poll, settles + 0.5, "settle")
        with self._lock:
            kept = [entry for entry in self._queue if entry[0] is not poll]
            self._queue = deque(kept + [(poll, pickup) for pickup in pickups])
        self._start_queued()
        self._publish_state()  # a person asking now sees this poll and what it started

    def _start_queued(self) -> None:
        with self._lock:
            while self._queue and not self._stop.is_set():
                index = self._fits()
                if index is None:
                    return
                poll, pickup = self._queue[index]
                del self._queue[index]
                key = (poll.full_name, pickup.number)
                if key in self._active or self._ends.cooling(key):
                    continue
                active = ActiveRun(poll, pickup, self._clock.now())
                if pickup.architect:  # the next one is due at the schedule's next time
                    self._architect.started(poll.full_name, active.started_at)
                active.thread = threading.Thread(
                    target=self._run,
                    args=(active,),
                    name=f"run {poll.full_name}#{pickup.number}",
                    daemon=True,
                )
                self._active[key] = active
                active.thread.start()

    def _fits(self) -> int | None:
        """The first queued pickup the limits allow now (called with the lock held)."""
        if len(self._active) >= self._limits.max_runs:
            return None
        per_repository: dict[str, int] = {}
        for key in self._active:
            if key[1] is not None:  # an Architect run holds up no Run of its repository
                per_repository[key[0]] = per_repository.get(key[0], 0) + 1
        for index, (poll, pickup) in enumerate(self._queue):
            # An Architect run changes no branch: it holds up no Run of its repository (only
            # a slot of max_runs), and none of them holds it up.
            if pickup.architect or (
                per_repository.get(poll.full_name, 0) < self._limits.max_runs_per_repository
            ):
                return index
        return None

    # -- a Run, on its own thread ----------------------------------------------------------

    def _run(self, active: ActiveRun) -> None:
        """The Run to its end, said in the Activity log; then a slot is free."""
        prefix = self._prefix(active)

        def say(line: str) -> None:
            self._progress(prefix + line)

        try:
            outcome = follow(active, lambda watch: self._start(active, watch), say)
            if not (outcome.succeeded or outcome.not_claimed):
                with self._lock:
                    self._failures += 1
            self._ends.write(active, outcome, say)
        finally:
            # Only once its end is written (and its cooldown set) is the slot free: ``once``
            # returns when no Run is active, and must not return before the last end is said.
            with self._lock:
                self._active.pop(active.key, None)
        self._start_queued()  # a slot is free
        self._publish_state()

    def _start(self, active: ActiveRun, watch: RunWatch) -> RunOutcome:
        """What the pickup starts, said in the Activity log first: an Architect run, a Rescue,
        a review Repair, or a Ready issue's Run (a Spec run when it is a Spec)."""
        poll, pickup = active.poll, active.pickup
        repository = poll.repository()
        if pickup.architect:
            self._activity.line(
                "architect",
                "the Architect schedule is due; starting an Architect run",
                repository=repository,
            )
            return self._starter.architect(poll.owner, poll.name, watch)
        request = RunRequest(
            issue=self._ref(active),
            expect_ready=pickup.rescue_of is None and pickup.review_of is None,
            rescue_of=pickup.rescue_of,
            review_of=pickup.review_of,
            merge=pickup.merge,
        )
        what = "Spec run" if pickup.spec else "Run"
        if pickup.rescue_of is not None:
            self._activity.line(
                "rescue",
                f"{what} {pickup.rescue_of} crashed; starting a Rescue that continues its work",
                repository=repository,
                issue_number=pickup.issue,
                run_id=pickup.rescue_of,
            )
            return self._starter.rescue(request, watch)
        if pickup.review_of is not None:
            self._activity.line(
                "review",
                f"review feedback on the pull request of Run {pickup.review_of}; starting a "
                "review Repair",
                repository=repository,
                issue_number=pickup.issue,
                run_id=pickup.review_of,
            )
        else:
            self._activity.line(
                "pickup",
                f"picked up; starting a {what}",
                repository=repository,
                issue_number=pickup.issue,
            )
        return self._starter.pickup(request, watch)

    def _prefix(self, active: ActiveRun) -> str:
        """What the Run's progress lines start with: its issue, or its repository's Architect."""
        if active.pickup.architect:
            return f"[{active.poll.full_name} architect] "
        return f"[{self._ref(active)}] "

    def _ref(self, active: ActiveRun) -> IssueRef:
        poll = active.poll
        return IssueRef(self._parts.web_host, poll.owner, poll.name, active.pickup.issue)

    def _stop_runs(self) -> None:
        """Interrupt every Run and wait (bounded) for each to save its work."""
        with self._lock:
            self._queue.clear()
            actives = list(self._active.values())
        for active in actives:
            active.interrupt.set()
        deadline = self._clock.monotonic() + self._limits.stop_seconds
        for active in actives:
            if active.thread is not None:
                active.thread.join(timeout=max(0.0, deadline - self._clock.monotonic()))
        with self._lock:
            left = [
                f"{p.full_name} (Architect run)" if k.architect else f"{p.full_name}#{k.number}"
                for p, k in ((a.poll, a.pickup) for a in self._active.values())
            ]
        if left:
            self._progress(
                f"warning: {', '.join(left)} did not finish saving within "
                f"{self._limits.stop_seconds:g}s; their Leases expire and another daemon takes "
                "them over"
            )


def _repository_or_none(poll: RepositoryPoll) -> Repository | None:
    try:
        return poll.repository()
    except ThirdshiftError:
        return None
