"""The Repair loop: keep one pull request mergeable and green, and Self-merge it on request.

Each round merges the Base branch in (a merge, never a rebase; a conflict starts a conflict
Repair), pushes, and watches CI on the head. Red checks that also failed on the Base commit last
merged in are Inherited failures and get no Repair; our own red checks start a CI-fix Repair.
A CI-fix Repair that leaves the head unchanged earns one Check re-run of the failed jobs; red
again is a Declined CI fix. A Base branch that moved while CI ran is merged again. RepairBudgets: at
most ``max_repairs`` Repairs and ``max_upstream_moves`` upstream moves per Run.

The loop reaches git, GitHub and the agent only through the private ``_Outside`` seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.errors import ThirdshiftError
from thirdshift.records import CheckRun, PullRequestInfo
from thirdshift.runs.rules.ci_watch import CiResult


class RunFailed(ThirdshiftError):
    """The Repair loop could not bring the pull request to green; the message is the cause."""


class BudgetSpent(RunFailed):
    """A budget (Repairs or upstream moves) was spent."""


class DeclinedCiFix(RunFailed):
    """A CI-fix Repair changed nothing and the re-run of the failed checks stayed red."""


class InheritedFailure(RunFailed):
    """Only checks that also fail on the Base branch are red: nothing for this branch to fix.
    ``checks`` are those checks, red on ``base_sha`` of the Base branch too."""

    def __init__(self, message: str, checks: Sequence[str] = (), base_sha: str = "") -> None:
        super().__init__(message)
        self.checks = tuple(checks)
        self.base_sha = base_sha


class PolicyRefusal(RunFailed):
    """GitHub refused the Self-merge and a further round found nothing to fix. The pull
    request stays ready."""


class MergeRefusedError(ThirdshiftError):
    """Raised by the seam when GitHub refuses a Self-merge."""


class HeadMoved(MergeRefusedError):
    """The pull request's head moved after CI was watched (someone pushed): the next round
    merges it in and watches CI again, spending an upstream move."""


class MergeHeld(PolicyRefusal):
    """A person stopped the Self-merge: the pull request was turned back to a draft, closed, or
    retargeted. thirdshift never overrides that; the pull request is left as they left it. (Also
    held: commits whose messages would close other issues once merged.)"""


def merge_held(pull: PullRequestInfo, base_branch: str) -> str | None:
    """Why a person's decision stops the Self-merge, or None. thirdshift marked the pull request
    ready itself before the loop, and only a Failed run drafts it: a draft now is a person's."""
    if pull.state != "open":
        return f"pull request {pull.html_url} is {pull.state}; nothing to merge"
    if pull.draft:
        return (
            f"pull request {pull.html_url} was turned back to a draft, so it is not merged; "
            "mark it ready and run thirdshift with --merge again to merge it"
        )
    if pull.base_ref != base_branch:
        return (
            f"pull request {pull.html_url} now targets {pull.base_ref}, not {base_branch}; "
            "not merging a pull request someone retargeted: run thirdshift again on it"
        )
    return None


def merge_not_yet(pull: PullRequestInfo, head: str) -> str | None:
    """Why GitHub's answer does not allow the Self-merge now (another round may change it), or
    None: mergeable as GitHub reports it, at the head whose CI was watched."""
    if pull.head_sha != head:
        return f"its head moved to {pull.head_sha[:7]} after CI was watched on {head[:7]}"
    if pull.mergeable is None:
        return "GitHub has not said whether it can be merged"
    if not pull.mergeable:
        return f"GitHub says it cannot be merged ({pull.mergeable_state})"
    return None


@dataclass(frozen=True)
class BaseMerge:
    """The result of merging the Base branch in: ``status`` is up-to-date, merged or conflict;
    ``base_sha`` the Base commit merged."""

    status: str
    base_sha: str
    conflicted_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class RepairBudgets:
    max_repairs: int = 5
    max_upstream_moves: int = 5


