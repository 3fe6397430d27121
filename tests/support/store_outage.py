"""A database that refuses for a while: a real ``Store`` whose engine fails every statement the
test chooses (all of them, or those naming a table) while an outage lasts, as PostgreSQL does
while it restarts. SQLAlchemy's own event hook raises the driver-level error, so everything
above it (the store's error handling, its callers' retries) runs as it would for real."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from thirdshift.clock import Clock
from thirdshift.store import Store


class Outage:
    """Refuses the statements ``matching`` while it is on: for ``seconds`` of ``clock`` from the
    first statement seen once ``begins()`` says so (or from ``start()``). ``refused`` counts
    what it refused."""

    def __init__(
        self,
        clock: Clock,
        seconds: float,
        matching: Callable[[str], bool] = lambda _statement: True,
        begins: Callable[[], bool] = lambda: False,
    ) -> None:
        self._begins = begins
        self._began = False
        self._clock = clock
        self._seconds = seconds
        self._matching = matching
        self._until: float | None = None
        self._lock = threading.Lock()
        self.refused = 0

    def start(self) -> None:
        with self._lock:
            self._until = self._clock.monotonic() + self._seconds

    def stop(self) -> None:
        with self._lock:
            self._until = None

    def refuses(self, statement: str) -> bool:
        if not self._began and self._begins():
            self._began = True
            self.start()
        with self._lock:
            on = self._until is not None and self._clock.monotonic() < self._until
            if on and self._matching(statement):
                self.refused += 1
                return True
            return False


def store_with_outage(url: str, clock: Clock, outage: Outage) -> Store:
    """A store on ``url`` (migrated) whose statements ``outage`` may refuse."""
    Store.open(url, clock=clock).close()  # migrations first, on a store of its own
    engine = sa.create_engine(url, connect_args={"check_same_thread": False})

    @sa.event.listens_for(engine, "before_cursor_execute")
    def _refuse(
        _connection: Any, _cursor: Any, statement: str, *_args: Any, **_kwargs: Any
    ) -> None:
        if outage.refuses(statement):
            raise sa.exc.OperationalError(
                statement, None, Exception("connection refused (the test's outage)")
            )

    return Store(engine, clock)
