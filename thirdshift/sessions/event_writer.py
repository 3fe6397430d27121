"""A session's Session events, written to the store from a thread of their own.

The CLI's stdout is read on the session's thread; a store that refuses a write there (the
database restarting, a network blip) must not stop the reading, or the process supervisor would
kill an agent that is doing its work. So events are queued, and a writer thread writes them in
order, trying again with backoff while the store is away. The Session log holds every line
meanwhile; the session's end waits for the writer to drain, within a bound (adr/0028).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from thirdshift.errors import ThirdshiftError
from thirdshift.records import SessionEvent
from thirdshift.store.retry import backoff

RECENT = 50


MAX_QUEUED = 100_000
"""Events held for the store at most; a session that out-talks an outage keeps the rest in its
Session log only."""


class EventWriter:
    """Writes the events ``put`` to it through ``write`` (the store's ``add_session_events``
    for one session), from a daemon thread. ``warn`` hears once per outage that the store is
    away, and once that it is back. ``put`` never raises and never waits for the store.

    A write that fails with an ``OSError`` (a full disk, an I/O error under the store) is not
    tried again: the error is kept in ``failed``, for the session's owner to stop the session
    on, and later events are counted, not written (adr/0041)."""

    def __init__(
        self,
        write: Callable[[Sequence[SessionEvent]], None],
        *,
        warn: Callable[[str], None],
        sleep: Callable[[float], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        name: str = "thirdshift-events",
    ) -> None:
        self._write = write
        self._warn = warn
        self._monotonic = monotonic
        self._stop = threading.Event()
        self._sleep = sleep or self._wait
        self._lock = threading.Condition()
        self._queue: list[SessionEvent] = []
        self._in_flight = 0
        self._recent: deque[str] = deque(maxlen=RECENT)
        self._count = 0
        self.written = 0
        self.dropped = 0
        self.failed: OSError | None = None
        """The error of the write that failed for good, once one did."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, events: Sequence[SessionEvent]) -> None:
        with self._lock:
            # Bounded while the store is away: past the cap an event is counted, not held (the
            # Session log keeps every line).
            room = max(0, MAX_QUEUED - len(self._queue))
            self._queue.extend(events[:room])
            self.dropped += len(events) - len(events[:room])
            self._count += len(events)
            self._recent.extend(event.summary for event in events)
            self._lock.notify_all()

    @property
    def count(self) -> int:
        """How many events the session produced (written or not)."""
        with self._lock:
            return self._count

    def recent(self) -> tuple[str, ...]:
        """The summaries of the session's last events, oldest first: what the session's end
        reports without reading the store again."""
        with self._lock:
            return tuple(self._recent)

    def close(self, seconds: float) -> int:
        """Wait up to ``seconds`` for every event to be written, then stop the writer. Returns
        how many events were not written (the Session log still holds them)."""
        deadline = self._monotonic() + seconds
        with self._lock:
            while self._queue or self._in_flight:
                left = deadline - self._monotonic()
                if left <= 0:
                    break
                self._lock.wait(min(left, 0.2))
            unwritten = len(self._queue) + self._in_flight
            self._stop.set()
            self._lock.notify_all()
        self._thread.join(timeout=5)
        return unwritten

    def _wait(self, seconds: float) -> None:
        self._stop.wait(seconds)  # cut short when the session's end stops the writer

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stop.is_set():
                    self._lock.wait()
                if self._stop.is_set():
                    return
                batch, self._queue = self._queue, []
                self._in_flight = len(batch)
            if self.failed is None:
                self._write_batch(batch)
            with self._lock:
                if self.failed is not None:
                    self.dropped += len(batch)
                self._in_flight = 0
                self._lock.notify_all()

    def _write_batch(self, batch: list[SessionEvent]) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                self._write(batch)
            except ThirdshiftError as error:
                if attempt == 0:
                    self._warn(
                        f"warning: could not record Session events ({error}); trying again "
                        "(the Session log holds them meanwhile)"
                    )
                self._sleep(backoff(attempt))
                attempt += 1
                continue
            except OSError as error:
                # Not the store being away: trying again fills the disk no less.
                self.failed = error
                return
            self.written += len(batch)
            if attempt:
                self._warn("Session events recorded again: the store is back")
            return
        # Stopped while the store was still away: these stay unwritten (close counts them).
        with self._lock:
            self._queue[:0] = batch
