"""What a daemon and its polls are built from, in frozen values the composition root fills: a
daemon's collaborators (``DaemonParts``) and limits (``Limits``); what its polls share
(``PollParts``) and what each asks of its daemon (``PollHooks``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from thirdshift.clock import Clock
from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.listing import OwnerListings
from thirdshift.daemon.ports import RunStarter
from thirdshift.daemon.ready import ReadyRules
from thirdshift.runs import NO_NOTIFIER, Notifier
from thirdshift.store import Store


@dataclass(frozen=True)
class DaemonParts:
    """What a daemon works with: what starts its Runs, the store, the Activity log, the clock,
    where its progress lines go, and the web host its issue URLs name."""

    starter: RunStarter
    store: Store
    activity: ActivityLog
    clock: Clock
    progress: Callable[[str], None]
    web_host: str


@dataclass(frozen=True)
class WatchTimes:
    """How often the daemon lists its owners' repositories again, and how often it polls a
    repository once webhook deliveries arrive (None: webhooks are not set up, the polls keep
    ``poll_seconds``)."""

    owner_refresh_seconds: float = 300.0
    poll_seconds_with_webhooks: float | None = None


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
    watch_times: WatchTimes = field(default_factory=lambda: WatchTimes())
    """How often owners are listed again, and polls once webhook deliveries arrive."""


def _not_paused() -> str | None:
    return None


@dataclass(frozen=True)
class PollParts:
    """What the polls of a daemon share: the store, the Ready rules, the Activity log, the
    clock, who sweeps (named in the sweep's Lease), what says why no Ready issue may be picked
    up now (the Harness's provider is down; None: none), the Notifier of pass-overs, and the
    owners' listings."""

    store: Store
    rules: ReadyRules
    activity: ActivityLog
    clock: Clock
    sweeper: str = "thirdshift"
    paused: Callable[[], str | None] = _not_paused
    notifier: Notifier = NO_NOTIFIER
    listings: OwnerListings | None = None
    """The owners' listings (None: each repository is listed on its own)."""


@dataclass(frozen=True)
class PollHooks:
    """What a poll of one repository asks of its daemon and its host: whether this daemon
    runs the issue now, how to stop that Run with a reason (its issue was closed), and whether
    a Worktree of the branch is kept here."""

    running_here: Callable[[int | None], bool]
    stop_here: Callable[[int, str], None]
    kept_worktree: Callable[[str], bool]
