"""Whether the Harness CLIs a daemon runs are still installed. One removed while the daemon
runs (an upgrade half done, a cleaned directory) would fail each Run it picks up; instead the
daemon stops picking up until the CLI is back, and says so once each way in the Activity log."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from thirdshift.clock import Clock
from thirdshift.daemon.state import MissingHarness

LOOK_EVERY_SECONDS = 5.0
"""How long an answer is kept: a poll asks once per issue, and looking costs a few stat calls."""


class HarnessWatch:
    """``problem(name)`` says why the Harness ``name`` cannot be run (with the fix), or None
    when its CLI is found; ``say`` writes the daemon's Activity log."""

    def __init__(
        self,
        harnesses: Sequence[str],
        problem: Callable[[str], str | None],
        say: Callable[[str], None],
        clock: Clock,
    ) -> None:
        self._harnesses = tuple(dict.fromkeys(harnesses))
        self._problem = problem
        self._say = say
        self._clock = clock
        self._lock = threading.Lock()
        self._looked_at: float | None = None
        self._missing: dict[str, str] = {}

    def missing_reason(self) -> str | None:
        """Why no Run may start now (a Harness's CLI is gone), or None."""
        with self._lock:
            now = self._clock.monotonic()
            if self._looked_at is None or now - self._looked_at >= LOOK_EVERY_SECONDS:
                self._looked_at = now
                self._look()
            if not self._missing:
                return None
            name, problem = next(iter(self._missing.items()))
            return f"{problem}; pickups wait until the {name} Harness is back"

    def missing(self) -> tuple[MissingHarness, ...]:
        """The Harnesses found missing at the last look, each with why and the fix (none
        looked for now)."""
        with self._lock:
            return tuple(MissingHarness(name, problem) for name, problem in self._missing.items())

    def _look(self) -> None:
        for name in self._harnesses:
            problem = self._problem(name)
            if problem is not None and name not in self._missing:
                self._missing[name] = problem
                self._say(f"{problem}; no Run starts until the {name} Harness is back")
            elif problem is None and name in self._missing:
                del self._missing[name]
                self._say(f"the {name} Harness is back; pickups go on")
