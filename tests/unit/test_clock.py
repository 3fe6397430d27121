"""The clocks: the system's waits end on an interrupt; the manual one moves only when slept on."""

from __future__ import annotations

import threading
import time
from datetime import UTC

import pytest

from thirdshift.clock import ManualClock, SystemClock
from thirdshift.errors import Interrupted


def test_a_system_clock_sleep_ends_at_once_when_interrupted() -> None:
    """An interrupt set during a long wait ends it promptly with Interrupted."""
    interrupt = threading.Event()
    clock = SystemClock(interrupt)
    threading.Timer(0.05, interrupt.set).start()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        clock.sleep(30)
    assert time.monotonic() - started < 10


def test_a_system_clock_sleep_without_an_interrupt_waits_and_returns() -> None:
    """Uninterrupted, a wait returns after its time; an interrupt set before a wait ends it."""
    interrupt = threading.Event()
    clock = SystemClock(interrupt)
    before = clock.monotonic()
    clock.sleep(0.01)
    assert clock.monotonic() >= before + 0.01
    interrupt.set()
    with pytest.raises(Interrupted):
        clock.sleep(0)


def test_a_system_clock_tells_aware_utc_time() -> None:
    """now() is timezone-aware UTC, so it compares with what the store returns."""
    assert SystemClock().now().tzinfo is UTC


def test_a_manual_clock_moves_only_when_slept_on_and_plays_the_interrupt() -> None:
    """Sleeps add up; the sleep reaching interrupt_after sets the event and raises."""
    interrupt = threading.Event()
    clock = ManualClock(interrupt_after=25, interrupt=interrupt)
    start = clock.now()
    clock.sleep(10)
    clock.sleep(10)
    assert clock.monotonic() == 20
    assert (clock.now() - start).total_seconds() == 20
    assert not interrupt.is_set()
    with pytest.raises(Interrupted):
        clock.sleep(10)
    assert interrupt.is_set()
    assert clock.slept == [10, 10, 10]


def test_salvaging_lets_waits_run_after_an_interrupt_within_a_bound() -> None:
    """Once salvaging, an interrupt set no longer ends a wait; waiting past the bound does."""
    interrupt = threading.Event()
    interrupt.set()
    clock = SystemClock(interrupt)
    clock.salvaging(5)
    clock.sleep(0.01)
    with pytest.raises(Interrupted):
        clock.sleep(10)
    manual = ManualClock(interrupt_after=0)
    manual.salvaging(30)
    manual.sleep(20)
    with pytest.raises(Interrupted):
        manual.sleep(20)
