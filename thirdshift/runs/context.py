"""What every kind of Run is built from, in two frozen values the composition root fills:
``RunParts`` (the collaborators: settings, GitHub, the store, sessions, clones, the scrubber,
the clock) and ``RunHooks`` (what the caller learns and controls while it runs: progress lines,
the interrupt, URLs, who claims, a daemon's stop reason and Run ids, notifications)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from thirdshift.clock import Clock
from thirdshift.runs.ports import NO_NOTIFIER, CloneSource, GitHubPort, Notifier, SessionSource
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store


@dataclass(frozen=True)
class RunParts:
    """A Run's collaborators. ``environ`` is the environment the root was given (pre-flight
    looks for the Harness on its PATH)."""

    settings: Settings
    github: GitHubPort
    store: Store
    session_source: SessionSource
    clones: CloneSource
    environ: Mapping[str, str]
    scrub: Scrubber
    clock: Clock


def _nothing(_run_id: int) -> None:
    return None


def _no_reason() -> str | None:
    return None


@dataclass(frozen=True)
class RunHooks:
    """``interrupt`` is set on Ctrl-C or SIGTERM (and by a lost Lease): waits end and the
    session stops. ``emit_url`` gets the pull request's (or published issue's) URL for stdout;
    ``stopped_because`` says why a daemon stopped the Run; ``on_recorded`` learns the Run's id
    as soon as it is recorded."""

    progress: Callable[[str], None]
    interrupt: threading.Event
    emit_url: Callable[[str], None]
    claimant: str = "thirdshift run"
    stopped_because: Callable[[], str | None] = field(default=_no_reason)
    on_recorded: Callable[[int], None] = field(default=_nothing)
    notifier: Notifier = NO_NOTIFIER
