"""The Spec PR's delivery (adr/0032): once every Ticket landed, the Spec run hands its Claim to
the Run's own steps, as a Run of the Spec on the Spec branch whose opening session is the Spec
review. Its takeover pushes what the review fixed and marks the Spec PR ready, its Repair loop
and CI watch keep it green, and with ``--merge`` it Self-merges into the Base branch; any other
ending is its salvage, as for a Run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from thirdshift.git import ManagedClone
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, PullRequestInfo, RepoInfo, Run
from thirdshift.runs.lease import LeaseKeeper
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.branches import BranchChoice
from thirdshift.runs.rules.prompts import SPEC_REVIEW, spec_review_prompt
from thirdshift.runs.scope import Found, RunHooks, RunRequest, RunScope
from thirdshift.runs.spec.brief import IssueSpec, outcome_of_ticket
from thirdshift.sessions.spec_preamble import spec_review_preamble
from thirdshift.store import Store

SpecDelivery = Callable[[RunScope, RunHooks], RunOutcome]
"""The composition root's ``Delivery.deliver`` for a scope another Run kind claimed."""


@dataclass(frozen=True)
class ReviewPlace:
    """Where the Spec review works: the Spec's repository and issue, thirdshift's clone, the
    Spec branch and the Base branch, and the Spec's Lease."""

    ref: IssueRef
    repo: RepoInfo
    issue: IssueInfo
    clone: ManagedClone
    branch: str
    base: str
    keeper: LeaseKeeper
    worktree_path: Path


def review_scope(
    place: ReviewPlace,
    record: Run,
    github: GitHubPort,
    prompt: str,
    open_pull: PullRequestInfo | None,
    *,
    merge: bool,
) -> RunScope:
    """The Spec run's Claim as the Run's steps take it: a Continuation of the Spec branch
    (its Tickets are on it), into the Base branch, its opening session the Spec review."""
    remote = place.clone.sync()
    # As it is now: the Spec run's Claim changed its labels after the pre-flight read it.
    ref = place.ref
    found = Found(
        ref,
        place.repo,
        github.issue(ref.owner, ref.repo, ref.number),
        place.clone,
        remote,
        BranchChoice(place.branch, continuation=True, open_pull=open_pull),
        place.base,
        place.worktree_path,
    )
    request = RunRequest(issue=place.ref, merge=merge, base=place.base, preamble=prompt)
    return RunScope(
        request, record, found, place.keeper, github, ready_taken=False, session_kind=SPEC_REVIEW
    )


def read_spec_review_prompt(
    store: Store,
    github: GitHubPort,
    spec: IssueSpec,
    place: ReviewPlace,
    landed: Mapping[int, Run],
    titles: Mapping[int, str],
    cap_tokens: int,
) -> str:
    """The Spec review's prompt: every Ticket's outcome from thirdshift's records, then the
    review's instructions (unscrubbed: the session scrubs its prompt)."""
    numbers = sorted(landed)
    outcomes = [outcome_of_ticket(store, github, spec, n, landed, titles) for n in numbers]
    preamble = spec_review_preamble(spec.brief, outcomes, cap_tokens=cap_tokens)
    return spec_review_prompt(
        preamble,
        spec=place.ref.number,
        base_branch=place.base,
        spec_branch=place.branch,
        tickets=numbers,
    )
