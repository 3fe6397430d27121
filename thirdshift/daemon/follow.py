"""How the daemon follows a Run it started, the one way for every kind: on the Run's own
thread, its progress lines said under the Run's prefix, its Run id kept as it is recorded, and
whatever stops it before its end made its outcome, so one Run's problem never stops the
others."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.daemon.ports import RunWatch
from thirdshift.errors import ThirdshiftError
from thirdshift.home import disk_error, disk_problem
from thirdshift.run_states import RunEnd
from thirdshift.runs import RunOutcome


@dataclass
class ActiveRun:
    """A Run this daemon executes now: an entry of its table of active Runs."""

    poll: RepositoryPoll
    pickup: Pickup
    started_at: datetime
    interrupt: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None
    """Why the daemon stopped it (its issue was closed); None: it did not."""
    thread: threading.Thread | None = None
    run_id: int | None = None

    @property
    def key(self) -> tuple[str, int | None]:
        """Its place in the table: one Run per issue (None: the Architect run) a repository."""
        return (self.poll.full_name, self.pickup.number)

    def watch(self, progress: Callable[[str], None]) -> RunWatch:
        """What its starter is given: its interrupt, ``progress``, and what keeps its Run id
        and tells why it was stopped."""
        return RunWatch(self.interrupt, progress, self._recorded, self._stopped_because)

    def _recorded(self, run_id: int) -> None:
        self.run_id = run_id

    def _stopped_because(self) -> str | None:
        return self.reason


def follow(
    active: ActiveRun, start: Callable[[RunWatch], RunOutcome], say: Callable[[str], None]
) -> RunOutcome:
    """What ``start`` ended with, given the Run's watch with ``say`` for its progress lines
    (each under the Run's prefix); an error that escapes it is said there and is the outcome
    (of the Run it recorded, if any)."""
    try:
        return start(active.watch(say))
    except ThirdshiftError as error:  # a local problem before the Run (disk, database)
        say(f"thirdshift: {error}")
        return RunOutcome.of_error(error, active.run_id)
    except Exception as error:  # one Run's bug must not stop the others
        outcome = RunOutcome(RunEnd.STOPPED, 1, run_id=active.run_id, cause=_unexpected(error))
        say(f"the Run stopped: {outcome.cause}")
        return outcome


def _unexpected(error: Exception) -> str:
    """The cause of a Run stopped by an error nobody raised on purpose: a disk or file error
    names the disk and the fix (the machine's problem, adr/0041); anything else is a bug."""
    if (disk := disk_error(error)) is not None:
        return disk_problem(disk, "a file operation of the Run")
    return f"unexpected {error.__class__.__name__}: {error} (a bug in thirdshift)"
