"""The one clock: every place thirdshift reads the time or waits goes through a ``Clock``.

``SystemClock`` is the real one, built once at the composition root with the Run's interrupt
event, so every wait (GitHub's retries and rate limits, CI polls, the wait for re-run checks)
ends at once on Ctrl-C or SIGTERM. ``ManualClock`` is its scripted twin for tests: time moves
only when something sleeps on it, so a three-hour CI timeout is checked in microseconds.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from thirdshift.errors import Interrupted


class Clock(Protocol):
    """Wall time, monotonic time and an interruptible wait."""

    def now(self) -> datetime:
        """The current time, timezone-aware in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never goes backwards: for durations."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; raises ``Interrupted`` as soon as the caller is asked to stop."""
        ...

    def salvaging(self, seconds: float) -> None:
        """From now on an interrupt no longer cuts a wait short, for ``seconds`` of waiting in
        all: the Failed run that follows an interrupt keeps its GitHub retries and rate-limit
        waits, within a bound."""
        ...


class SystemClock:
    """The machine's clock. ``interrupt`` (when given) cuts every ``sleep`` short."""

    def __init__(self, interrupt: threading.Event | None = None) -> None:
        self._interrupt = interrupt
        self._salvage_until: float | None = None

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def salvaging(self, seconds: float) -> None:
        self._salvage_until = time.monotonic() + seconds

    def sleep(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        if self._salvage_until is not None:
            left = self._salvage_until - time.monotonic()
            if seconds > left:
                raise Interrupted("interrupted (the salvage's time for waiting is spent)")
            time.sleep(seconds)
        elif self._interrupt is None:
            time.sleep(seconds)
        elif self._interrupt.wait(seconds):
            raise Interrupted("interrupted")


class ManualClock:
    """A clock that moves only when slept on (or ``advance``d). ``interrupt_after`` plays a
    Ctrl-C that many seconds from the start: the sleep that reaches it sets ``interrupt`` (when
    given, as the signal handler would) and raises ``Interrupted``. ``slept`` records every
    wait."""

    def __init__(
        self,
        start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
        *,
        interrupt_after: float | None = None,
        interrupt: threading.Event | None = None,
    ) -> None:
        self._start = start
        self.elapsed = 0.0
        self.interrupt_after = interrupt_after
        self.interrupt = interrupt
        self.slept: list[float] = []
        self.salvage_until: float | None = None

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.elapsed)

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        self.elapsed += seconds

    def salvaging(self, seconds: float) -> None:
        self.salvage_until = self.elapsed + seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.elapsed += max(0.0, seconds)
        if self.salvage_until is not None:
            if self.elapsed > self.salvage_until:
                raise Interrupted("interrupted (the salvage's time for waiting is spent)")
            return
        if self.interrupt_after is not None and self.elapsed >= self.interrupt_after:
            if self.interrupt is not None:
                self.interrupt.set()
            raise Interrupted("interrupted")
