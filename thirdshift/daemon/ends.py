"""How each Run a daemon started ended, in its Activity log; and the issues that wait a while
because their Run stopped before it was recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable

from thirdshift.daemon.follow import ActiveRun
from thirdshift.daemon.parts import DaemonParts, Limits
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.errors import ThirdshiftError
from thirdshift.run_states import RunKind
from thirdshift.runs import RunOutcome
from thirdshift.store.retry import retrying


class RunEnds:
    """Writes each Run's end to the Activity log. A Run stopped before it was recorded (a
    pre-flight problem, kept work it cannot push) would fail the same way if tried again at
    once, so its issue cools off, longer each time, until a Run of it is recorded. Shared by
    the daemon's Runs (threads) and its queue."""

    def __init__(self, parts: DaemonParts, limits: Limits, stop: threading.Event) -> None:
        self._store, self._activity, self._clock = parts.store, parts.activity, parts.clock
        self._limits, self._stop = limits, stop
        self._lock = threading.Lock()
        # (repository, issue) -> (failures before a record, not before this monotonic time)
        self._cooling: dict[tuple[str, int | None], tuple[int, float]] = {}

    def cooling(self, key: tuple[str, int | None]) -> bool:
        """Whether the issue still waits before another Run of it may start."""
        with self._lock:
            known = self._cooling.get(key)
        return known is not None and known[1] > self._clock.monotonic()

    def write(self, active: ActiveRun, outcome: RunOutcome, say: Callable[[str], None]) -> None:
        """The Run's end in the Activity log; one the store cannot take is a warning on the
        Run's progress lines (``say``)."""
        poll, pickup = active.poll, active.pickup
        if pickup.architect:
            try:
                self._architect_ended(poll, outcome)
            except ThirdshiftError as error:
                say(f"warning: could not write the Architect run's end: {error}")
            return
        try:
            # Tried again while the store is away: the Run's end is in its record, and the
            # Activity log must say how it ended, not that it could not tell.
            retrying(
                lambda: self._ended(poll, pickup.issue, outcome),
                seconds=self._limits.store_wait_seconds,
                sleep=self._clock.sleep,
                monotonic=self._clock.monotonic,
            )
        except ThirdshiftError as error:
            say(f"warning: could not write the Run's end: {error}")

    def _architect_ended(self, poll: RepositoryPoll, outcome: RunOutcome) -> None:
        repository = poll.repository()
        why, status = outcome.cause, outcome.exit_code
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

    def _ended(self, poll: RepositoryPoll, number: int, outcome: RunOutcome) -> None:
        repository = poll.repository()
        key = (poll.full_name, number)
        error, status = outcome.cause, outcome.exit_code
        if outcome.not_claimed:
            self._activity.line(
                "skip",
                f"not claimed: {error or 'another Run holds it'}",
                repository=repository,
                issue_number=number,
            )
            return
        run = self._store.get_run(outcome.run_id) if outcome.run_id is not None else None
        if run is None:
            if self._stop.is_set():
                message = f"the Run stopped before it was recorded: {error or 'interrupted'}"
            else:
                wait = self._cool(key)
                message = (
                    f"the Run stopped before it was recorded: {error or f'exit {status}'}; "
                    f"the issue is tried again in {wait:.0f}s"
                )
            self._activity.line("end", message, repository=repository, issue_number=number)
            return
        with self._lock:
            self._cooling.pop(key, None)
        what = "Spec run" if run.kind == RunKind.SPEC else "Run"
        message = f"{what} {run.id} ended {run.state}" + (f": {run.cause}" if run.cause else "")
        self._activity.line(
            "end", message, repository=repository, issue_number=number, run_id=run.id
        )

    def _cool(self, key: tuple[str, int | None]) -> float:
        """The issue waits, twice as long as the last time (at most an hour): how long."""
        with self._lock:
            tries = self._cooling.get(key, (0, 0.0))[0] + 1
            wait: float = min(self._limits.poll_seconds * 2**tries, 3600.0)
            self._cooling[key] = (tries, self._clock.monotonic() + wait)
        return wait
