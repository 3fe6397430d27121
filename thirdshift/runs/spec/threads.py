"""A Ticket Run's thread: its interrupt linked to the Spec run's, and its outcome read back
(adr/0032)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from thirdshift.errors import ThirdshiftError
from thirdshift.runs.outcome import RunOutcome

LINK_SECONDS = 0.05  # how soon a Ticket's wait sees the Spec run's interrupt


class LinkedInterrupt(threading.Event):
    """A Ticket Run's interrupt: set on its own (its Lease was lost: that Ticket alone stops)
    or as soon as one of its ``parents`` is (Ctrl-C, SIGTERM, the Spec run stopping on an
    error: every Ticket salvages its work)."""

    def __init__(self, *parents: threading.Event) -> None:
        super().__init__()
        self._parents = parents

    def is_set(self) -> bool:
        return super().is_set() or any(parent.is_set() for parent in self._parents)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            left = LINK_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return False
            super().wait(min(left, LINK_SECONDS))
        return True


def outcome_of_future(future: Future[RunOutcome]) -> RunOutcome:
    """A Ticket Run's outcome; an error it stopped on before its end is its failure."""
    try:
        return future.result()
    except ThirdshiftError as error:
        return RunOutcome.of_error(error)


def quiet(_url: str) -> None:
    """A Ticket PR's URL is no line of stdout: only the Spec PR's is."""


def no_record(_run_id: int) -> None:
    """The Spec run's id is what a caller learns, not each Ticket Run's."""
