"""Which Issue branch a Run uses: a pure rule over what origin and GitHub say.

``issue-<n>`` first; once a branch's newest pull request is merged or closed, the next Run takes
the next number, ``issue-<n>-branch-<k>``. The highest numbered branch seen (on origin or as a
pull request head) decides: with no pull request or an open one it is a Continuation that builds
on its commits; an open pull request whose branch is gone from origin is an error.

Work kept in the managed clone (a Failed run's Worktree, a local Issue branch) is adopted only
at a head thirdshift recorded for the issue's branch, or one origin's branch already holds: the
clone is shared, and the agents of other Runs can write its refs (adr/0027).

A Spec branch (``spec-<n>``, ``spec-<n>-branch-<k>``) follows the same rule under its own
prefix (``runs.rules.tickets``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from thirdshift.errors import ThirdshiftError
from thirdshift.records import PullRequestInfo


@dataclass(frozen=True)
class BranchChoice:
    branch: str
    continuation: bool
    open_pull: PullRequestInfo | None


ISSUE_PREFIX = "issue"


def branch_name(issue_number: int, k: int, *, prefix: str = ISSUE_PREFIX) -> str:
    return f"{prefix}-{issue_number}" if k == 1 else f"{prefix}-{issue_number}-branch-{k}"


def branch_number(issue_number: int, branch: str, *, prefix: str = ISSUE_PREFIX) -> int | None:
    """1 for ``issue-<n>``, k for ``issue-<n>-branch-<k>`` (k >= 2, no leading zero), else None
    (``prefix`` in place of ``issue``)."""
    if branch == f"{prefix}-{issue_number}":
        return 1
    match = re.fullmatch(rf"{re.escape(prefix)}-{issue_number}-branch-([2-9]|[1-9][0-9]+)", branch)
    return int(match.group(1)) if match else None


def choose_issue_branch(
    issue_number: int,
    remote_branches: Mapping[str, str],
    pulls: Sequence[PullRequestInfo],
    *,
    prefix: str = ISSUE_PREFIX,
) -> BranchChoice:
    """The Issue branch for the next Run. ``pulls`` are every pull request (any state) whose
    head is one of this issue's branches, newest first. With another ``prefix`` the same rule
    names that kind of branch (a Spec branch)."""
    numbers = {
        k
        for k in (branch_number(issue_number, b, prefix=prefix) for b in remote_branches)
        if k is not None
    }
    numbers |= {
        k
        for k in (branch_number(issue_number, p.head_ref, prefix=prefix) for p in pulls)
        if k is not None
    }
    if not numbers:
        first = branch_name(issue_number, 1, prefix=prefix)
        return BranchChoice(first, continuation=False, open_pull=None)
    highest = max(numbers)
    branch = branch_name(issue_number, highest, prefix=prefix)
    newest = next((p for p in pulls if p.head_ref == branch), None)
    if newest is not None and (newest.merged or newest.state == "closed"):
        return BranchChoice(branch_name(issue_number, highest + 1, prefix=prefix), False, None)
    if branch not in remote_branches:
        if newest is not None:
            raise ThirdshiftError(
                f"pull request {newest.html_url} is open but its branch {branch} is gone from "
                "origin; close the pull request or push the branch again"
            )
        return BranchChoice(branch, continuation=False, open_pull=None)
    return BranchChoice(branch, continuation=True, open_pull=newest)


UNADOPTED = "refs/thirdshift/unadopted"
"""Where a head that is never adopted is kept aside, for a person to look at."""


def adoptable(head: str, recorded: Set[str], *, held_by_origin: bool) -> bool:
    """Whether kept work at ``head`` may be built on: thirdshift recorded that head for the
    issue's branch (``recorded``), or origin's branch already holds it (``held_by_origin``:
    nothing of it would reach origin that is not there)."""
    return head in recorded or held_by_origin


def unadopted_ref(branch: str, head: str) -> str:
    """The ref an unknown ``head`` of ``branch`` is kept aside under, saying why."""
    return f"{UNADOPTED}/{branch}-{head[:12]}"
