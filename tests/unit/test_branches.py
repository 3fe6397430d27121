"""Issue branch selection: fresh, Continuation, and the next number after a merge."""

from __future__ import annotations

import pytest

from thirdshift.errors import ThirdshiftError
from thirdshift.records import PullRequestInfo
from thirdshift.runs.rules.branches import (
    adoptable,
    branch_number,
    choose_issue_branch,
    unadopted_ref,
)


def pull(
    head: str, *, state: str = "open", merged: bool = False, number: int = 1
) -> PullRequestInfo:
    return PullRequestInfo(
        number=number,
        html_url=f"https://github.com/o/r/pull/{number}",
        state=state,
        merged=merged,
        draft=False,
        head_ref=head,
        head_sha="a" * 40,
        base_ref="main",
        title="t",
        body="b",
        mergeable=True,
        mergeable_state="clean",
    )


def test_nothing_used_yet_gives_a_fresh_issue_branch() -> None:
    """No branch and no pull request: issue-<n>, not a Continuation."""
    choice = choose_issue_branch(7, {"main": "x"}, [])
    assert (choice.branch, choice.continuation) == ("issue-7", False)


def test_a_branch_without_a_pull_request_is_a_continuation() -> None:
    """A failed Run's branch is built upon, not started over."""
    choice = choose_issue_branch(7, {"main": "x", "issue-7": "y"}, [])
    assert (choice.branch, choice.continuation, choice.open_pull) == ("issue-7", True, None)


def test_a_branch_with_an_open_pull_request_is_a_continuation_of_it() -> None:
    """The open pull request comes along, so its base can be kept."""
    open_pull = pull("issue-7")
    choice = choose_issue_branch(7, {"issue-7": "y"}, [open_pull])
    assert choice.continuation
    assert choice.open_pull == open_pull


@pytest.mark.parametrize("state", ["merged", "closed"])
def test_after_a_merged_or_closed_pull_request_the_next_number_is_used(state: str) -> None:
    """issue-7's pull request is done with, so the next Run starts issue-7-branch-2."""
    done = pull("issue-7", state="closed", merged=state == "merged")
    choice = choose_issue_branch(7, {"issue-7": "y"}, [done])
    assert (choice.branch, choice.continuation) == ("issue-7-branch-2", False)
    deleted = choose_issue_branch(7, {}, [done])
    assert deleted.branch == "issue-7-branch-2"


def test_the_highest_numbered_branch_decides() -> None:
    """branch-3 on origin with no pull request is continued, whatever branch-2 did."""
    pulls = [pull("issue-7-branch-2", state="closed", merged=True)]
    choice = choose_issue_branch(7, {"issue-7": "a", "issue-7-branch-3": "b"}, pulls)
    assert (choice.branch, choice.continuation) == ("issue-7-branch-3", True)


def test_an_open_pull_request_whose_branch_is_gone_is_an_error() -> None:
    """Nothing to continue from and something open to confuse: say how to fix it."""
    with pytest.raises(ThirdshiftError, match="gone from origin"):
        choose_issue_branch(7, {}, [pull("issue-7")])


@pytest.mark.parametrize(
    ("branch", "number"),
    [
        ("issue-7", 1),
        ("issue-7-branch-2", 2),
        ("issue-7-branch-12", 12),
        ("issue-70", None),
        ("issue-7-branch-02", None),
        ("issue-7-branch-1", None),
        ("feature", None),
    ],
)
def test_only_this_issues_branch_names_count(branch: str, number: int | None) -> None:
    """issue-70 and odd spellings are not issue 7's branches."""
    assert branch_number(7, branch) == number


def test_kept_work_is_adoptable_only_at_a_recorded_head_or_one_origin_holds() -> None:
    recorded = {"a" * 40, "b" * 40}
    assert adoptable("a" * 40, recorded, held_by_origin=False)
    assert adoptable("c" * 40, recorded, held_by_origin=True)
    assert not adoptable("c" * 40, recorded, held_by_origin=False)
    assert not adoptable("c" * 40, frozenset(), held_by_origin=False)


def test_an_unadopted_head_is_kept_under_a_ref_naming_its_branch_and_head() -> None:
    head = "0123456789abcdef" * 2 + "01234567"
    assert unadopted_ref("issue-7", head) == "refs/thirdshift/unadopted/issue-7-0123456789ab"
    assert unadopted_ref("issue-7-branch-2", head).startswith(
        "refs/thirdshift/unadopted/issue-7-branch-2-"
    )
