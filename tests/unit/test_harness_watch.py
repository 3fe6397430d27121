"""A daemon whose Harness CLI goes missing stops picking up until it is back, and says so once
each way."""

from __future__ import annotations

from thirdshift.clock import ManualClock
from thirdshift.daemon.harness_watch import LOOK_EVERY_SECONDS, HarnessWatch
from thirdshift.daemon.state import MissingHarness


class Installed:
    """Which Harness CLIs are installed now, and how often they were looked for."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)
        self.looks = 0

    def problem(self, name: str) -> str | None:
        self.looks += 1
        return None if name in self.names else f"{name} is not installed; install it"


def test_a_harness_removed_while_running_stops_pickups_and_says_so_once() -> None:
    clock, installed = ManualClock(), Installed("claude", "codex")
    said: list[str] = []
    watch = HarnessWatch(["claude", "codex"], installed.problem, said.append, clock)
    assert watch.missing_reason() is None

    installed.names.discard("codex")
    clock.advance(LOOK_EVERY_SECONDS)
    for _ in range(3):
        assert watch.missing_reason() == (
            "codex is not installed; install it; pickups wait until the codex Harness is back"
        )
        clock.advance(LOOK_EVERY_SECONDS)
    assert said == [
        "codex is not installed; install it; no Run starts until the codex Harness is back"
    ]
    assert watch.missing() == (MissingHarness("codex", "codex is not installed; install it"),)


def test_pickups_go_on_once_the_harness_is_back_and_that_is_said_once() -> None:
    clock, installed = ManualClock(), Installed()
    said: list[str] = []
    watch = HarnessWatch(["claude"], installed.problem, said.append, clock)
    assert watch.missing_reason() is not None

    installed.names.add("claude")
    clock.advance(LOOK_EVERY_SECONDS)
    assert watch.missing_reason() is None
    clock.advance(LOOK_EVERY_SECONDS)
    assert watch.missing_reason() is None
    assert said[1:] == ["the claude Harness is back; pickups go on"]
    assert len(said) == 2


def test_the_answer_is_kept_between_looks_so_a_poll_of_many_issues_looks_once() -> None:
    clock, installed = ManualClock(), Installed("claude")
    watch = HarnessWatch(["claude", "claude"], installed.problem, lambda _: None, clock)
    for _ in range(50):
        watch.missing_reason()
    assert installed.looks == 1
    clock.advance(LOOK_EVERY_SECONDS)
    watch.missing_reason()
    assert installed.looks == 2
