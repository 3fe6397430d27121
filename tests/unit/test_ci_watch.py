"""CI watch and Inherited failures, with a scripted checks source and a fake clock."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import pytest

from thirdshift.clock import ManualClock
from thirdshift.errors import Interrupted, ThirdshiftError
from thirdshift.records import CheckRun, CommitStatus
from thirdshift.runs.rules.ci_watch import CiResult, inherited_failures, summarize, watch_ci

HEAD = "abcdef1234567890abcdef1234567890abcdef12"


def check(
    name: str, status: str = "completed", conclusion: str | None = "success", id: int = 1
) -> CheckRun:
    return CheckRun(
        id=id, name=name, head_sha=HEAD, status=status, conclusion=conclusion, html_url="u"
    )


@dataclass
class ScriptedChecks:
    """Each poll takes the next snapshot of check runs; the last one repeats."""

    snapshots: deque[tuple[CheckRun, ...]]
    statuses: tuple[CommitStatus, ...] = ()
    polls: int = 0

    def check_runs(self, sha: str) -> tuple[CheckRun, ...]:
        self.polls += 1
        return self.snapshots.popleft() if len(self.snapshots) > 1 else self.snapshots[0]

    def commit_statuses(self, sha: str) -> tuple[CommitStatus, ...]:
        return self.statuses


@dataclass
class FakeClock:
    """Time moves only when the watch waits; ``now`` is the seconds it has waited so far."""

    lines: list[str] = field(default_factory=list)
    manual: ManualClock = field(default_factory=ManualClock)

    @property
    def now(self) -> float:
        return self.manual.monotonic()


def watch(
    checks: ScriptedChecks, clock: FakeClock, interrupt_after: float | None = None
) -> CiResult:
    clock.manual.interrupt_after = interrupt_after
    return watch_ci(
        checks,
        HEAD,
        grace_seconds=60,
        poll_seconds=10,
        progress=clock.lines.append,
        clock=clock.manual,
    )


def test_no_checks_within_the_grace_period_counts_as_passing() -> None:
    """CI absent: after the grace period the head is green."""
    clock = FakeClock()
    result = watch(ScriptedChecks(deque([()])), clock)
    assert result.absent
    assert result.green
    assert clock.lines == [
        "waiting up to 60s for CI on abcdef1",
        "no CI checks appeared on abcdef1; counting that as passing",
    ]
    assert clock.now >= 60


def test_pending_checks_are_watched_until_done_printing_only_changes() -> None:
    """The count line appears when the pending count changes, not on every poll."""
    running = (check("lint", "in_progress", None), check("tests", "queued", None, id=2))
    one_left = (check("lint"), check("tests", "in_progress", None, id=2))
    done = (check("lint"), check("tests", id=2))
    clock = FakeClock()
    polls: deque[tuple[CheckRun, ...]] = deque(
        [running, running, one_left, one_left, *[one_left] * 6, done]
    )
    result = watch(ScriptedChecks(polls), clock)
    assert result.green
    assert not result.absent
    assert clock.lines == [
        "waiting up to 60s for CI on abcdef1",
        "CI on abcdef1: 2 of 2 checks still running",
        "CI on abcdef1: 1 of 2 checks still running",
        "CI passed on abcdef1",
    ]


def test_green_waits_out_the_grace_period_for_late_checks() -> None:
    """One workflow finished green at once, a second registers its checks later: the watch
    sees it because green is only concluded after the grace period."""
    early = (check("lint"),)
    late = (check("lint"), check("e2e", conclusion="failure", id=2))
    clock = FakeClock()
    result = watch(ScriptedChecks(deque([early, early, early, late])), clock)
    assert result.failed == ("e2e",)


def test_checks_pending_past_the_timeout_fail_the_watch_naming_them() -> None:
    """A check stuck in the queue (no runner) does not hold the Run forever."""
    stuck = (check("tests", "queued", None),)
    clock = FakeClock()
    with pytest.raises(ThirdshiftError, match=r"still pending after 100s: tests"):
        watch_ci(
            ScriptedChecks(deque([stuck])),
            HEAD,
            grace_seconds=60,
            poll_seconds=10,
            progress=clock.lines.append,
            clock=clock.manual,
            timeout_seconds=100,
        )


def test_red_checks_are_named() -> None:
    """A failed check is reported by name with its record for logs and re-runs."""
    clock = FakeClock()
    result = watch(
        ScriptedChecks(deque([(check("lint"), check("tests", conclusion="failure", id=2))])), clock
    )
    assert result.failed == ("tests",)
    assert result.failed_checks[0].name == "tests"
    assert clock.lines[-1] == "CI failed on abcdef1: tests"


def test_checks_that_vanish_mid_watch_are_an_error() -> None:
    """Checks seen, then none: CI cannot be verified."""
    with pytest.raises(ThirdshiftError, match="disappeared"):
        watch(ScriptedChecks(deque([(check("tests", "queued", None),), ()])), FakeClock())


def test_an_interrupt_stops_the_watch() -> None:
    """Ctrl-C during the watch ends it at the next wait."""
    with pytest.raises(Interrupted):
        watch(
            ScriptedChecks(deque([(check("tests", "queued", None),)])),
            FakeClock(),
            interrupt_after=5,
        )


def test_the_newest_run_of_a_check_is_the_one_that_counts() -> None:
    """After a Check re-run, the new attempt decides."""
    snapshot = summarize([check("tests", conclusion="failure", id=1), check("tests", id=5)], [])
    assert snapshot.passed == ("tests",)
    assert snapshot.failed == ()


def test_commit_statuses_count_like_checks() -> None:
    """success passes, pending waits, failure and error fail."""
    statuses = [
        CommitStatus("ci/a", "success", None),
        CommitStatus("ci/b", "pending", None),
        CommitStatus("ci/c", "error", None),
    ]
    snapshot = summarize([], statuses)
    assert (snapshot.passed, snapshot.pending, snapshot.failed) == (("ci/a",), ("ci/b",), ("ci/c",))


def test_a_failure_is_inherited_only_when_it_also_failed_on_the_base() -> None:
    """Failed on the base too: inherited. Passing, pending or missing there: our own."""
    base = [
        check("lint", conclusion="failure", id=1),
        check("tests", id=2),
        check("e2e", "in_progress", None, id=3),
    ]
    assert inherited_failures(["lint", "tests", "e2e", "docs"], base, []) == ("lint",)
