"""A daemon, from its settings: the pre-flight of every watched repository, its parts (store,
Activity log, provider pauses), the starters of its Runs, its Architect schedules, its Polls
and its status page."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

from apscheduler.triggers.cron import CronTrigger

from thirdshift.bootstrap.credentials import (
    GitHubAccess,
    agent_secrets,
    notifier_of,
    run_secrets,
)
from thirdshift.bootstrap.harness_path import (
    check_harnesses,
    daemon_harness_problem,
    daemon_harnesses,
    with_harness_paths,
)
from thirdshift.bootstrap.limits import raise_descriptor_limit
from thirdshift.bootstrap.owners import (
    OwnerFinding,
    owner_listings,
    owner_watch,
    owners_adapter,
    watched_owners,
)
from thirdshift.bootstrap.parts import (
    RunCall,
    local_preflight,
    opened_store,
    ready_rules,
)
from thirdshift.bootstrap.runs import architect_outcome, spec_or_issue_outcome
from thirdshift.bootstrap.status_page import (
    page_address,
    status_page,
    webhook_inbox,
    with_page_token,
)
from thirdshift.bootstrap.watched import Watched, checked_repositories, watched_names
from thirdshift.clock import Clock, SystemClock
from thirdshift.daemon import (
    ActivityLog,
    Daemon,
    DaemonParts,
    Limits,
    PollHooks,
    PollParts,
    ProviderPauses,
    RepositoryPoll,
    RunWatch,
    StateSources,
    WatchTimes,
)
from thirdshift.daemon.harness_watch import HarnessWatch
from thirdshift.daemon.listing import OwnerListings
from thirdshift.daemon.state import write_state
from thirdshift.errors import ConfigError, UsageError
from thirdshift.github import GitHub, route_library_log
from thirdshift.home import Home
from thirdshift.issue_url import web_host_of, web_root_of
from thirdshift.notify import TargetNotifier
from thirdshift.runs import ArchitectRequest, RunOutcome, RunRequest
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings, cron_trigger
from thirdshift.store import Store
from thirdshift.web import StoreChartSource, StorePageSource


def run_daemon(
    settings: Settings,
    *,
    repositories: Sequence[str],
    once: bool,
    owners: Sequence[str] = (),
    environ: Mapping[str, str],
    progress: Callable[[str], None],
    stop: threading.Event,
    http: str | None = None,
    agent_environ: Mapping[str, str] | None = None,
) -> int:
    """Watch ``repositories`` and every repository of ``owners`` (with those of the settings)
    until ``stop`` is set, or for one cycle with ``once``; with ``http`` (HOST:PORT), serve the
    status page there meanwhile, always behind a token (``http_token``, or one made for this
    process and shown once on the progress lines with the page's address). Pre-flight
    problems (no token, a repository the token cannot push to, an unusable home, no sandbox, a
    status page bound beyond loopback without http_token) stop it before it starts.
    ``agent_environ`` (default: ``environ``) is what its Runs' Harness environments are built
    from (the demo's points at its model server)."""
    address = page_address(settings, http)
    settings, made_token = with_page_token(settings, served=address is not None)
    # Read after the token is in place: every scrubber of the daemon and its Runs knows it.
    known = run_secrets(settings)
    names = watched_names(settings, repositories)
    owner_names = watched_owners(settings, owners)
    if not names and not owner_names:
        raise UsageError(
            "nothing to watch: pass --repo OWNER/NAME or --owner OWNER, or set repositories or "
            "owners in the config file"
        )
    environ = with_harness_paths(environ, settings.harness_paths)
    agents = with_harness_paths(
        environ if agent_environ is None else agent_environ, settings.harness_paths
    )
    scrub = Scrubber.from_environment(
        environ, [*known, *agent_secrets(environ), *agent_secrets(agents)]
    )

    def say(line: str) -> None:
        progress(scrub(line))

    route_library_log(say, replace=True)

    # Every session's pipes, logs and egress connections are this process's descriptors.
    if (warning := raise_descriptor_limit()) is not None:
        say(warning)
    check_harnesses(settings, agents)  # a Harness it cannot find would fail every Run
    local_preflight(settings, environ, say)  # a machine that cannot seal agents runs none
    notifier = notifier_of(settings, scrub=scrub, progress=say)
    clock = SystemClock(stop)
    watched = checked_repositories(names, GitHubAccess(settings, clock, scrub, say))
    daemon_name = settings.daemon_name or socket.gethostname()
    with opened_store(settings) as store:
        activity = ActivityLog(
            store,
            daemon=daemon_name,
            directory=settings.home / "activity",
            clock=clock,
            scrub=scrub,
            progress=say,
        )
        # Which Harness's provider is down, as the daemon's Runs found out: shared by them all.
        pauses = ProviderPauses(clock, settings.provider_pause_seconds)
        harnesses = HarnessWatch(
            daemon_harnesses(settings),
            partial(daemon_harness_problem, settings, agents),
            partial(activity.line, "harness"),
            clock,
        )
        kit = _DaemonKit(
            settings,
            environ,
            store,
            clock,
            scrub,
            say,
            daemon_name,
            activity,
            pauses,
            agents,
            harnesses,
        )
        daemon = _daemon(kit, watched, once=once, stop=stop)
        listings = None
        if owner_names:
            access = GitHubAccess(settings, clock, scrub, say)
            first = next(iter(watched.adapters), None)
            adapter = owners_adapter(settings, access, owner_names, first)
            listings = owner_listings(settings, adapter, owner_names, clock, activity)
        make_poll = _watch(kit, daemon, watched, notifier, listings)
        if owner_names:
            fixed = [f"{o}/{n}" for o, n, _ in watched.repositories]
            found = OwnerFinding(owner_names, fixed, adapter, make_poll)
            daemon.watch_owners(owner_watch(settings, kit.activity, found))
        with _page(kit, daemon, address, made_token, progress):
            return daemon.once() if once else daemon.serve()


def _page(
    kit: _DaemonKit,
    daemon: Daemon,
    address: tuple[str, int] | None,
    made_token: str | None,
    progress: Callable[[str], None],
) -> AbstractContextManager[None]:
    """The daemon's status page (its Run pages and charts) and webhook inbox at ``address``."""
    settings = kit.settings
    page = partial(
        StorePageSource,
        kit.store,
        daemon.snapshot,
        kit.scrub,
        warn=kit.say,
        web_root=web_root_of(settings.github_api_url),
        logs=Home(settings.home).logs,
    )
    return status_page(
        settings,
        address,
        page,
        made_token,
        inbox=webhook_inbox(settings, daemon, kit.activity),
        charts=StoreChartSource(kit.store, kit.scrub),
        say=kit.say,
        progress=progress,
    )


def _no_url(_url: str) -> None:
    """A daemon's Runs emit no URL: the Activity log and the progress lines say it."""


@dataclass(frozen=True)
class _DaemonKit:
    """What a daemon and the Runs it starts share: the settings, the store, the clock, the
    scrubber, its progress lines, its name, its Activity log, its provider pauses and what it
    knows of its Harnesses' CLIs."""

    settings: Settings
    environ: Mapping[str, str]
    store: Store
    clock: Clock
    scrub: Scrubber
    say: Callable[[str], None]
    name: str
    activity: ActivityLog
    pauses: ProviderPauses
    agent_environ: Mapping[str, str]
    harnesses: HarnessWatch


@dataclass(frozen=True)
class _Starter:
    """The daemon's ``RunStarter``: each Run as ``thirdshift run`` and ``thirdshift architect``
    make it, with the daemon's store (shared by its Runs), its name as the claimant and its
    provider pauses, and the daemon's watch over the Run."""

    kit: _DaemonKit

    def pickup(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        """A Spec run when the issue is a Spec, else a Run of the issue (a review Repair is
        one)."""
        return spec_or_issue_outcome(self.kit.settings, request, self._call(watch), None)

    def rescue(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        """The Rescue of a Spec run as a Spec run, of a Run as a Run (``spec_or_issue``
        reads which the crashed Run was)."""
        return spec_or_issue_outcome(self.kit.settings, request, self._call(watch), None)

    def architect(self, owner: str, name: str, watch: RunWatch) -> RunOutcome:
        """A scheduled Architect run."""
        request = ArchitectRequest(owner=owner, name=name)
        return architect_outcome(self.kit.settings, request, self._call(watch))

    def _call(self, watch: RunWatch) -> RunCall:
        kit = self.kit
        return RunCall(
            environ=kit.environ,
            agent_environ=kit.agent_environ,
            progress=watch.progress,
            emit_url=_no_url,
            interrupt=watch.interrupt,
            claimant=f"daemon {kit.name}",
            store=kit.store,
            stopped_because=watch.stopped_because,
            on_recorded=watch.on_recorded,
            on_outage=kit.pauses.pause,
        )


def _daemon(kit: _DaemonKit, watched: Watched, *, once: bool, stop: threading.Event) -> Daemon:
    settings = kit.settings
    schedules = architect_schedules(settings, [f"{o}/{n}" for o, n, _ in watched.repositories])
    parts = DaemonParts(
        starter=_Starter(kit),
        store=kit.store,
        activity=kit.activity,
        clock=kit.clock,
        progress=kit.say,
        web_host=web_host_of(settings.github_api_url),
    )
    limits = Limits(
        max_runs=settings.max_runs,
        max_runs_per_repository=settings.max_runs_per_repository,
        poll_seconds=settings.poll_seconds,
        poll_jitter_seconds=settings.poll_jitter_seconds,
        reap_seconds=max(5.0, settings.lease_seconds / 4),
        stop_seconds=stop_seconds(settings),
        store_wait_seconds=settings.salvage_wait_seconds,
        watch_times=WatchTimes(
            owner_refresh_seconds=settings.owner_refresh_seconds,
            poll_seconds_with_webhooks=(
                settings.poll_seconds_with_webhooks if settings.webhook_secret else None
            ),
        ),
    )
    shown = StateSources(
        name=kit.name,
        scrub=kit.scrub,
        publish=partial(write_state, settings.home / "daemons"),
        pauses=kit.pauses.states,
        rate_limit=partial(_rate_limit_left, watched.adapters),
        missing_harnesses=kit.harnesses.missing,
    )
    # From cron (--once) a daemon keeps no schedule: cron calls thirdshift architect.
    return Daemon(parts, limits, stop, shown=shown, architect_schedules={} if once else schedules)


def _paused(kit: _DaemonKit) -> Callable[[], str | None]:
    """Why no Run may start now: a Harness's CLI went missing, or its provider is down (and
    every fallback's)."""
    settings = kit.settings
    provider = partial(kit.pauses.pass_over_reason, settings.harness, settings.fallback_harnesses)
    return lambda: kit.harnesses.missing_reason() or provider()


def _watch(
    kit: _DaemonKit,
    daemon: Daemon,
    watched: Watched,
    notifier: TargetNotifier,
    listings: OwnerListings | None,
) -> Callable[[str, str, GitHub], RepositoryPoll]:
    """A Poll of each watched repository, for ``daemon``; and what makes the Poll of another
    (one an owner's listing finds later)."""
    settings = kit.settings
    parts = PollParts(
        store=kit.store,
        rules=ready_rules(settings),
        activity=kit.activity,
        clock=kit.clock,
        sweeper=f"daemon {kit.name}",
        paused=_paused(kit),
        notifier=notifier,
        listings=listings,
    )

    def make_poll(owner: str, name: str, github: GitHub) -> RepositoryPoll:
        full_name = f"{owner}/{name}"
        hooks = PollHooks(
            running_here=partial(daemon.running_here, full_name),
            stop_here=partial(daemon.stop_here, full_name),
            kept_worktree=partial(_kept_worktree, settings.home, owner, name),
        )
        return RepositoryPoll(owner, name, github, parts, hooks)

    for owner, name, github in watched.repositories:
        daemon.watch(make_poll(owner, name, github))
    return make_poll


def architect_schedules(
    settings: Settings, watched: Sequence[str]
) -> dict[str, Callable[[datetime], datetime | None]]:
    """Each watched repository's Architect schedule (``architect_schedule``), by the name the
    daemon polls it under. A schedule for a repository the daemon does not watch would never
    fire: that is a mistake to name, not to ignore."""
    by_lower = {full_name.lower(): full_name for full_name in watched}
    found: dict[str, Callable[[datetime], datetime | None]] = {}
    for repository, expression in settings.architect_schedule.items():
        full_name = by_lower.get(repository.lower())
        if full_name is None:
            raise ConfigError(
                f"architect_schedule names {repository}, which this daemon does not watch; add "
                "it to repositories (or --repo), or take its schedule out"
            )
        found[full_name] = partial(_next_fire, cron_trigger(expression))
    return found


def _next_fire(trigger: CronTrigger, after: datetime) -> datetime | None:
    """The schedule's first time strictly after ``after``: a run that starts on the minute is
    not due again at once."""
    return trigger.get_next_fire_time(None, after + timedelta(seconds=1))  # type: ignore[no-any-return]


def stop_seconds(settings: Settings) -> float:
    """How long a stopping daemon waits for its Runs: each stops its session (a grace period,
    then a kill after another) and saves its work within the salvage's time, plus a margin for
    git and the database."""
    return settings.salvage_wait_seconds + 2 * settings.session_stop_grace_seconds + 60


def _rate_limit_left(adapters: Sequence[GitHub]) -> int | None:
    """The smallest core rate-limit budget left among the daemon's credentials, as GitHub's
    last answers said it: never a request of its own, so it never waits on GitHub."""
    known = [left for left in (a.rate_limit_seen() for a in adapters) if left is not None]
    return min(known) if known else None


def _kept_worktree(home: Path, owner: str, name: str, branch: str) -> bool:
    return Home(home).worktree(owner, name, branch).is_dir()
