"""Provider pauses: which Harness's model provider is down, until when, as the daemon's Runs
found out (adr/0014).

A Run's sessions report every provider outage here (through the composition root); the polls
ask before a Pickup. In memory only: a pause outlives no daemon, and a restarted daemon learns
again from its first refused session, which costs one session's retries.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from thirdshift.clock import Clock
from thirdshift.daemon.state import PauseState
from thirdshift.records import ProviderOutage

# However far off a provider says its reset is, a daemon looks again after a day: a bogus
# stamp must not stop a Harness for good.
LONGEST_PAUSE = timedelta(hours=24)


class ProviderPauses:
    """Pauses by Harness name. An outage that announced its reset pauses until then (at least
    ``default_seconds``, at most a day); one that did not pauses for ``default_seconds``.
    Shared by a daemon's Runs (threads) and polls."""

    def __init__(self, clock: Clock, default_seconds: float) -> None:
        self._clock = clock
        self._default = timedelta(seconds=default_seconds)
        self._lock = threading.Lock()
        self._paused: dict[str, tuple[datetime, ProviderOutage]] = {}

    def pause(self, outage: ProviderOutage) -> None:
        """Pause pickups for ``outage.harness`` until its reset (a later reset wins)."""
        now = self._clock.now()
        shortest = now + self._default
        until = min(max(outage.resets_at or shortest, shortest), now + LONGEST_PAUSE)
        with self._lock:
            known = self._paused.get(outage.harness)
            if known is None or known[0] < until:
                self._paused[outage.harness] = (until, outage)

    def states(self) -> tuple[PauseState, ...]:
        """Every pause still running, for ``thirdshift status``."""
        now = self._clock.now()
        with self._lock:
            return tuple(
                PauseState(harness, until, outage.condition)
                for harness, (until, outage) in sorted(self._paused.items())
                if until > now
            )

    def paused(self, harness: str) -> tuple[datetime, ProviderOutage] | None:
        """Until when ``harness`` is paused and the outage that paused it, or None."""
        with self._lock:
            known = self._paused.get(harness)
            if known is not None and known[0] <= self._clock.now():
                del self._paused[harness]
                return None
            return known

    def pass_over_reason(self, harness: str, fallbacks: Sequence[str]) -> str | None:
        """Why a Pickup waits: the Run's Harness is paused and so is every fallback. None
        when the Harness is not paused, or a fallback is available to switch to."""
        known = self.paused(harness)
        if known is None:
            return None
        fallback_pauses: list[tuple[datetime, ProviderOutage]] = []
        for name in fallbacks:
            pause = self.paused(name)
            if pause is None:
                return None
            fallback_pauses.append(pause)
        _, outage = known
        # Pickups resume when the first of them is back.
        until = min(pause[0] for pause in (known, *fallback_pauses))
        stamp = until.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        others = "every fallback Harness is paused too" if fallbacks else "no fallback Harness"
        return f"{harness}'s provider is {outage.condition}; pickups wait until {stamp} ({others})"
