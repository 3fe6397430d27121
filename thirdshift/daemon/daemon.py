"""The daemon: polls each repository on a schedule, starts Runs side by side within the limits,
and stops cleanly.

A Run executes in a thread of its own with its own interrupt, its own clock (so its salvage
keeps its own time for GitHub's retries) and its own Worktree and process tree; the Lease in the
database decides which daemon runs an issue, so any number of daemons may share one database.
APScheduler drives the polls (one job per repository, with jitter) and the reaper; ``once``
runs a single cycle without it, for cron and tests.

About 650 lines: starting, queueing, stopping and ending Runs share one lock and one table of
active Runs, and read best as one state machine; polling, pauses, state and Activity are
modules of their own.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from thirdshift.clock import Clock
from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.daemon.state import DaemonState, PauseState, PollState, RunningState
from thirdshift.errors import ThirdshiftError
from thirdshift.issue_url import IssueRef
from thirdshift.records import Repository
from thirdshift.runs import ARCHITECT_ISSUE, RunOutcome, RunRequest
from thirdshift.store import Store
from thirdshift.store.retry import retrying

RunStarter = Callable[
    [
        RunRequest,
        threading.Event,
        Callable[[], str | None],
        Callable[[str], None],
        Callable[[int], None],
    ],
    RunOutcome,
]
"""Runs one issue to its end and returns its outcome: given the request, the Run's own
interrupt, what says why it was stopped (None: a signal), where its progress lines go, and
what learns the Run's id once it is recorded (its own id, never a newer Run's on the issue)."""

ArchitectStarter = Callable[
    [str, str, threading.Event, Callable[[str], None], Callable[[int], None]], RunOutcome
]
"""Runs one Architect run on ``owner``, ``name`` and returns its outcome (``skipped`` says
why), given its interrupt, where its progress lines go and what learns its Run's id."""

NextArchitectRun = Callable[[datetime], datetime | None]
"""A repository's Architect schedule: the first time it asks for a run after the one given."""


@dataclass
class _Active:
    """A Run this daemon executes now."""

    poll: RepositoryPoll
    pickup: Pickup
    started_at: datetime
    interrupt: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None
    thread: threading.Thread | None = None
    run_id: int | None = None


PUBLISH_SECONDS = 5.0
"""How often a serving daemon writes its state for ``thirdshift status``."""


@dataclass(frozen=True)
class Limits:
    max_runs: int
    max_runs_per_repository: int
    poll_seconds: float
    poll_jitter_seconds: float
    reap_seconds: float
    stop_seconds: float
    """How long a stopping daemon waits for its Runs to save their work."""
    store_wait_seconds: float = 120.0
    """How long the end of a Run is tried again while the store is away
    (``salvage_wait_seconds``)."""


