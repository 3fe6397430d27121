"""Pacing under GitHub's secondary rate limits: at most so many requests a minute, and so many
content-creating writes a minute and an hour, across every Run and poll of one process.

GitHub's secondary limits count requests, not points of the hourly budget: a daemon that asks
too much too fast is refused (403 or 429 with ``retry-after``) however much of its hourly budget
is left. ``wait_before`` is the rule, pure: how long a request must wait so that sending it keeps
within a ``PaceBudget``. ``Pacer`` keeps the times of the requests and writes sent, and makes
each request wait its turn; every GitHub adapter of a process acting as one user (or one App
installation) on one GitHub shares one.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MINUTE = 60.0
HOUR = 3600.0
MARGIN = 1.0
"""Seconds a request is counted beyond GitHub's minute: it reaches GitHub a little after it is
counted here, so GitHub's window lets it go a little later than this one would."""
WRITES = frozenset({"POST", "PATCH", "PUT", "DELETE"})
"""The methods GitHub counts as content-creating (and 5 points each on its per-minute budget);
a GraphQL query, a POST, is not (``Request.creates``)."""


@dataclass(frozen=True)
class PaceBudget:
    """The share of GitHub's secondary limits a process keeps to: requests a minute, and writes
    a minute and an hour. GitHub allows 900 points a minute (a read costs 1, a write 5: so
    requests plus four times the writes must stay under 900), and 80 and 500 writes."""

    requests_per_minute: int = 600
    writes_per_minute: int = 60
    writes_per_hour: int = 400


def wait_before(
    now: float,
    requests: Sequence[float],
    writes: Sequence[float],
    *,
    write: bool,
    budget: PaceBudget,
) -> float:
    """Seconds to wait before a request (a write when ``write``) so that, sent then, it keeps
    within ``budget``; ``requests`` and ``writes`` are the times of those already sent, oldest
    first. 0.0: send it now."""
    waits = [0.0, _wait(now, requests, budget.requests_per_minute, MINUTE + MARGIN)]
    if write:
        waits.append(_wait(now, writes, budget.writes_per_minute, MINUTE + MARGIN))
        waits.append(_wait(now, writes, budget.writes_per_hour, HOUR))
    return max(waits)


def _wait(now: float, sent: Sequence[float], most: int, window: float) -> float:
    """How long until fewer than ``most`` of ``sent`` fall in the ``window`` before then."""
    recent = [moment for moment in sent if moment > now - window]
    if len(recent) < most:
        return 0.0
    # The request ``most`` places from the end must leave the window first.
    return max(0.0, recent[-most] + window - now)


class Pacer:
    """Makes each request wait its turn under ``budget``, timed by ``monotonic`` (shared by
    every adapter of the process, so the same clock as their waits)."""

    def __init__(
        self, budget: PaceBudget, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.budget = budget
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._requests: deque[float] = deque()
        self._writes: deque[float] = deque()
        self._held_until = 0.0
        # The request a thread's ``before`` let go, counted then: its ``sent`` is not counted
        # again. Counted at the check, two threads cannot both take the last place in a minute.
        self._reserved = threading.local()

    def before(
        self,
        write: bool,
        sleep: Callable[[float], None],
        *,
        say: Callable[[str], None] = lambda _line: None,
        most: float = math.inf,
    ) -> float | None:
        """Wait (with ``sleep``, the caller's: a Run's ends early when the Run is stopped)
        until a request (a write when ``write``) may be sent; a write is counted as it goes.
        A wait of a second or more is said on ``say``, the caller's own progress lines. None
        once it may go; the wait instead, without waiting, when it is longer than ``most``."""
        self._unreserve()  # an earlier call of this thread that sent nothing gives its place back
        while True:
            with self._lock:
                now = self._monotonic()
                self._forget(now)
                paced = wait_before(
                    now, self._requests, self._writes, write=write, budget=self.budget
                )
                held = self._held_until - now
                wait = max(paced, held)
                if wait <= 0:
                    self._requests.append(now)
                    self._reserved.at = now
                    if write:
                        self._writes.append(now)
                    return None
            if wait > most:
                return wait
            if held >= paced and held >= 1.0:
                say(f"pacing GitHub requests: waiting {wait:.0f}s, as GitHub's rate limit asked")
            elif wait >= 1.0:
                say(
                    f"pacing GitHub requests: waiting {wait:.0f}s to stay under "
                    f"{self._limits(write)} (GitHub's secondary limits)"
                )
            sleep(wait)
            most -= wait

    def hold(self, seconds: float) -> None:
        """GitHub refused a request for a secondary limit and asked for ``seconds``: no request
        of this process goes before then, whichever adapter sends it (the limits are the
        user's, not the Run's)."""
        with self._lock:
            self._held_until = max(self._held_until, self._monotonic() + seconds)

    def sent(self) -> None:
        """A request went out (each page, each retry, each redirect followed): it counts
        against the per-minute budget of every later one, but for the one its thread's
        ``before`` counted already."""
        with self._lock:
            if getattr(self._reserved, "at", None) is not None:
                self._reserved.at = None  # the request its before counted
                return
            now = self._monotonic()
            self._requests.append(now)
            self._forget(now)

    def _unreserve(self) -> None:
        at = getattr(self._reserved, "at", None)
        if at is None:
            return
        self._reserved.at = None
        with self._lock, contextlib.suppress(ValueError):  # already out of the window
            self._requests.remove(at)

    def _forget(self, now: float) -> None:
        while self._requests and self._requests[0] <= now - MINUTE - MARGIN:
            self._requests.popleft()
        while self._writes and self._writes[0] <= now - HOUR:
            self._writes.popleft()

    def _limits(self, write: bool) -> str:
        budget = self.budget
        said = f"github_requests_per_minute ({budget.requests_per_minute})"
        if write:
            said += (
                f", github_writes_per_minute ({budget.writes_per_minute}) and "
                f"github_writes_per_hour ({budget.writes_per_hour})"
            )
        return said
