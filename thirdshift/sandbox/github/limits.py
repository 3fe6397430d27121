"""What the GitHub stand-in keeps per exchange: the record of each request and response,
injected faults, GitHub's hourly rate-limit windows and headers, its secondary limits (points
and writes a minute), and weak ETags for conditional requests."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

RATE_LIMIT = 5000
RATE_WINDOW = 3600


@dataclass(frozen=True)
class Exchange:
    """One REST or GraphQL request and the response the stand-in gave it."""

    method: str
    path: str
    query: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    status: int
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes

    def header(self, name: str) -> str | None:
        """The first response header called ``name`` (any case), or None."""
        return next((v for k, v in self.response_headers if k.lower() == name.lower()), None)


SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {request_id}."
)


@dataclass
class SecondaryLimits:
    """GitHub's secondary limits as its docs state them, per user (or App): points a minute (a
    read costs 1, a content-creating request 5) and content-creating requests a minute. None: not
    enforced (the default: most tests are not about pacing). A request past either is refused
    with a 403, GitHub's message and ``retry-after``; one sent again before that wait is over is
    counted in ``early`` (and refused again). ``now`` is the stand-in's clock, which a test may
    share with the client it paces."""

    points_per_minute: int | None = None
    writes_per_minute: int | None = None
    retry_after: int = 60
    now: Callable[[], float] = time.monotonic
    refused: int = 0
    early: int = 0
    _spent: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    _blocked_until: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, who: str, write: bool) -> int | None:
        """None when ``who`` may send this request (content-creating when ``write``: any
        REST method but GET and HEAD, a GraphQL mutation) now, and it is counted; else the
        seconds its ``retry-after`` asks for."""
        if self.points_per_minute is None and self.writes_per_minute is None:
            return None
        with self._lock:
            now = self.now()
            blocked = self._blocked_until.get(who)
            if blocked is not None and now < blocked:
                self.early += 1
                self.refused += 1
                return max(1, round(blocked - now))
            spent = self._spent.setdefault(who, deque())
            while spent and spent[0][0] <= now - 60:
                spent.popleft()
            points = sum(p for _, p in spent) + (5 if write else 1)
            writes = sum(1 for _, p in spent if p == 5) + (1 if write else 0)
            over_points = self.points_per_minute is not None and points > self.points_per_minute
            over_writes = (
                write and self.writes_per_minute is not None and writes > self.writes_per_minute
            )
            if over_points or over_writes:
                self.refused += 1
                self._blocked_until[who] = now + self.retry_after
                return self.retry_after
            spent.append((now, 5 if write else 1))
            return None


@dataclass
class Faults:
    """Injected misbehaviour of the REST API: random error statuses (or rate-limit 403s), a
    delay, and writes whose answer is lost. ``count`` caps how many errors (lost answers
    included) are injected; None means no cap.

    ``retry_after`` puts that ``Retry-After`` header (seconds) on the injected server errors.
    ``lost_answers`` is the chance that a REST write which succeeded is answered 502 anyway:
    the change is made, the caller cannot know it, as when GitHub's answer is lost on the way.
    ``rate_limited_until`` (a Unix time) answers every REST request with GitHub's rate-limit
    403 until then, its reset header naming that time."""

    error_rate: float = 0.0
    statuses: tuple[int, ...] = (500,)
    rate_limit_403: bool = False
    delay_ms: int = 0
    count: int | None = None
    rng: random.Random = field(default_factory=random.Random)
    retry_after: int | None = None
    lost_answers: float = 0.0
    rate_limited_until: float = 0.0

    def draw(self) -> int | None:
        """The status to fail this request with, or None to serve it."""
        if self._spent() or self.error_rate <= 0 or self.rng.random() >= self.error_rate:
            return None
        self._spend()
        return 403 if self.rate_limit_403 else self.rng.choice(self.statuses)

    def draw_lost(self) -> bool:
        """Whether to lose the answer of the write just made."""
        if self._spent() or self.lost_answers <= 0 or self.rng.random() >= self.lost_answers:
            return False
        self._spend()
        return True

    def limited(self, now: float) -> bool:
        """Whether the rate-limit window set by ``rate_limited_until`` is still open."""
        return now < self.rate_limited_until

    def _spent(self) -> bool:
        return self.count is not None and self.count <= 0

    def _spend(self) -> None:
        if self.count is not None:
            self.count -= 1


@dataclass
class _Window:
    limit: int
    reset: int
    used: int = 0


class RateLimits:
    """GitHub's hourly budget per caller and resource (``core``, ``graphql``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], _Window] = {}

    def window(self, who: str, resource: str, limit: int) -> _Window:
        now = int(time.time())
        with self._lock:
            found = self._windows.get((who, resource))
            if found is None or found.reset <= now:
                found = _Window(limit, now + RATE_WINDOW)
                self._windows[(who, resource)] = found
            return found

    def spend(self, who: str, resource: str, limit: int) -> _Window:
        found = self.window(who, resource, limit)
        with self._lock:
            found.used += 1
        return found


def rate_headers(window: _Window, resource: str, remaining: int | None = None) -> dict[str, str]:
    left = max(window.limit - window.used, 0) if remaining is None else remaining
    return {
        "X-RateLimit-Limit": str(window.limit),
        "X-RateLimit-Remaining": str(left),
        "X-RateLimit-Reset": str(window.reset),
        "X-RateLimit-Used": str(window.used),
        "X-RateLimit-Resource": resource,
    }


def etag(body: bytes) -> str:
    return 'W/"' + hashlib.sha256(body).hexdigest()[:40] + '"'


def etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    strong = etag.removeprefix("W/")
    return any(
        tag.strip() in ("*", etag, strong) or tag.strip().removeprefix("W/") == strong
        for tag in header.split(",")
    )