@dataclass(frozen=True)
class LoopResult:
    head: str
    merged: bool
    ci_absent: bool
    repairs: int
    upstream_moves: int


class _Outside(Protocol):
    """The world as the Repair loop sees it."""

    base_branch: str

    def merge_base(self) -> BaseMerge:
        """Fetch and merge origin/<base> into the Issue branch; leave a conflict in progress."""
        ...

    def merge_problem(self, base_sha: str) -> str | None:
        """After a conflict Repair: why the merge is not finished, or None when it is."""
        ...

    def push(self) -> str:
        """Push the Issue branch (never forced) and return the head pushed."""
        ...

    def head(self) -> str:
        """The Issue branch's current head in the Worktree."""
        ...

    def foreign_to_review(self) -> tuple[str, ...]:
        """Commits others pushed to the Issue branch that were merged in and that no session has
        reviewed yet (each returned once)."""
        ...

    def watch_ci(self, head: str) -> CiResult:
        """Watch CI on ``head`` until it has an answer."""
        ...

    def inherited(self, failed: Sequence[str], base_sha: str) -> tuple[str, ...]:
        """Which of ``failed`` also failed on ``base_sha``."""
        ...

    def base_moved(self, base_sha: str) -> bool:
        """Has origin/<base> moved past ``base_sha``?"""
        ...

    def repair(
        self,
        number: int,
        cause: str,
        conflict: BaseMerge | None,
        ci: CiResult | None,
        inherited: Sequence[str],
        foreign: Sequence[str] = (),
    ) -> None:
        """Run Repair session ``repair-<number>`` for a conflict, red CI, or a review of the
        ``foreign`` commits people pushed."""
        ...

    def rerun_failed(self, checks: Sequence[CheckRun]) -> None:
        """Re-run the failed GitHub Actions jobs behind ``checks``."""
        ...

    def self_merge(self, head: str) -> None:
        """Merge the pull request at exactly ``head``; MergeRefusedError when GitHub refuses."""
        ...

    def progress(self, line: str) -> None: ...


