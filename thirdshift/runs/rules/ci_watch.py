"""CI watch: wait on the checks of one head until none is pending.

A grace period first: if no check run or commit status appears on the head within it, CI is
absent and that counts as passing. Then poll until nothing is pending, printing a line only when
the count changes. Every check on the head counts, not only required ones. The rules
(``summarize``, ``inherited_failures``) are pure; the watch reaches GitHub through a small seam.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.clock import Clock
from thirdshift.errors import ThirdshiftError
from thirdshift.records import CheckRun, CommitStatus

_PASSING = frozenset({"success", "neutral", "skipped"})

# The login of a workflow's own GITHUB_TOKEN: GitHub starts no workflow for what it pushes.
WORKFLOW_TOKEN_LOGIN = "github-actions[bot]"  # noqa: S105 (a login, not a secret)


@dataclass(frozen=True)
class CiSnapshot:
    """The state of every check on one head, by name."""

    pending: tuple[str, ...]
    passed: tuple[str, ...]
    failed: tuple[str, ...]
    failed_checks: tuple[CheckRun, ...]

    @property
    def total(self) -> int:
        return len(self.pending) + len(self.passed) + len(self.failed)


@dataclass(frozen=True)
class CiResult:
    head: str
    absent: bool
    passed: tuple[str, ...]
    failed: tuple[str, ...]
    failed_checks: tuple[CheckRun, ...]

    @property
    def green(self) -> bool:
        return not self.failed


def latest_per_name(checks: Sequence[CheckRun]) -> list[CheckRun]:
    """A re-run adds a newer check run of the same name; only the newest counts."""
    newest: dict[str, CheckRun] = {}
    for check in checks:
        if check.name not in newest or check.id > newest[check.name].id:
            newest[check.name] = check
    return sorted(newest.values(), key=lambda check: check.name)


def summarize(checks: Sequence[CheckRun], statuses: Sequence[CommitStatus]) -> CiSnapshot:
    pending: list[str] = []
    passed: list[str] = []
    failed: list[str] = []
    failed_checks: list[CheckRun] = []
    for check in latest_per_name(checks):
        if check.status != "completed":
            pending.append(check.name)
        elif check.conclusion in _PASSING:
            passed.append(check.name)
        else:
            failed.append(check.name)
            failed_checks.append(check)
    for status in statuses:
        if status.state == "pending":
            pending.append(status.context)
        elif status.state == "success":
            passed.append(status.context)
        else:
            failed.append(status.context)
    return CiSnapshot(tuple(pending), tuple(passed), tuple(failed), tuple(failed_checks))


def inherited_failures(
    failed: Sequence[str], base_checks: Sequence[CheckRun], base_statuses: Sequence[CommitStatus]
) -> tuple[str, ...]:
    """The failed names that also failed on the Base commit last merged in: a name is inherited
    when at least one check of that name exists there and every one of them failed. Pending,
    passing or missing on the base means the failure is our own."""
    base = summarize(base_checks, base_statuses)
    return tuple(
        name
        for name in failed
        if name in base.failed and name not in base.passed and name not in base.pending
    )


class _Checks(Protocol):
    def check_runs(self, sha: str) -> tuple[CheckRun, ...]:
        """Every check run on ``sha``."""
        ...

    def commit_statuses(self, sha: str) -> tuple[CommitStatus, ...]:
        """Every commit status on ``sha``."""
        ...


def watch_ci(
    checks: _Checks,
    head: str,
    *,
    grace_seconds: float,
    poll_seconds: float,
    progress: Callable[[str], None],
    clock: Clock,
    timeout_seconds: float = float("inf"),
) -> CiResult:
    """Watch ``head`` until its CI has an answer. Green is only concluded once the grace
    period is over, so a workflow that registers its checks late is not missed; red is red at
    once. Raises Interrupted promptly when asked to stop, and ThirdshiftError when checks
    vanish mid-watch or are still pending after ``timeout_seconds``."""
    short = head[:7]
    progress(f"waiting up to {grace_seconds:g}s for CI on {short}")
    started = clock.monotonic()
    seen_any = False
    last_count: tuple[int, int] | None = None
    while True:
        snapshot = summarize(checks.check_runs(head), checks.commit_statuses(head))
        in_grace = clock.monotonic() - started < grace_seconds
        if snapshot.total == 0:
            if seen_any:
                raise ThirdshiftError(f"CI checks disappeared on {short}; cannot verify CI")
            if not in_grace:
                progress(f"no CI checks appeared on {short}; counting that as passing")
                return CiResult(head, absent=True, passed=(), failed=(), failed_checks=())
        else:
            seen_any = True
            if not snapshot.pending and (snapshot.failed or not in_grace):
                if snapshot.failed:
                    progress(f"CI failed on {short}: {', '.join(snapshot.failed)}")
                else:
                    progress(f"CI passed on {short}")
                return CiResult(
                    head,
                    absent=False,
                    passed=snapshot.passed,
                    failed=snapshot.failed,
                    failed_checks=snapshot.failed_checks,
                )
            count = (len(snapshot.pending), snapshot.total)
            if snapshot.pending and count != last_count:
                progress(f"CI on {short}: {count[0]} of {count[1]} checks still running")
                last_count = count
            if snapshot.pending and clock.monotonic() - started >= timeout_seconds:
                raise ThirdshiftError(
                    f"CI on {short} still pending after {timeout_seconds:g}s: "
                    f"{', '.join(snapshot.pending)}; check that its runners are up, or raise "
                    "ci_timeout_seconds"
                )
        clock.sleep(poll_seconds)