class Daemon:
    def __init__(
        self,
        *,
        web_host: str,
        start_run: RunStarter,
        store: Store,
        activity: ActivityLog,
        limits: Limits,
        clock: Clock,
        stop: threading.Event,
        progress: Callable[[str], None],
        name: str = "thirdshift",
        scrub: Callable[[str], str] = str,
        publish: Callable[[DaemonState], None] = lambda _state: None,
        pauses: Callable[[], tuple[PauseState, ...]] = tuple,
        rate_limit: Callable[[], int | None] = lambda: None,
        start_architect: ArchitectStarter | None = None,
        architect_schedules: Mapping[str, NextArchitectRun] | None = None,
    ) -> None:
        self._start_architect = start_architect
        self._schedules = dict(architect_schedules or {})
        # Repository -> when its schedule next asks for an Architect run (due from then on,
        # until one starts): computed from the daemon's start, so a restart never runs the
        # passes it missed while it was down.
        self._architect_next: dict[str, datetime | None] = {}
        self._name = name
        self._scrub = scrub
        self._publish = publish
        self._pauses = pauses
        self._rate_limit = rate_limit
        self._started_at = clock.now()
        self._polled: dict[str, tuple[datetime, str | None]] = {}
        self._scheduler: BackgroundScheduler | None = None
        self._polls: list[RepositoryPoll] = []
        self._web_host = web_host
        self._start_run = start_run
        self._store = store
        self._activity = activity
        self._limits = limits
        self._clock = clock
        self._stop = stop
        self._progress = progress
        self._lock = threading.Lock()
        self._active: dict[tuple[str, int], _Active] = {}
        self._queue: deque[tuple[RepositoryPoll, Pickup]] = deque()
        self._failures = 0
        # (repository, issue) -> (failures before a record, not before this monotonic time)
        self._cooling: dict[tuple[str, int], tuple[int, float]] = {}

    def watch(self, poll: RepositoryPoll) -> None:
        """Poll this repository too (before ``once`` or ``serve``)."""
        self._polls.append(poll)

    # -- what polls ask --------------------------------------------------------------------

    def running_here(self, full_name: str, number: int) -> bool:
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

    # -- what ``thirdshift status`` shows ------------------------------------------------------

    def snapshot(self, *, stopped: bool = False) -> DaemonState:
        """What this daemon is doing now."""
        scheduler = self._scheduler
        with self._lock:
            queued: dict[str, list[int]] = {}
            for poll, pickup in self._queue:
                if not pickup.architect:  # its time shows as next_architect_at
                    queued.setdefault(poll.full_name, []).append(pickup.number)
            running = tuple(
                RunningState(
                    repository=active.poll.full_name,
                    issue_number=active.pickup.number,
                    run_id=active.run_id,
                    started_at=active.started_at,
                    rescue_of=active.pickup.rescue_of,
                )
                for active in self._active.values()
            )
            polled = dict(self._polled)
        polls = []
        for poll in self._polls:
            job = scheduler.get_job(f"poll:{poll.full_name}") if scheduler else None
            last = polled.get(poll.full_name)
            polls.append(
                PollState(
                    repository=poll.full_name,
                    last_poll_at=last[0] if last else None,
                    last_poll_error=last[1] if last else None,
                    next_poll_at=job.next_run_time if job is not None else None,
                    queued=tuple(queued.get(poll.full_name, ())),
                    next_architect_at=self._next_architect(poll.full_name),
                )
            )
        return DaemonState(
            daemon=self._name,
            pid=os.getpid(),
            started_at=self._started_at,
            updated_at=self._clock.now(),
            stopping=self._stop.is_set(),
            polls=tuple(polls),
            running=running,
            pauses=self._pauses(),
            rate_limit_remaining=self._rate_limit_seen(),
            stopped=stopped,
        )

    def _publish_state(self, *, stopped: bool = False) -> None:
        try:
            self._publish(self.snapshot(stopped=stopped))
        except (OSError, ThirdshiftError) as problem:  # the display must never stop the work
            self._progress(f"warning: could not write the daemon's state: {problem}")

    def _rate_limit_seen(self) -> int | None:
        """What GitHub's last answer said of the rate limit (never a request: a stopping
        daemon must not wait on GitHub for its status)."""
        try:
            return self._rate_limit()
        except ThirdshiftError:
            return None

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
        # One worker: the polls share one GitHub adapter, and PyGithub's connection is not
        # thread-safe. A poll is a handful of (mostly 304) requests, so they queue briefly.
        scheduler = BackgroundScheduler(
            timezone="UTC", executors={"default": ThreadPoolExecutor(max_workers=1)}
        )
        now = datetime.now().astimezone()
        for index, poll in enumerate(self._polls):
            scheduler.add_job(
                self._poll,
                IntervalTrigger(
                    seconds=self._limits.poll_seconds, jitter=self._limits.poll_jitter_seconds
                ),
                args=(poll,),
                id=f"poll:{poll.full_name}",
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                # The first polls are spread a little, not all at once.
                next_run_time=now + timedelta(seconds=min(index * 0.2, 5)),
            )
        scheduler.add_job(
            self._reap,
            IntervalTrigger(seconds=self._limits.reap_seconds, jitter=1),
            id="reaper",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,  # it may wait behind a poll on the one worker
        )
        self._scheduler = scheduler
        scheduler.start()
        publisher = threading.Thread(
            target=self._publish_until_stopped, name="thirdshift-state", daemon=True
        )
        publisher.start()
        self._activity.line(
            "start",
            f"daemon watching {', '.join(p.full_name for p in self._polls)}",
        )
        try:
            while not self._stop.wait(1):
                pass
        finally:
            self._activity.line("stop", "daemon stopping: no new work; saving the running Runs")
            self._publish_state()
            # A poll still running publishes the state as it ends, which asks the scheduler
            # for its next runs; shutdown holds the scheduler's lock while it waits for that
            # poll, so the poll must not ask it (it would wait on shutdown, and shutdown on it).
            self._scheduler = None
            scheduler.shutdown(wait=True)
            self._stop_runs()
            publisher.join(timeout=PUBLISH_SECONDS + 1)
            self._publish_state(stopped=True)
        return 0

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

    def _poll(self, poll: RepositoryPoll) -> None:
        """One poll; a failure is logged and the next poll tries again: never fatal. What it
        finds replaces what an earlier poll of the repository left queued; a Run under its
        Lease checks again that the issue is still what the poll saw."""
        if self._stop.is_set():
            return
        try:
            pickups = poll()
            if self._architect_due(poll):  # Ready issues first
                pickups = [*pickups, Pickup(ARCHITECT_ISSUE, architect=True)]
        except Exception as error:  # a poll must never take the daemon down
            with self._lock:
                self._failures += 1
                # Shown by status and the status page: scrubbed like every outbound text.
                self._polled[poll.full_name] = (self._clock.now(), self._scrub(str(error)))
            self._activity.line(
                "poll",
                f"the poll failed and is tried again next cycle: {error}",
                repository=_repository_or_none(poll),
            )
            return
        with self._lock:
            self._polled[poll.full_name] = (self._clock.now(), None)
            kept = [entry for entry in self._queue if entry[0] is not poll]
            self._queue = deque(kept + [(poll, pickup) for pickup in pickups])
        self._start_queued()
        self._publish_state()  # a person asking now sees this poll and what it started

    def _next_architect(self, full_name: str) -> datetime | None:
        """When the repository's Architect schedule next asks for a run (None: no schedule)."""
        schedule = self._schedules.get(full_name)
        if schedule is None or self._start_architect is None:
            return None
        with self._lock:
            if full_name not in self._architect_next:
                self._architect_next[full_name] = schedule(self._started_at)
            return self._architect_next[full_name]

    def _architect_due(self, poll: RepositoryPoll) -> bool:
        """Whether the repository's Architect schedule asks for a run now. It stays due until
        one starts (a full daemon starts it once a slot is free) and waits, as pickups do,
        while the repository's daily budget is spent or its Harness's provider is down. Another
        daemon on the same database that already made this time's Architect run makes it not
        due here."""
        due = self._next_architect(poll.full_name)
        if due is None or self._clock.now() < due or poll.work_paused() is not None:
            return False
        latest = self._store.latest_run(poll.repository(), ARCHITECT_ISSUE)
        if latest is not None and latest.started_at >= due:
            schedule = self._schedules[poll.full_name]
            with self._lock:
                self._architect_next[poll.full_name] = schedule(latest.started_at)
            return False
        return True

    def _start_queued(self) -> None:
        with self._lock:
            while self._queue and not self._stop.is_set():
                index = self._fits()
                if index is None:
                    return
                poll, pickup = self._queue[index]
                del self._queue[index]
                key = (poll.full_name, pickup.number)
                if key in self._active:
                    continue
                cooling = self._cooling.get(key)
                if cooling is not None and cooling[1] > self._clock.monotonic():
                    continue
                active = _Active(poll, pickup, self._clock.now())
                if pickup.architect:  # the next one is due at the schedule's next time
                    schedule = self._schedules[poll.full_name]
                    self._architect_next[poll.full_name] = schedule(active.started_at)
                active.thread = threading.Thread(
                    target=self._run,
                    args=(active,),
                    name=f"run {poll.full_name}#{pickup.number}",
                    daemon=True,
                )
                self._active[(poll.full_name, pickup.number)] = active
                active.thread.start()

    def _fits(self) -> int | None:
        """The first queued pickup the limits allow now (called with the lock held)."""
        if len(self._active) >= self._limits.max_runs:
            return None
        per_repository: dict[str, int] = {}
        for key in self._active:
            if key[1] != ARCHITECT_ISSUE:
                per_repository[key[0]] = per_repository.get(key[0], 0) + 1
        for index, (poll, pickup) in enumerate(self._queue):
            # An Architect run changes no branch: it holds up no Run of its repository (only
            # a slot of max_runs), and none of them holds it up.
            if pickup.architect or (
                per_repository.get(poll.full_name, 0) < self._limits.max_runs_per_repository
            ):
                return index
        return None

    def _run(self, active: _Active) -> None:
        poll, pickup = active.poll, active.pickup
        ref = IssueRef(self._web_host, poll.owner, poll.name, pickup.number)
        prefix = f"[{ref}] "
        recorded: list[int] = []

        def progress(line: str) -> None:
            self._progress(prefix + line)

        def on_recorded(run_id: int) -> None:
            recorded.append(run_id)
            active.run_id = run_id

        if pickup.architect:
            self._architect(active)
            return
        outcome = RunOutcome("stopped", 1)
        try:
            repository = poll.repository()
            what = "Spec run" if pickup.spec else "Run"
            if pickup.rescue_of is not None:
                self._activity.line(
                    "rescue",
                    f"{what} {pickup.rescue_of} crashed; starting a Rescue that continues its work",
                    repository=repository,
                    issue_number=ref.number,
                    run_id=pickup.rescue_of,
                )
            elif pickup.review_of is not None:
                self._activity.line(
                    "review",
                    f"review feedback on the pull request of Run {pickup.review_of}; starting a "
                    "review Repair",
                    repository=repository,
                    issue_number=ref.number,
                    run_id=pickup.review_of,
                )
            else:
                self._activity.line(
                    "pickup",
                    f"picked up; starting a {what}",
                    repository=repository,
                    issue_number=ref.number,
                )
            outcome = self._start_run(
                RunRequest(
                    issue=ref,
                    expect_ready=pickup.rescue_of is None and pickup.review_of is None,
                    rescue_of=pickup.rescue_of,
                    review_of=pickup.review_of,
                    merge=pickup.merge,
                ),
                active.interrupt,
                lambda: active.reason,
                progress,
                on_recorded,
            )
        except ThirdshiftError as error:  # a local problem before the Run (disk, database)
            outcome = RunOutcome.of_error(error, recorded[-1] if recorded else None)
            progress(f"thirdshift: {error}")
        except Exception as error:  # one Run's bug must not stop the others
            outcome = RunOutcome(
                "stopped",
                1,
                run_id=recorded[-1] if recorded else None,
                cause=f"unexpected {error.__class__.__name__}: {error} (a bug in thirdshift)",
            )
            self._progress(f"{prefix}the Run stopped on an unexpected error: {error!r}")
        finally:
            with self._lock:
                self._active.pop((poll.full_name, pickup.number), None)
        if not (outcome.succeeded or outcome.not_claimed):
            with self._lock:
                self._failures += 1
        try:
            # Tried again while the store is away: the Run's end is in its record, and the
            # Activity log must say how it ended, not that it could not tell.
            retrying(
                lambda: self._ended(poll, ref, outcome),
                seconds=self._limits.store_wait_seconds,
                sleep=self._clock.sleep,
                monotonic=self._clock.monotonic,
            )
        except ThirdshiftError as error:
            self._progress(f"{prefix}warning: could not write the Run's end: {error}")
        self._start_queued()  # a slot is free
        self._publish_state()

    def _architect(self, active: _Active) -> None:
        """An Architect run its schedule asked for, to its end, in the Activity log."""
        poll = active.poll
        prefix = f"[{poll.full_name} architect] "
        recorded: list[int] = []

        def progress(line: str) -> None:
            self._progress(prefix + line)

        def on_recorded(run_id: int) -> None:
            recorded.append(run_id)
            active.run_id = run_id

        outcome = RunOutcome("stopped", 1)
        try:
            if self._start_architect is None:
                raise ThirdshiftError("this daemon starts no Architect runs")
            repository = poll.repository()
            self._activity.line(
                "architect",
                "the Architect schedule is due; starting an Architect run",
                repository=repository,
            )
            outcome = self._start_architect(
                poll.owner, poll.name, active.interrupt, progress, on_recorded
            )
        except ThirdshiftError as error:
            outcome = RunOutcome.of_error(error, recorded[-1] if recorded else None)
        except Exception as error:  # one run's bug must not stop the others
            outcome = RunOutcome(
                "stopped",
                1,
                run_id=recorded[-1] if recorded else None,
                cause=f"unexpected {error.__class__.__name__}: {error} (a bug in thirdshift)",
            )
        finally:
            with self._lock:
                self._active.pop((poll.full_name, ARCHITECT_ISSUE), None)
        try:
            self._architect_ended(poll, outcome)
        except ThirdshiftError as error:
            self._progress(f"{prefix}warning: could not write the Architect run's end: {error}")
        self._start_queued()
        self._publish_state()

    def _architect_ended(self, poll: RepositoryPoll, outcome: RunOutcome) -> None:
        repository = poll.repository()
        why, status = outcome.cause, outcome.exit_code
        if not (outcome.succeeded or outcome.not_claimed):
            with self._lock:
                self._failures += 1
        run = self._store.get_run(outcome.run_id) if outcome.run_id is not None else None
        if run is not None:
            message = f"Architect run {run.id} ended {run.state}" + (
                f": {run.cause}" if run.cause else ""
            )
            if run.published:
                message += f"; published {', '.join(f'#{n}' for n in run.published)}"
            self._activity.line("end", message, repository=repository, run_id=run.id)
        elif outcome.succeeded:
            self._activity.line(
                "skip", f"Architect run skipped: {why or 'nothing to do'}", repository=repository
            )
        else:
            self._activity.line(
                "end",
                f"the Architect run stopped before it was recorded: {why or f'exit {status}'}",
                repository=repository,
            )

    def _ended(self, poll: RepositoryPoll, ref: IssueRef, outcome: RunOutcome) -> None:
        repository = poll.repository()
        key = (poll.full_name, ref.number)
        error, status = outcome.cause, outcome.exit_code
        if outcome.not_claimed:
            self._activity.line(
                "skip",
                f"not claimed: {error or 'another Run holds it'}",
                repository=repository,
                issue_number=ref.number,
            )
            return
        run = self._store.get_run(outcome.run_id) if outcome.run_id is not None else None
        if run is None:
            if self._stop.is_set():
                message = f"the Run stopped before it was recorded: {error or 'interrupted'}"
            else:
                # A pre-flight problem, kept work it cannot push: trying again at once would
                # fail the same way, so the issue waits a while.
                with self._lock:
                    tries = self._cooling.get(key, (0, 0.0))[0] + 1
                    wait = min(self._limits.poll_seconds * 2**tries, 3600.0)
                    self._cooling[key] = (tries, self._clock.monotonic() + wait)
                message = (
                    f"the Run stopped before it was recorded: {error or f'exit {status}'}; "
                    f"the issue is tried again in {wait:.0f}s"
                )
            self._activity.line("end", message, repository=repository, issue_number=ref.number)
            return
        with self._lock:
            self._cooling.pop(key, None)
        what = "Spec run" if run.kind == "spec" else "Run"
        message = f"{what} {run.id} ended {run.state}" + (f": {run.cause}" if run.cause else "")
        self._activity.line(
            "end", message, repository=repository, issue_number=ref.number, run_id=run.id
        )

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