class RepairLoop:
    def __init__(self, outside: _Outside, budgets: RepairBudgets, *, merge: bool) -> None:
        self._outside = outside
        self._budgets = budgets
        self._merge = merge
        self._repairs = 0
        self._moves = 0
        self._rerun_head: str | None = None
        self._refused: tuple[str, int, int] | None = None

    def run(self) -> LoopResult:
        """Round after round until the pull request is green (and merged, for a Merge run), or
        raise the RunFailed that says why not."""
        outside = self._outside
        while True:
            merged_base = self._merge_base()
            head = outside.push()
            if self._review_foreign():
                continue
            ci = outside.watch_ci(head)
            if ci.green:
                result = self._when_green(head, ci, merged_base)
                if result is not None:
                    return result
                continue
            self._when_red(head, ci, merged_base)

    def _merge_base(self) -> BaseMerge:
        """The Base branch merged in; a conflict is repaired first."""
        outside = self._outside
        merged_base = outside.merge_base()
        if merged_base.status == "conflict":
            cause = (
                f"merging origin/{outside.base_branch} conflicted in "
                f"{', '.join(merged_base.conflicted_paths)}"
            )
            self._spend_repair(cause)
            outside.repair(self._repairs, cause, merged_base, None, ())
            problem = outside.merge_problem(merged_base.base_sha)
            if problem is not None:
                raise RunFailed(problem)
        return merged_base

    def _review_foreign(self) -> bool:
        """Whether a session reviewed commits people with push access added to the branch
        (against the issue, before CI is trusted or anything is merged)."""
        outside = self._outside
        foreign = outside.foreign_to_review()
        if not foreign:
            return False
        shown = "; ".join(foreign[:3]) + (
            f"; and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        )
        cause = f"commits thirdshift did not make were merged in ({shown})"
        self._spend_repair(cause)
        outside.repair(self._repairs, cause, None, None, (), foreign)
        return True

    def _when_green(self, head: str, ci: CiResult, merged_base: BaseMerge) -> LoopResult | None:
        """The result once CI is green (and, for a Merge run, the merge done); None for
        another round."""
        outside, base = self._outside, self._outside.base_branch
        if outside.base_moved(merged_base.base_sha):
            self._spend_move(f"origin/{base} moved while CI ran; merging it again")
            return None
        if not self._merge:
            return self._result(head, ci, merged=False)
        if self._refused == (head, self._repairs, self._moves):
            raise PolicyRefusal(
                f"GitHub refused to merge at {head[:7]} and nothing was left to fix"
            )
        outside.progress(f"merging the pull request into {base} at {head[:7]}")
        try:
            outside.self_merge(head)
        except HeadMoved as moved:
            # Not a refusal to retry once: each push by someone else is a new round,
            # bounded like a moving Base branch.
            self._spend_move(f"the merge waits: {moved}; merging it in again", head=True)
            return None
        except MergeRefusedError as refusal:
            outside.progress(f"the merge failed: {refusal}")
            self._refused = (head, self._repairs, self._moves)
            return None
        return self._result(head, ci, merged=True)

    def _when_red(self, head: str, ci: CiResult, merged_base: BaseMerge) -> None:
        """A red CI: Inherited failures fail the Run, its own are repaired (or re-run)."""
        outside, base = self._outside, self._outside.base_branch
        inherited = outside.inherited(ci.failed, merged_base.base_sha)
        own = tuple(name for name in ci.failed if name not in inherited)
        if inherited:
            outside.progress(
                f"Inherited failures (also failing on {base} at "
                f"{merged_base.base_sha[:7]}): {', '.join(inherited)}"
            )
        if not own:
            if outside.base_moved(merged_base.base_sha):
                self._spend_move(f"origin/{base} moved; merging it again")
                return
            names = ", ".join(inherited)
            raise InheritedFailure(
                f"CI red on {head[:7]} only from Inherited failures (also failing on "
                f"{base} at {merged_base.base_sha[:7]}): {names}; the branch's own changes "
                f"pass, so fix {names} on {base} first, then run thirdshift on the issue again "
                "to merge the fix in and watch CI once more",
                inherited,
                merged_base.base_sha,
            )
        if self._rerun_head == head:
            raise DeclinedCiFix(
                f"CI red on {head[:7]} ({', '.join(own)}) and the Repair found nothing to "
                "fix on the branch"
            )
        cause = f"CI failed on {head[:7]}: {', '.join(own)}"
        self._spend_repair(cause)
        outside.repair(self._repairs, cause, None, ci, inherited)
        if outside.head() == head:
            own_checks = [check for check in ci.failed_checks if check.name in own]
            outside.progress(
                f"the Repair changed nothing; re-running the failed checks on {head[:7]}: "
                f"{', '.join(own)}"
            )
            outside.rerun_failed(own_checks)
            self._rerun_head = head

    def _spend_repair(self, cause: str) -> None:
        if self._repairs >= self._budgets.max_repairs:
            raise BudgetSpent(
                f"repairs exhausted: {cause} after {self._budgets.max_repairs} Repairs"
            )
        self._repairs += 1
        self._outside.progress(
            f"{cause}; starting Repair {self._repairs} of {self._budgets.max_repairs}"
        )

    def _spend_move(self, line: str, *, head: bool = False) -> None:
        if self._moves >= self._budgets.max_upstream_moves:
            moving = "the pull request's head" if head else f"origin/{self._outside.base_branch}"
            raise BudgetSpent(
                f"{moving} kept moving: merged it again {self._budgets.max_upstream_moves} times"
            )
        self._moves += 1
        self._outside.progress(line)

    def _result(self, head: str, ci: CiResult, *, merged: bool) -> LoopResult:
        return LoopResult(head, merged, ci.absent, self._repairs, self._moves)
