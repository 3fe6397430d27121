"""The Activity log: one line for each pickup, pass-over, Run start and end, Rescue, crash and
sweep, kept in the database (for ``status`` and the status page) and appended to a file per
repository (``$THIRDSHIFT_HOME/activity/<owner>-<name>.log``) for ``tail -f``.

A pass-over is written when its reason changes, never once per idle cycle: a daemon that polls
every minute must not fill the log with the same line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from thirdshift.clock import Clock
from thirdshift.errors import ThirdshiftError
from thirdshift.records import Repository
from thirdshift.scrub import Scrubber
from thirdshift.store import Store


class ActivityLog:
    def __init__(
        self,
        store: Store,
        *,
        daemon: str,
        directory: Path,
        clock: Clock,
        scrub: Scrubber,
        progress: Callable[[str], None],
    ) -> None:
        self._store = store
        self._daemon = daemon
        self._directory = directory
        self._clock = clock
        self._scrub = scrub
        self._progress = progress
        self._lock = threading.Lock()
        self._passed_over: dict[tuple[int, int], str] = {}

    def line(
        self,
        kind: str,
        message: str,
        *,
        repository: Repository | None = None,
        issue_number: int | None = None,
        run_id: int | None = None,
    ) -> None:
        """Write one line everywhere. A database that cannot take it costs the line there,
        never the daemon's work."""
        message = self._scrub(message)
        where = repository.full_name if repository else "thirdshift"
        if issue_number is not None:
            where += f"#{issue_number}"
        self._progress(f"{where}: {message}")
        try:
            self._store.add_activity(
                kind,
                message,
                daemon=self._daemon,
                repository=repository,
                issue_number=issue_number,
                run_id=run_id,
            )
        except ThirdshiftError as problem:
            self._progress(f"warning: the Activity log lost a line: {problem}")
        if repository is None:
            return
        stamp = f"{self._clock.now():%Y-%m-%dT%H:%M:%SZ}"
        issue = f" #{issue_number}" if issue_number is not None else ""
        run = f" run {run_id}" if run_id is not None else ""
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            path = self._directory / f"{repository.owner}-{repository.name}.log"
            with self._lock, path.open("a", encoding="utf-8") as handle:
                handle.write(f"{stamp} {self._daemon} {kind}{issue}{run}: {message}\n")
        except OSError as problem:
            self._progress(f"warning: the Activity log file lost a line: {problem}")

    def pass_over(self, repository: Repository, issue_number: int, reason: str) -> bool:
        """A pass-over, written only when its reason for this issue changed: True when it was
        (news worth a notification), False when it repeats the last one."""
        key = (repository.id, issue_number)
        with self._lock:
            if self._passed_over.get(key) == reason:
                return False
            self._passed_over[key] = reason
        self.line(
            "pass-over", f"passed over: {reason}", repository=repository, issue_number=issue_number
        )
        return True

    def forget(self, repository: Repository, issue_number: int) -> None:
        """The issue was picked up: a later pass-over is news again."""
        with self._lock:
            self._passed_over.pop((repository.id, issue_number), None)
