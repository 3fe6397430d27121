"""What the status page shows, built from the daemon's state and the store.

Everything here is already scrubbed: the store keeps scrubbed texts and the Session logs are
written scrubbed; the condensed lines are what a Harness's stream reader makes of them, the same
lines a Run prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from thirdshift.console import format_duration
from thirdshift.daemon.state import DaemonState, state_json
from thirdshift.errors import UsageError
from thirdshift.harnesses import harness_named
from thirdshift.records import Run, SessionRecord
from thirdshift.scrub import Scrubber
from thirdshift.store import Store

LOG_LINES = 12
RECENT_RUNS = 15
LOG_BYTES = 512 * 1024
"""How much of the end of a Session log is read to condense its last lines."""


@dataclass(frozen=True)
class RunView:
    """One Run as the page shows it."""

    run_id: int
    repository: str
    issue_number: int
    state: str
    cause: str | None
    pull_request_number: int | None
    started_at: datetime
    duration: str
    session: str | None
    """The kind of its last session (implement, repair-2, ...)."""
    cost_usd: float | None
    last_lines: tuple[str, ...]

    def json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "repository": self.repository,
            "issue_number": self.issue_number,
            "state": self.state,
            "cause": self.cause,
            "pull_request_number": self.pull_request_number,
            "started_at": self.started_at.astimezone(UTC).isoformat(),
            "duration": self.duration,
            "session": self.session,
            "cost_usd": self.cost_usd,
            "last_lines": list(self.last_lines),
        }


@dataclass(frozen=True)
class LeaseView:
    repository: str
    issue_number: int
    owner: str
    run_id: int | None
    expires_at: datetime
    fencing_token: int


@dataclass(frozen=True)
class Page:
    """The whole page, at one moment."""

    generated_at: datetime
    daemon: DaemonState | None
    in_flight: tuple[RunView, ...]
    recent: tuple[RunView, ...]
    failures: tuple[RunView, ...]
    leases: tuple[LeaseView, ...]
    cost_today_usd: float
    unpriced_today: int

    def json(self) -> dict[str, Any]:
        return {
            "generated_at": self.generated_at.astimezone(UTC).isoformat(),
            "daemon": state_json(self.daemon) if self.daemon else None,
            "in_flight": [run.json() for run in self.in_flight],
            "recent": [run.json() for run in self.recent],
            "failures": [run.json() for run in self.failures],
            "leases": [
                {
                    "repository": lease.repository,
                    "issue_number": lease.issue_number,
                    "owner": lease.owner,
                    "run_id": lease.run_id,
                    "expires_at": lease.expires_at.astimezone(UTC).isoformat(),
                    "fencing_token": lease.fencing_token,
                }
                for lease in self.leases
            ],
            "cost_today_usd": self.cost_today_usd,
            "unpriced_today": self.unpriced_today,
        }


class PageSource(Protocol):
    """Where the page comes from (the real one reads the daemon and the store)."""

    def page(self) -> Page: ...


def condensed_tail(
    log_path: Path, harness: str, scrub: Callable[[str], str], lines: int = LOG_LINES
) -> tuple[str, ...]:
    """The last ``lines`` condensed lines of a Session log, as the Run printed them; nothing
    when the log is not on this machine."""
    try:
        with log_path.open("rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(size - LOG_BYTES, 0))
            data = log.read()
    except OSError:
        return ()
    if size > LOG_BYTES:
        data = data.split(b"\n", 1)[-1]  # the first line read may be cut
    try:
        reader = harness_named(harness).reader(scrub=scrub)
    except UsageError:  # a Harness this version does not know: show nothing rather than fail
        return ()
    shown: list[str] = []
    for line in data.splitlines():
        shown.extend(reader.feed(line).progress)
    return tuple(shown[-lines:])


class StorePageSource:
    """The real page source: the daemon's own state and the database."""

    def __init__(
        self, store: Store, state: Callable[[], DaemonState | None], scrub: Scrubber
    ) -> None:
        self._store = store
        self._state = state
        self._scrub = scrub

    def page(self) -> Page:
        now = datetime.now(UTC)
        running = self._store.list_runs(state="running", limit=50)
        ended = [run for run in self._store.list_runs(limit=200) if run.state != "running"]
        failures = [
            run
            for run in ended
            if run.state in ("failed", "crashed")
            and run.ended_at is not None
            and now - run.ended_at < timedelta(days=1)
        ][:RECENT_RUNS]
        names = {repository.id: repository.full_name for repository in self._store.repositories()}
        leases = tuple(
            LeaseView(
                names[repository.id],
                lease.issue_number,
                lease.owner,
                lease.run_id,
                lease.expires_at,
                lease.fencing_token,
            )
            for repository in self._store.repositories()
            for lease in self._store.live_leases(repository)
        )
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        today = self._store.usage_ledger("day", since=day)
        return Page(
            generated_at=now,
            daemon=self._state(),
            in_flight=tuple(self._view(run, now, with_log=True) for run in running),
            recent=tuple(self._view(run, now, with_log=False) for run in ended[:RECENT_RUNS]),
            failures=tuple(self._view(run, now, with_log=True) for run in failures),
            leases=leases,
            cost_today_usd=sum(total.cost_usd for total in today),
            unpriced_today=sum(total.unpriced_sessions for total in today),
        )

    def _view(self, run: Run, now: datetime, *, with_log: bool) -> RunView:
        sessions = self._store.run_sessions(run.id)
        last: SessionRecord | None = sessions[-1] if sessions else None
        costs = [s.usage.cost_usd for s in sessions if s.usage.cost_usd is not None]
        lines: tuple[str, ...] = ()
        if with_log and last is not None:
            lines = condensed_tail(Path(last.log_path), last.harness, self._scrub)
        end = run.ended_at or now
        return RunView(
            run_id=run.id,
            repository=run.repository.full_name,
            issue_number=run.issue_number,
            state=run.state,
            cause=run.cause,
            pull_request_number=run.pull_request_number,
            started_at=run.started_at,
            duration=format_duration((end - run.started_at).total_seconds()),
            session=last.kind if last else None,
            cost_usd=sum(costs) if costs else None,
            last_lines=lines,
        )
