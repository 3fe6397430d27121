"""The Architect schedule of a daemon: when each repository's ``architect_schedule`` next asks
for an Architect run, and whether it is due now (adr/0022)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime

from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.store import Store

NextArchitectRun = Callable[[datetime], datetime | None]
"""A repository's Architect schedule: the first time it asks for a run after the one given."""


class ArchitectSchedule:
    """Each repository's next Architect run, computed from the daemon's start, so a restart
    never runs the passes it missed while it was down. A time stays due until an Architect
    run starts; then the next is the schedule's first time after that start. Shared by the
    daemon's polls and Runs (threads)."""

    def __init__(
        self, schedules: Mapping[str, NextArchitectRun], store: Store, started_at: datetime
    ) -> None:
        self._schedules = dict(schedules)
        self._store = store
        self._started_at = started_at
        self._lock = threading.Lock()
        # Repository -> when its schedule next asks for an Architect run (due from then on,
        # until one starts).
        self._next: dict[str, datetime | None] = {}

    def next_at(self, full_name: str) -> datetime | None:
        """When the repository's Architect schedule next asks for a run (None: no schedule)."""
        schedule = self._schedules.get(full_name)
        if schedule is None:
            return None
        with self._lock:
            if full_name not in self._next:
                self._next[full_name] = schedule(self._started_at)
            return self._next[full_name]

    def due(self, poll: RepositoryPoll, now: datetime) -> bool:
        """Whether the repository's Architect schedule asks for a run now. It stays due until
        one starts (a full daemon starts it once a slot is free) and waits, as pickups do,
        while the repository's daily budget is spent or its Harness's provider is down. Another
        daemon on the same database that already made this time's Architect run makes it not
        due here."""
        due = self.next_at(poll.full_name)
        if due is None or now < due or poll.work_paused() is not None:
            return False
        latest = self._store.latest_run(poll.repository(), None)
        if latest is not None and latest.started_at >= due:
            self.started(poll.full_name, latest.started_at)
            return False
        return True

    def started(self, full_name: str, at: datetime) -> None:
        """An Architect run of the repository started ``at``: the next is due at the
        schedule's first time after it."""
        schedule = self._schedules[full_name]
        with self._lock:
            self._next[full_name] = schedule(at)
