"""The database half of a Claim, the Lease (ADR 0003): taken before a Run changes anything,
renewed while it lives, given up when it ends; its fence refuses every write after it is lost."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import LeaseLost, NotClaimed, ThirdshiftError
from thirdshift.records import Lease, Repository
from thirdshift.store import Store
from thirdshift.store.retry import backoff, retrying


class LeaseKeeper:
    """The database half of a Claim: taken before anything changes, renewed every third of its
    length while the Run lives, given up when the Run ends. A Run that finds the Lease held
    elsewhere stops before it starts; one that loses it (another Run took it over, or renewal
    kept failing until it expired) is told through ``on_lost`` and its fence (``check``)
    refuses every later write. A store error is not a lost Lease: the fence asks again while
    the Lease's last known expiry is ahead, and the release at the end is tried again for up to
    ``release_seconds`` (adr/0028)."""

    def __init__(
        self,
        store: Store,
        repository: Repository,
        issue_number: int | None,
        seconds: float,
        *,
        on_lost: Callable[[], None] = lambda: None,
        owner: str = "",
        clock: Clock | None = None,
        release_seconds: float = 0.0,
    ) -> None:
        self._clock = clock or SystemClock()
        self._release_seconds = release_seconds
        # When this process last knew the Lease held, on its own monotonic clock: taken before
        # the asking, so the Lease's real expiry is never earlier than this plus its length.
        self._known_until = 0.0
        self._owner_name = owner
        self._store = store
        self._repository = repository
        self._issue_number = issue_number
        self._ttl = timedelta(seconds=seconds)
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._lease: Lease | None = None
        self._thread: threading.Thread | None = None
        self.lost = False

    def __enter__(self) -> Lease:
        # One owner per Run: two Runs in one process must never share a Lease.
        who = self._owner_name or "thirdshift"
        owner = f"{who}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        asked = self._clock.monotonic()
        lease = self._store.acquire_lease(self._repository, self._issue_number, owner, self._ttl)
        if lease is None:
            held = self._store.lease_of(self._repository, self._issue_number)
            holder = f"{held.owner} until {held.expires_at:%H:%M:%S} UTC" if held else "another Run"
            what = (
                "the repository's Architect Lease"
                if self._issue_number is None
                else f"issue #{self._issue_number}"
            )
            raise NotClaimed(
                f"{what} is claimed by {holder}; wait for that Run to end "
                "(or for its Lease to expire if it died)"
            )
        self._lease = lease
        self._known_until = asked + self._ttl.total_seconds()
        self._thread = threading.Thread(target=self._renew, name="thirdshift-lease", daemon=True)
        self._thread.start()
        return lease

    def check(self) -> None:
        """The fence, called right before every write to GitHub and every push: raises
        LeaseLost unless the database still says this Run holds the Lease."""
        lease = self._lease
        if self.lost or lease is None or not self._held(lease):
            self._lose()
            raise self.lost_error()

    def _held(self, lease: Lease) -> bool:
        """Whether the database says the Lease is held. While it cannot say (a store error:
        unknown, not lost), ask again with backoff until the Lease's last known expiry; past
        it, the Lease may be another Run's, so it counts as lost."""
        attempt = 0
        while True:
            try:
                held = self._store.lease_held(lease)
            except ThirdshiftError:
                delay = backoff(attempt)
                if self._clock.monotonic() + delay >= self._known_until:
                    return False
                attempt += 1
                self._clock.sleep(delay)
                continue
            return held

    def lost_error(self) -> LeaseLost:
        """The cause of a Run that lost its Lease."""
        if self._issue_number is None:  # an Architect run's: the repository's, not an issue's
            return LeaseLost(
                "lost the repository's Architect Lease: another Architect run holds it now "
                "(this one was paused or cut off past its Lease); it changed nothing more on "
                "GitHub"
            )
        return LeaseLost(
            f"lost the Lease on #{self._issue_number}: another Run holds the issue now (this "
            "one was paused or cut off past its Lease); it changed nothing more on GitHub"
        )

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            self._on_lost()

    def _renew(self) -> None:
        wait = self._ttl.total_seconds() / 3
        attempt = 0
        while not self._stop.wait(wait):
            lease = self._lease
            if lease is None:
                return
            asked = self._clock.monotonic()
            try:
                renewed = self._store.renew_lease(lease, self._ttl)
            except ThirdshiftError:
                # Tried again soon: the Lease is still ours until its expiry.
                wait = min(backoff(attempt), self._ttl.total_seconds() / 3)
                attempt += 1
                continue
            if renewed is None:
                self._lose()
                return
            wait, attempt = self._ttl.total_seconds() / 3, 0
            self._lease = renewed
            self._known_until = asked + self._ttl.total_seconds()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        lease = self._lease
        if lease is not None and not self.lost:
            # An interrupt (a ThirdshiftError) ends the trying too: it expires by itself.
            with contextlib.suppress(ThirdshiftError):
                retrying(
                    lambda: self._store.release_lease(lease),
                    seconds=self._release_seconds,
                    sleep=self._clock.sleep,
                    monotonic=self._clock.monotonic,
                )
