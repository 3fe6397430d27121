"""A daemon's state snapshot: what it is doing now (``DaemonState``), taken from its table of
work, each repository's last poll and its Architect schedule, for ``thirdshift status`` and
the status page; and its publishing, which never stops the work."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from thirdshift.clock import Clock
from thirdshift.daemon.follow import ActiveRun
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.daemon.schedule import ArchitectSchedule
from thirdshift.daemon.state import (
    DaemonProcess,
    DaemonState,
    HarnessHolds,
    MissingHarness,
    PauseState,
    PollState,
    RunningState,
)
from thirdshift.errors import ThirdshiftError


def _nowhere(_state: DaemonState) -> None:
    """A daemon that publishes no state (the tests', a bench's)."""


def _not_known() -> int | None:
    return None


@dataclass(frozen=True)
class StateSources:
    """What a daemon's state shows besides its own work, and where it goes: the daemon's name,
    the scrubber of what it shows, where it is published (its state file), the provider
    pauses, the Harnesses whose CLI is gone, and the rate limit GitHub's last answer left."""

    name: str = "thirdshift"
    scrub: Callable[[str], str] = str
    publish: Callable[[DaemonState], None] = _nowhere
    pauses: Callable[[], tuple[PauseState, ...]] = tuple
    rate_limit: Callable[[], int | None] = _not_known
    missing_harnesses: Callable[[], tuple[MissingHarness, ...]] = tuple


@dataclass(frozen=True)
class Work:
    """What the daemon's table held at one moment, read under its lock: the issues queued by
    repository, and the Runs it executes."""

    queued: Mapping[str, tuple[int, ...]]
    running: tuple[RunningState, ...]

    @classmethod
    def of(
        cls, queue: Iterable[tuple[RepositoryPoll, Pickup]], actives: Iterable[ActiveRun]
    ) -> Work:
        queued: dict[str, list[int]] = {}
        for poll, pickup in queue:
            if not pickup.architect:  # its time shows as next_architect_at
                queued.setdefault(poll.full_name, []).append(pickup.issue)
        running = tuple(
            RunningState(
                repository=active.poll.full_name,
                issue_number=active.pickup.number,
                run_id=active.run_id,
                started_at=active.started_at,
                rescue_of=active.pickup.rescue_of,
            )
            for active in actives
        )
        return cls({name: tuple(issues) for name, issues in queued.items()}, running)


class Snapshots:
    """Takes and publishes a daemon's state. Shared by its polls, its Runs (threads) and its
    publisher."""

    def __init__(
        self,
        sources: StateSources,
        daemon: DaemonProcess,
        clock: Clock,
        architect: ArchitectSchedule,
        progress: Callable[[str], None],
    ) -> None:
        self._sources, self._daemon, self._clock = sources, daemon, clock
        self._architect, self._progress = architect, progress
        self._lock = threading.Lock()
        # Repository -> (when it was last polled, why that poll failed, scrubbed; None: it did not)
        self._polled: dict[str, tuple[datetime, str | None]] = {}

    def polled(self, full_name: str, error: Exception | None = None) -> None:
        """The repository was polled now; ``error``: that poll failed."""
        # Shown by status and the status page: scrubbed like every outbound text.
        why = None if error is None else self._sources.scrub(str(error))
        with self._lock:
            self._polled[full_name] = (self._clock.now(), why)

    def take(
        self,
        work: Work,
        next_polls: Mapping[str, datetime | None],
        *,
        stopping: bool,
        stopped: bool,
    ) -> DaemonState:
        """The state now, of ``work`` and of the repositories of ``next_polls`` (each with when
        it is polled next)."""
        with self._lock:
            polled = dict(self._polled)
        polls = []
        for full_name, next_poll_at in next_polls.items():
            last = polled.get(full_name)
            polls.append(
                PollState(
                    repository=full_name,
                    last_poll_at=last[0] if last else None,
                    last_poll_error=last[1] if last else None,
                    next_poll_at=next_poll_at,
                    queued=work.queued.get(full_name, ()),
                    next_architect_at=self._architect.next_at(full_name),
                )
            )
        return DaemonState(
            daemon=self._daemon,
            updated_at=self._clock.now(),
            stopping=stopping,
            polls=tuple(polls),
            running=work.running,
            holds=HarnessHolds(self._sources.pauses(), self._sources.missing_harnesses()),
            rate_limit_remaining=self._rate_limit_seen(),
            stopped=stopped,
        )

    def publish(self, state: Callable[[], DaemonState]) -> None:
        """Publish ``state()``; a problem is a warning, never the end of the work."""
        try:
            self._sources.publish(state())
        except (OSError, ThirdshiftError) as problem:  # the display must never stop the work
            self._progress(f"warning: could not write the daemon's state: {problem}")

    def _rate_limit_seen(self) -> int | None:
        """What GitHub's last answer said of the rate limit (never a request: a stopping
        daemon must not wait on GitHub for its status)."""
        try:
            return self._sources.rate_limit()
        except ThirdshiftError:
            return None
