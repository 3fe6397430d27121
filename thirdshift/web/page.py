"""What the status page shows, built from the daemon's state and the store.

Everything here is already scrubbed: the store keeps scrubbed texts and the Session logs are
written scrubbed; the condensed lines are what a Harness's stream reader makes of them, the same
lines a Run prints.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from thirdshift.console import format_duration
from thirdshift.daemon.state import DaemonState, state_json
from thirdshift.errors import StoreError, UsageError
from thirdshift.harnesses import harness_named
from thirdshift.records import Lease, Run, SessionRecord, UsageTotal
from thirdshift.report.shapes import lease_shape, run_shape
from thirdshift.run_states import RunKind, RunState
from thirdshift.runs import spec_ticket_lines
from thirdshift.scrub import Scrubber
from thirdshift.store import Store
from thirdshift.web.run_page import LogDownload, RunPage, run_page, session_log

CACHE_SECONDS = 2.0
LOG_LINES = 12
RECENT_RUNS = 15
LOG_BYTES = 512 * 1024
PAGE_VERSION = 1
"""The ``version`` of the ``status_page`` shape (docs/json.md)."""
"""How much of the end of a Session log is read to condense its last lines."""


@dataclass(frozen=True)
class PageRun:
    """One Run as the page shows it: the Run, its ledger total, its last session's kind and,
    while it matters, that session's last condensed lines."""

    run: Run
    usage: UsageTotal | None
    duration: str
    session: str | None
    """The kind of its last session (implement, repair-2, ...)."""
    last_lines: tuple[str, ...]
    tickets: tuple[str, ...] = ()
    """A Spec run's line per Ticket (landed, running, failed)."""

    @property
    def run_id(self) -> int:
        return self.run.id

    @property
    def repository(self) -> str:
        return self.run.repository.full_name

    @property
    def issue_number(self) -> int | None:
        return self.run.issue_number

    @property
    def subject(self) -> str:
        return self.run.subject

    @property
    def state(self) -> RunState:
        return self.run.state

    @property
    def cause(self) -> str | None:
        return self.run.cause

    @property
    def pull_request_number(self) -> int | None:
        return self.run.pull_request_number

    @property
    def parent_run_id(self) -> int | None:
        return self.run.parent_run_id

    @property
    def kind(self) -> RunKind:
        return self.run.kind

    @property
    def cost_usd(self) -> float | None:
        if self.usage is None or self.usage.sessions == self.usage.unpriced_sessions:
            return None
        return self.usage.cost_usd

    def json(self) -> dict[str, Any]:
        """The Run's own JSON shape (docs/json.md), with what the page adds."""
        return run_shape(self.run, self.usage) | {
            "session": self.session,
            "last_lines": list(self.last_lines),
            "tickets": list(self.tickets),
        }


@dataclass(frozen=True)
class LeaseView:
    repository: str
    lease: Lease

    @property
    def issue_number(self) -> int | None:
        return self.lease.issue_number

    @property
    def subject(self) -> str:
        """``owner/name#n``, or the repository's Architect Lease (number 0: no issue)."""
        if self.lease.issue_number is None:
            return f"{self.repository} (Architect run)"
        return f"{self.repository}#{self.lease.issue_number}"

    @property
    def owner(self) -> str:
        return self.lease.owner

    @property
    def run_id(self) -> int | None:
        return self.lease.run_id

    @property
    def expires_at(self) -> datetime:
        return self.lease.expires_at


@dataclass(frozen=True)
class Page:
    """The whole page, at one moment."""

    generated_at: datetime
    daemon: DaemonState | None
    in_flight: tuple[PageRun, ...]
    recent: tuple[PageRun, ...]
    failures: tuple[PageRun, ...]
    leases: tuple[LeaseView, ...]
    cost_today_usd: float
    unpriced_today: int
    database_error: str | None = None
    """``database unreachable: ...`` while the store cannot be read: the rest is then the
    daemon's own state alone."""

    def json(self) -> dict[str, Any]:
        """The ``status_page`` shape of docs/json.md (``/api/status``)."""
        return {
            "type": "status_page",
            "version": PAGE_VERSION,
            "generated_at": self.generated_at.astimezone(UTC).isoformat(),
            "daemon": state_json(self.daemon) if self.daemon else None,
            "in_flight": [run.json() for run in self.in_flight],
            "recent": [run.json() for run in self.recent],
            "failures": [run.json() for run in self.failures],
            "leases": [lease_shape(view.lease, view.repository) for view in self.leases],
            "cost_today_usd": self.cost_today_usd,
            "unpriced_today": self.unpriced_today,
            "database_error": self.database_error,
        }


class PageSource(Protocol):
    """Where the page comes from (the real one reads the daemon and the store)."""

    def page(self) -> Page: ...

    def run_page(self, run_id: int) -> RunPage:
        """Run ``run_id``'s own page; it says so when there is no such Run or the database
        cannot be read (``RunPage.status`` 404, 503). Never raises for either."""
        ...

    def session_log(self, run_id: int, session_id: int) -> LogDownload:
        """The log of session ``session_id`` of Run ``run_id`` to download, found by the path
        the store recorded; or why there is none. Never raises for that."""
        ...


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


