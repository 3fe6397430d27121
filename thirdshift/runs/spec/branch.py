"""The Spec branch a Spec run pins at its Claim (adr/0032): chosen by the Issue branch rule
under the ``spec`` prefix (``spec_rules.choose_spec_branch``), and made on origin from the Base
branch's head when new."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import ThirdshiftError
from thirdshift.git import ManagedClone
from thirdshift.home import Home
from thirdshift.issue_url import IssueRef
from thirdshift.records import RepoInfo
from thirdshift.runs.ports import PullRequests
from thirdshift.runs.rules.tickets import choose_spec_branch, spec_branch_number


@dataclass(frozen=True)
class PinnedBranch:
    """The Spec branch, and whether this Spec run made it."""

    branch: str
    made: bool


def pin_spec_branch(
    github: PullRequests,
    clone: ManagedClone,
    ref: IssueRef,
    repo: RepoInfo,
    base: str,
    home: Path,
    fence: Callable[[], None],
) -> PinnedBranch:
    """The Spec branch: the highest of the Spec's branches on origin unless a Spec PR of it
    was merged or closed (then the next number), made from ``base`` when it is not there."""
    remote = clone.sync()
    if base not in remote:
        raise ThirdshiftError(
            f"base branch {base} does not exist on origin; push it first or pass --base"
        )
    pulls = [
        pull
        for branch in remote
        if spec_branch_number(ref.number, branch) is not None
        for pull in github.pulls_for_head(ref.owner, ref.repo, branch)
    ]
    choice = choose_spec_branch(ref.number, remote, sorted(pulls, key=lambda p: -p.number))
    if choice.branch in remote:
        return PinnedBranch(choice.branch, made=False)
    fence()
    path = Home(home).worktree(repo.owner, repo.name, f"{choice.branch}-new")
    worktree = clone.detached_worktree(path, f"origin/{base}")
    try:
        worktree.push(choice.branch)
    finally:
        clone.remove_worktree(path)
    return PinnedBranch(choice.branch, made=True)
