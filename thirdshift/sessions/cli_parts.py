"""What the sessions of a Harness CLI are built from, in two frozen values the composition root
fills: ``SessionParts`` (the collaborators every session of a Run shares: the store, the
scrubber, the clock, where its progress lines and provider outages go) and ``SessionBounds``
(the settings that bound each session: its watchdogs, its output, its waits for the store, the
free disk it needs, its cost budgets). Where a session runs is its ``SealedSpace``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from thirdshift.clock import Clock
from thirdshift.records import DEFAULT_OUTPUT_CAPS, OutputCaps, ProviderOutage, Watchdogs
from thirdshift.scrub import Scrubber
from thirdshift.sessions.ledger import NO_BUDGETS, Budgets
from thirdshift.settings import ModelPrice
from thirdshift.store import Store


def _no_outage(_outage: ProviderOutage) -> None:
    return None


@dataclass(frozen=True)
class SessionParts:
    """The collaborators of a Run's sessions, whichever Harness runs them. ``environ`` is what
    a CLI's environment is made from (the Harness adapter keeps only what it needs);
    ``progress`` prints a line (scrubbed first by the session); ``interrupt`` stops a session
    as Ctrl-C does; ``on_outage`` is told of every provider outage (the daemon pauses pickups
    for that Harness)."""

    store: Store
    environ: Mapping[str, str]
    scrub: Scrubber
    clock: Clock
    progress: Callable[[str], None]
    interrupt: threading.Event
    on_outage: Callable[[ProviderOutage], None] = field(default=_no_outage)


@dataclass(frozen=True)
class SessionBounds:
    """What bounds each session, from the settings: its watchdogs and the grace its CLI gets to
    stop; how long its end waits for the store when it is away (``salvage_wait_seconds``,
    adr/0028); the cut of a long stdout line and the cap of its Session log (adr/0029); the
    free disk it needs to start, in the Worktree's and the logs' disks (``min_free_disk_mb``,
    adr/0041); and the cost budgets, with the prices its usage is counted at."""

    watchdogs: Watchdogs
    grace_seconds: float
    store_wait_seconds: float = 120.0
    output_caps: OutputCaps = DEFAULT_OUTPUT_CAPS
    min_free_disk_mb: int = 0
    budgets: Budgets = NO_BUDGETS
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
