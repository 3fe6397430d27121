"""The Repair loop's rules, in-process, through a scripted Outside."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from thirdshift.records import CheckRun, PullRequestInfo
from thirdshift.runs.rules.ci_watch import CiResult
from thirdshift.runs.rules.repair_loop import (
    BaseMerge,
    BudgetSpent,
    DeclinedCiFix,
    HeadMoved,
    InheritedFailure,
    MergeRefusedError,
    PolicyRefusal,
    RepairBudgets,
    RepairLoop,
    merge_held,
    merge_not_yet,
)

BASE = "b" * 40


def green(head: str) -> CiResult:
    return CiResult(head, absent=False, passed=("tests",), failed=(), failed_checks=())


def red(head: str, *names: str) -> CiResult:
    checks = tuple(
        CheckRun(
            id=i,
            name=n,
            head_sha=head,
            status="completed",
            conclusion="failure",
            html_url="u",
            job_id=i,
            run_id=1,
        )
        for i, n in enumerate(names or ("tests",))
    )
    return CiResult(head, absent=False, passed=(), failed=names or ("tests",), failed_checks=checks)


@dataclass
class ScriptedOutside:
    """A working fake: CI answers come from a queue keyed by call; Repairs may move the head."""

    ci: deque[CiResult]
    repairs_change_head: bool = True
    conflicts: int = 0
    moves: int = 0
    inherited_names: tuple[str, ...] = ()
    refusals: int = 0
    head_moves: int = 0
    moved_on_checks: frozenset[int] = frozenset()
    base_checks: int = 0
    base_branch: str = "main"
    head_sha: str = "h0"
    foreign_after_push: deque[tuple[str, ...]] = field(default_factory=deque)
    calls: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def merge_base(self) -> BaseMerge:
        self.calls.append("merge_base")
        if self.conflicts:
            self.conflicts -= 1
            return BaseMerge("conflict", BASE, ("app.py",))
        return BaseMerge("up-to-date", BASE)

    def merge_problem(self, base_sha: str) -> str | None:
        return None

    def push(self) -> str:
        self.calls.append("push")
        return self.head_sha

    def head(self) -> str:
        return self.head_sha

    def foreign_to_review(self) -> tuple[str, ...]:
        return self.foreign_after_push.popleft() if self.foreign_after_push else ()

    def watch_ci(self, head: str) -> CiResult:
        self.calls.append(f"watch {head}")
        result = self.ci.popleft() if len(self.ci) > 1 else self.ci[0]
        return CiResult(head, result.absent, result.passed, result.failed, result.failed_checks)

    def inherited(self, failed: Sequence[str], base_sha: str) -> tuple[str, ...]:
        return tuple(name for name in failed if name in self.inherited_names)

    def base_moved(self, base_sha: str) -> bool:
        self.base_checks += 1
        if self.base_checks in self.moved_on_checks:
            return True
        if self.moves:
            self.moves -= 1
            return True
        return False

    def repair(self, number, cause, conflict, ci, inherited, foreign=()) -> None:  # type: ignore[no-untyped-def]
        self.calls.append(f"repair-{number}" + (" of " + ",".join(foreign) if foreign else ""))
        if self.repairs_change_head:
            self.head_sha = f"h{number}"

    def rerun_failed(self, checks: Sequence[CheckRun]) -> None:
        self.calls.append("rerun " + ",".join(check.name for check in checks))

    def self_merge(self, head: str) -> None:
        self.calls.append(f"merge {head}")
        if self.head_moves:
            self.head_moves -= 1
            raise HeadMoved(f"its head moved to x after CI was watched on {head}")
        if self.refusals:
            self.refusals -= 1
            raise MergeRefusedError("405 Pull Request is not mergeable")

    def progress(self, line: str) -> None:
        self.lines.append(line)


def loop(outside: ScriptedOutside, *, merge: bool = False) -> RepairLoop:
    return RepairLoop(outside, RepairBudgets(max_repairs=5, max_upstream_moves=5), merge=merge)


def test_a_green_head_ends_the_loop_without_repairs() -> None:
    """Merge base, push, CI green: done in one round."""
    outside = ScriptedOutside(deque([green("")]))
    result = loop(outside).run()
    assert (result.head, result.repairs, result.merged) == ("h0", 0, False)
    assert outside.calls == ["merge_base", "push", "watch h0"]


def test_a_conflict_gets_a_conflict_repair_then_the_loop_carries_on() -> None:
    """The merge conflict is handed to repair-1 and the result is pushed and watched."""
    outside = ScriptedOutside(deque([green("")]), conflicts=1)
    result = loop(outside).run()
    assert result.repairs == 1
    assert outside.calls[:3] == ["merge_base", "repair-1", "push"]
    assert "merging origin/main conflicted in app.py; starting Repair 1 of 5" in outside.lines


def test_red_ci_gets_a_ci_fix_repair_and_green_follows() -> None:
    """Own red checks start a CI-fix Repair; its new head goes green."""
    outside = ScriptedOutside(deque([red("", "tests"), green("")]))
    result = loop(outside).run()
    assert result.head == "h1"
    assert "CI failed on h0: tests; starting Repair 1 of 5" in outside.lines


def test_a_repair_that_changes_nothing_earns_exactly_one_rerun_then_a_declined_ci_fix() -> None:
    """Same head after the Repair: one re-run of the failed jobs, then red again fails the Run."""
    outside = ScriptedOutside(deque([red("", "tests")]), repairs_change_head=False)
    with pytest.raises(DeclinedCiFix, match="found nothing to fix"):
        loop(outside).run()
    assert [c for c in outside.calls if c.startswith("rerun")] == ["rerun tests"]
    assert [c for c in outside.calls if c.startswith("repair")] == ["repair-1"]


def test_a_rerun_that_goes_green_lets_the_run_succeed() -> None:
    """A flaky check re-run green is a success, not a Declined CI fix."""
    outside = ScriptedOutside(deque([red("", "tests"), green("")]), repairs_change_head=False)
    assert loop(outside).run().head == "h0"


def test_a_script_that_never_fixes_ci_spends_five_repairs_and_names_the_budget() -> None:
    """Each Repair moves the head but CI stays red: the sixth is refused."""
    outside = ScriptedOutside(deque([red("", "tests")]))
    with pytest.raises(BudgetSpent, match=r"repairs exhausted: CI failed on h5: tests after 5"):
        loop(outside).run()
    assert [c for c in outside.calls if c.startswith("repair")] == [
        f"repair-{i}" for i in range(1, 6)
    ]


def test_only_inherited_failures_fail_the_run_without_a_repair() -> None:
    """Red only where the Base branch is red too: no Repair, the cause names base and check."""
    outside = ScriptedOutside(deque([red("", "lint")]), inherited_names=("lint",))
    with pytest.raises(InheritedFailure, match=r"also failing on main at bbbbbbb\): lint"):
        loop(outside).run()
    assert not any(c.startswith("repair") for c in outside.calls)


def test_mixed_failures_repair_only_our_own() -> None:
    """Inherited ones are announced; the Repair is for the rest."""
    outside = ScriptedOutside(
        deque([red("", "lint", "tests"), green("")]), inherited_names=("lint",)
    )
    loop(outside).run()
    assert any(line.startswith("Inherited failures") for line in outside.lines)
    assert "CI failed on h0: tests; starting Repair 1 of 5" in outside.lines


def test_a_base_that_moved_while_ci_ran_is_merged_again_until_the_budget() -> None:
    """Moves are counted; the sixth spends the budget and names the Base branch."""
    outside = ScriptedOutside(deque([green("")]), moves=2)
    assert loop(outside).run().upstream_moves == 2
    restless = ScriptedOutside(deque([green("")]), moves=99)
    with pytest.raises(BudgetSpent, match="origin/main kept moving: merged it again 5 times"):
        loop(restless).run()


def test_a_merge_run_merges_at_the_watched_head() -> None:
    """Green and asked to merge: merged at exactly the head CI watched."""
    outside = ScriptedOutside(deque([green("")]))
    result = loop(outside, merge=True).run()
    assert result.merged
    assert outside.calls[-1] == "merge h0"


def test_a_refusal_then_a_round_with_nothing_to_fix_is_a_policy_refusal() -> None:
    """GitHub says no, the next round changes nothing: stop, the pull request stays ready."""
    outside = ScriptedOutside(deque([green("")]), refusals=99)
    with pytest.raises(PolicyRefusal, match="refused to merge at h0"):
        loop(outside, merge=True).run()
    assert [c for c in outside.calls if c.startswith("merge h")] == ["merge h0"]


def test_a_refusal_followed_by_a_moved_base_tries_the_merge_again() -> None:
    """Something changed (the base moved), so the merge is retried and can succeed."""
    # Round 1 is refused; in round 2 the base moves while CI runs; round 3 merges.
    outside = ScriptedOutside(deque([green("")]), refusals=1, moved_on_checks=frozenset({2}))
    result = loop(outside, merge=True).run()
    assert result.merged
    assert [c for c in outside.calls if c.startswith("merge h")] == ["merge h0", "merge h0"]


def _pull(**changes: object) -> PullRequestInfo:
    from dataclasses import replace

    base = PullRequestInfo(
        number=4,
        html_url="https://github.test/acme/widgets/pull/4",
        state="open",
        merged=False,
        draft=False,
        head_ref="issue-3",
        head_sha="a" * 40,
        base_ref="main",
        title="Add a widget",
        body="Closes #3",
        mergeable=True,
        mergeable_state="clean",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_person_s_draft_closing_or_retargeting_holds_the_self_merge() -> None:
    assert merge_held(_pull(), "main") is None
    drafted = merge_held(_pull(draft=True), "main")
    assert drafted is not None
    assert "was turned back to a draft, so it is not merged; mark it ready" in drafted
    assert merge_held(_pull(state="closed"), "main") == (
        "pull request https://github.test/acme/widgets/pull/4 is closed; nothing to merge"
    )
    retargeted = merge_held(_pull(base_ref="release"), "main")
    assert retargeted is not None
    assert "now targets release, not main" in retargeted


def test_the_self_merge_waits_for_github_to_say_mergeable_at_the_watched_head() -> None:
    head = "a" * 40
    assert merge_not_yet(_pull(), head) is None
    assert merge_not_yet(_pull(head_sha="b" * 40), head) == (
        "its head moved to bbbbbbb after CI was watched on aaaaaaa"
    )
    assert merge_not_yet(_pull(mergeable=None), head) == (
        "GitHub has not said whether it can be merged"
    )
    assert merge_not_yet(_pull(mergeable=False, mergeable_state="blocked"), head) == (
        "GitHub says it cannot be merged (blocked)"
    )


def test_a_head_that_keeps_moving_before_the_merge_spends_the_upstream_budget() -> None:
    """Someone pushes after every CI watch: each round merges it in and watches CI again,
    counted like a moving Base branch, so it ends instead of looping for ever."""
    twice = ScriptedOutside(deque([green("")]), head_moves=2)
    result = loop(twice, merge=True).run()
    assert result.merged
    assert result.upstream_moves == 2
    restless = ScriptedOutside(deque([green("")]), head_moves=99)
    with pytest.raises(BudgetSpent, match="the pull request's head kept moving: merged it again 5"):
        loop(restless, merge=True).run()


def test_commits_people_pushed_get_a_review_repair_before_ci_is_watched() -> None:
    """The push merged in two commits a person made: Repair 1 reviews them, the next round
    pushes what it changed, and only then is CI watched; the Repair counts against the
    budget."""
    outside = ScriptedOutside(
        deque([green("")]),
        repairs_change_head=True,
        foreign_after_push=deque([("abc1234 Fix typo (Ann)", "def5678 Add note (Ann)")]),
    )
    result = loop(outside).run()
    assert outside.calls == [
        "merge_base",
        "push",
        "repair-1 of abc1234 Fix typo (Ann),def5678 Add note (Ann)",
        "merge_base",
        "push",
        "watch h1",
    ]
    assert result.repairs == 1
    assert any(
        line.startswith("commits thirdshift did not make were merged in (abc1234 Fix typo")
        and line.endswith("starting Repair 1 of 5")
        for line in outside.lines
    )


def test_a_review_of_people_s_commits_past_the_repair_budget_fails_the_run() -> None:
    outside = ScriptedOutside(deque([green("")]), foreign_after_push=deque([("a1 X (Ann)",)]))
    with pytest.raises(BudgetSpent, match="commits thirdshift did not make"):
        RepairLoop(outside, RepairBudgets(max_repairs=0, max_upstream_moves=5), merge=False).run()
