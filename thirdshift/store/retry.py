"""Trying a store call again while the database is briefly away (a restart, a failover, a
blip of the network): what a Run must record at its end is worth waiting for, within a bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from thirdshift.errors import StoreError

T = TypeVar("T")

FIRST_DELAY_SECONDS = 0.5
LONGEST_DELAY_SECONDS = 5.0


def backoff(attempt: int) -> float:
    """The wait before try ``attempt + 1`` (from 0): doubling from half a second, at most 5 s."""
    return min(LONGEST_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2.0 ** min(attempt, 16))


def retrying(
    call: Callable[[], T],
    *,
    seconds: float,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    on_retry: Callable[[StoreError], None] = lambda _error: None,
) -> T:
    """``call()``, tried again with backoff on a ``StoreError`` for up to ``seconds`` in all;
    the last error is raised once that time is spent. ``on_retry`` hears of the first failure
    only (one warning per outage, not one per try)."""
    deadline = monotonic() + seconds
    attempt = 0
    while True:
        try:
            return call()
        except StoreError as error:
            delay = backoff(attempt)
            if monotonic() + delay > deadline:
                raise
            if attempt == 0:
                on_retry(error)
            attempt += 1
            sleep(delay)