def in_flight_and_ended(
    running: Sequence[Run], latest: Sequence[Run]
) -> tuple[list[Run], list[Run]]:
    """The Runs in flight and the ended ones, from a read of the running Runs and then one of
    the latest: a Run that ended between the two reads is in both, and it is ended (the later
    read), never shown in flight beside its own outcome."""
    ended = [run for run in latest if run.state != RunState.RUNNING]
    gone = {run.id for run in ended}
    return [run for run in running if run.id not in gone], ended


class StorePageSource:
    """The real page source: the daemon's own state and the database."""

    def __init__(
        self,
        store: Store,
        state: Callable[[], DaemonState | None],
        scrub: Scrubber,
        *,
        fresh_seconds: float = CACHE_SECONDS,
        warn: Callable[[str], None] = lambda line: None,
        web_root: str | None = None,
        logs: Path | None = None,
    ) -> None:
        """``web_root`` (``https://github.com``): where the Run pages link repositories,
        issues and pull requests (None: they name them unlinked); ``logs``: the home's Session
        logs, the only files a Run page serves (None: it serves none)."""
        self._store = store
        self._logs = logs
        self._web_root = web_root
        self._warn = warn
        self._unreachable = False
        self._state = state
        self._scrub = scrub
        self._fresh = fresh_seconds
        # One page built at a time and kept a moment: however many tabs poll, the daemon's
        # own database connections (which renew its Leases) see one build every few seconds.
        self._lock = threading.Lock()
        self._built: tuple[float, Page] | None = None

    def page(self) -> Page:
        with self._lock:
            now = time.monotonic()
            if self._built is not None and now - self._built[0] < self._fresh:
                return self._built[1]
            try:
                built = self._build()
                self._unreachable = False
            except StoreError as error:
                built = self._without_store(error)
            self._built = (time.monotonic(), built)
            return built

    def run_page(self, run_id: int) -> RunPage:
        try:
            built = run_page(self._store, run_id, self._scrub, web_root=self._web_root)
        except StoreError as error:
            now = datetime.now(UTC)
            return RunPage(run_id=run_id, generated_at=now, database_error=self._down(error))
        self._unreachable = False
        return built

    def session_log(self, run_id: int, session_id: int) -> LogDownload:
        try:
            return session_log(self._store, run_id, session_id, self._scrub, self._logs)
        except StoreError as error:
            return LogDownload(name="", lines=None, problem=self._down(error), status=503)

    def _down(self, error: StoreError) -> str:
        """``database unreachable: <why>``, said on stderr once per outage (not once per
        request; a page polls every few seconds)."""
        said = self._scrub(f"database unreachable: {error}")
        if not self._unreachable:
            self._unreachable = True
            self._warn(f"status page: {said}")
        return said

    def _without_store(self, error: StoreError) -> Page:
        """The page while the store is down: the daemon's own state and why."""
        said = self._down(error)
        return Page(
            generated_at=datetime.now(UTC),
            daemon=self._state(),
            in_flight=(),
            recent=(),
            failures=(),
            leases=(),
            cost_today_usd=0.0,
            unpriced_today=0,
            database_error=said,
        )

    def _build(self) -> Page:
        now = datetime.now(UTC)
        running, ended = in_flight_and_ended(
            self._store.list_runs(state=RunState.RUNNING, limit=50),
            self._store.list_runs(limit=200),
        )
        failures = [
            run
            for run in ended
            if run.state in (RunState.FAILED, RunState.CRASHED)
            and run.ended_at is not None
            and now - run.ended_at < timedelta(days=1)
        ][:RECENT_RUNS]
        names = {repository.id: repository.full_name for repository in self._store.repositories()}
        leases = tuple(
            LeaseView(names[repository.id], lease)
            for repository in self._store.repositories()
            for lease in self._store.live_leases(repository)
        )
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        today = self._store.usage_ledger("day", since=day)
        shown = running + ended[:RECENT_RUNS] + failures
        usage = (
            {
                int(total.key): total
                for total in self._store.usage_ledger("run", runs=[run.id for run in shown])
            }
            if shown
            else {}
        )
        return Page(
            generated_at=now,
            daemon=self._state(),
            in_flight=tuple(self._view(run, usage, now, with_log=True) for run in running),
            recent=tuple(
                self._view(run, usage, now, with_log=False) for run in ended[:RECENT_RUNS]
            ),
            failures=tuple(self._view(run, usage, now, with_log=True) for run in failures),
            leases=leases,
            cost_today_usd=sum(total.cost_usd for total in today),
            unpriced_today=sum(total.unpriced_sessions for total in today),
        )

    def _view(
        self, run: Run, usage: dict[int, UsageTotal], now: datetime, *, with_log: bool
    ) -> PageRun:
        sessions = self._store.run_sessions(run.id)
        last: SessionRecord | None = sessions[-1] if sessions else None
        lines: tuple[str, ...] = ()
        if with_log and last is not None:
            lines = condensed_tail(Path(last.log_path), last.harness, self._scrub)
        end = run.ended_at or now
        return PageRun(
            run=run,
            usage=usage.get(run.id),
            duration=format_duration((end - run.started_at).total_seconds()),
            session=last.kind if last else None,
            last_lines=lines,
            tickets=spec_ticket_lines(run, self._store) if run.kind == RunKind.SPEC else (),
        )
