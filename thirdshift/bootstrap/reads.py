"""What the CLI's read commands (``config``, ``usage``, ``report``, ``status``, ``runs``,
``show``, ``logs``) get from the composition root: the settings read from the environment, their
database opened and closed here, and the scrubber and clock they read with. Each answers
with what its command prints."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from thirdshift.bootstrap.bounds import session_limits
from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import UsageError
from thirdshift.figures import Period
from thirdshift.harnesses import StreamReader, harness_named, probe
from thirdshift.harnesses.limits import probe_groups
from thirdshift.records import Activity, Lease, Run, UsageTotal
from thirdshift.report import period, reading
from thirdshift.run_states import RunKind, RunState
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings, load_settings
from thirdshift.store import Store


@dataclass(frozen=True)
class OpenStore:
    """The settings and their database, open until the ``with`` block around it ends."""

    settings: Settings
    store: Store

    @property
    def database_url(self) -> str:
        """The database's URL, for messages (``reading`` redacts it)."""
        return self.settings.effective_database_url

    def __enter__(self) -> OpenStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.store.close()


def open_store(environ: Mapping[str, str]) -> OpenStore:
    """The settings read from ``environ`` and their database, opened (and migrated) now, so a
    ConfigError or a database error is raised by this call: ``with open_store(environ) as
    opened: ...``."""
    settings = load_settings(environ)
    return OpenStore(settings, Store.open(settings.effective_database_url))


def checked_settings(environ: Mapping[str, str]) -> Settings:
    """``thirdshift config``: the settings, once their database opened (and closed again)."""
    with open_store(environ) as opened:
        return opened.settings


def usage_totals(
    environ: Mapping[str, str], by: str, *, days: int, repository: str | None
) -> list[UsageTotal]:
    """``thirdshift usage``: the ledger's totals ``by`` run, repository or day over the last
    ``days`` UTC days (today included), of ``repository`` when given."""
    with open_store(environ) as opened:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        since = today - timedelta(days=days - 1)
        return opened.store.usage_ledger(by, since=since, repository=repository)


def period_report(
    environ: Mapping[str, str], *, since: str | None, repository: str | None
) -> period.PeriodReport:
    """``thirdshift report``: the Runs started since ``since`` (``--since``: a date or a
    duration back from now; None: the last 30 days), of ``repository`` when given. A
    ``--since`` it cannot read is a ``UsageError``, raised before the database is opened."""
    now = datetime.now(UTC)
    try:
        start = period.default_since(now) if since is None else period.since_of(since, now)
    except ValueError as error:
        raise UsageError(f"--since: {error}") from None
    with open_store(environ) as opened:
        figures = opened.store.period_figures(Period(start, repository))
    return period.period_report(figures, now)


@dataclass(frozen=True)
class StatusFacts:
    """What ``thirdshift status`` shows: each daemon's state file, the Leases held (with their
    repository's name), the Runs running with their ledger totals, the latest pass-over of
    each issue in the last day, and the time they were read at."""

    now: datetime
    daemons: list[dict[str, Any]]
    leases: list[tuple[str, Lease]]
    running: list[Run]
    usage: dict[int, UsageTotal]
    passed_over: list[Activity]
    tickets: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Each running Spec run's line per Ticket, by its Run id."""


def status_facts(environ: Mapping[str, str]) -> StatusFacts:
    """``thirdshift status``: the facts, read from the database and the daemons' state files."""
    # Here, not at the top: the daemon's package imports the Runs and git, which ``config``
    # (in this module too) must not need.
    from thirdshift.daemon.state import read_states
    from thirdshift.runs import spec_ticket_lines

    with open_store(environ) as opened:
        store = opened.store
        now = datetime.now(UTC)
        names = {repository.id: repository.full_name for repository in store.repositories()}
        leases = [
            (names[repository.id], lease)
            for repository in store.repositories()
            for lease in store.live_leases(repository)
        ]
        running = store.list_runs(state=RunState.RUNNING, limit=200)
        usage = reading.usage_by_run(store, running)
        tickets = {
            run.id: spec_ticket_lines(run, store) for run in running if run.kind == RunKind.SPEC
        }
        latest: dict[tuple[str | None, int | None], Activity] = {}
        for line in store.activity(limit=1000):
            if line.kind == "pass-over" and now - line.created_at < timedelta(days=1):
                latest[(line.repository, line.issue_number)] = line
    daemons = read_states(opened.settings.home / "daemons")
    return StatusFacts(now, daemons, leases, running, usage, list(latest.values()), tickets)


def recent_runs(
    environ: Mapping[str, str], *, repository: str | None, state: RunState | None, limit: int
) -> list[tuple[Run, UsageTotal | None]]:
    """``thirdshift runs``: the newest Runs first, each with its ledger total."""
    with open_store(environ) as opened:
        return reading.recent_runs(opened.store, repository=repository, state=state, limit=limit)


def run_view(environ: Mapping[str, str], run_id: int) -> reading.RunView:
    """``thirdshift show``: one Run whole (NotRecorded naming the database without it)."""
    with open_store(environ) as opened:
        return reading.run_view(opened.store, run_id, opened.database_url)


def follow_clock(interrupt: threading.Event) -> Clock:
    """The clock ``thirdshift logs --follow`` waits on: Ctrl-C (``interrupt``) ends a wait."""
    return SystemClock(interrupt)


def log_reader(harness: str, scrub: Scrubber) -> StreamReader:
    """``thirdshift logs``: the stream reader of the Harness a session ran with."""
    return harness_named(harness).reader(scrub)


def sandbox_mode(settings: Settings, environ: Mapping[str, str]) -> str:
    """``thirdshift config``: how agents would run (sealed by bubblewrap, or unsealed as an
    unsafe setting allows); ``AgentSandboxUnavailable`` when neither."""
    return probe(
        environ.get("PATH"),
        unsafe_without=settings.unsafe_agent_without_sandbox,
        unsafe_network=settings.unsafe_agent_network,
    ).mode


def model_key_place(settings: Settings) -> str:
    """``thirdshift config``: where a session's model key is (adr/0038)."""
    if settings.unsafe_agent_without_sandbox or settings.unsafe_agent_network:
        return "inside the sandbox (its network is not sealed, so there is no model gateway)"
    if settings.unsafe_agent_holds_model_key:
        return (
            "outside the sandbox, the model gateway adds it; a login it cannot hold goes in "
            "(unsafe_agent_holds_model_key)"
        )
    return "outside the sandbox, the model gateway adds it"


def session_bounds(settings: Settings) -> str:
    """``thirdshift config``: what bounds each session here (a cgroup of its own, or nothing
    as an unsafe setting allows) and its limits; SessionLimitsUnavailable when neither."""
    found = probe_groups(unsafe_unbounded=settings.unsafe_unbounded_sessions).found
    return f"{found}: {session_limits(settings).describe()}"
