"""The branch choice: thirdshift's clone fetched, the Base branch on origin, and the Issue
branch the Run works on (a new one, or the one an earlier Run left: a Continuation)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import ThirdshiftError
from thirdshift.git import ManagedClone
from thirdshift.home import Home
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, PullRequestInfo, RepoInfo
from thirdshift.runs.ports import CloneSource, PullRequests
from thirdshift.runs.rules.branches import branch_name, branch_number, choose_issue_branch
from thirdshift.runs.scope import Found, Say


def fetched(clone: ManagedClone, repo: RepoInfo, base: str, say: Say) -> dict[str, str]:
    """Fetch ``repo`` into thirdshift's clone; its branches on origin, the Base among them."""
    say(f"fetching {repo.full_name} into {clone.path}")
    remote = clone.sync()
    if base not in remote:
        raise ThirdshiftError(
            f"base branch {base} does not exist on origin; push it first or pass --base"
        )
    return remote


@dataclass(frozen=True)
class BranchChoiceStep:
    """Chooses the Issue branch and the Base branch of a Run."""

    github: PullRequests
    clones: CloneSource
    home: Path
    say: Say

    def choose(
        self, ref: IssueRef, repo: RepoInfo, issue: IssueInfo, asked_base: str | None
    ) -> Found:
        """The Issue branch; an open pull request from it decides the Base branch."""
        base = asked_base or repo.default_branch
        clone = self.clones(ref, repo)
        remote = fetched(clone, repo, base, self.say)
        choice = choose_issue_branch(ref.number, remote, self.issue_pulls(ref, remote))
        if choice.open_pull is not None:
            if asked_base is not None and asked_base != choice.open_pull.base_ref:
                raise ThirdshiftError(
                    f"pull request {choice.open_pull.html_url} targets "
                    f"{choice.open_pull.base_ref}, not {asked_base}; change its base or drop "
                    "--base"
                )
            base = choice.open_pull.base_ref
        # GitHub's own spelling: an Issue URL in another case is the same repository, with the
        # same Worktrees (a daemon looks for kept ones by that spelling too).
        path = Home(self.home).worktree(repo.owner, repo.name, choice.branch)
        return Found(ref, repo, issue, clone, remote, choice, base, path)

    def again(self, found: Found) -> Found:
        """The choice made again after kept work was pushed (the base stays)."""
        remote = found.clone.sync()
        choice = choose_issue_branch(found.ref.number, remote, self.issue_pulls(found.ref, remote))
        return Found(
            found.ref,
            found.repo,
            found.issue,
            found.clone,
            remote,
            choice,
            found.base,
            found.worktree_path,
        )

    def issue_pulls(self, ref: IssueRef, remote: Mapping[str, str]) -> list[PullRequestInfo]:
        """Every pull request from one of the issue's branches, newest first."""
        highest = max(
            (k for k in (branch_number(ref.number, b) for b in remote) if k is not None),
            default=0,
        )
        pulls: list[PullRequestInfo] = []
        k = 1
        while True:
            found = self.github.pulls_for_head(ref.owner, ref.repo, branch_name(ref.number, k))
            if not found and k > highest:
                break
            pulls.extend(found)
            k += 1
        return sorted(pulls, key=lambda p: p.number, reverse=True)
