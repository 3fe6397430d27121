"""A Claim: thirdshift's hold on an issue, in two halves that go together.

The Lease, in the database, is taken before a Run changes anything, renewed while it lives and
given up when it ends (ADR 0003). The label half, on GitHub, swaps ``ready-for-agent`` for
``in-progress`` so people (and other daemons) see who is on the issue.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.records import (
    CheckRun,
    Comment,
    CommitStatus,
    IssueInfo,
    IssueSummary,
    Labelling,
    MergeResult,
    PullRequestInfo,
    RepoInfo,
    Review,
    ReviewComment,
    Run,
    TextEdit,
)
from thirdshift.runs.approval import NO_EARLIER, EarlierText, approval_reason, text_sha256
from thirdshift.runs.ports import GitHubPort


@dataclass(frozen=True)
class Claim:
    """The GitHub half of a Claim as this Run made it: whether it took ``ready-for-agent``
    away (a release gives it back) and whether it added ``in-progress`` itself (only then may
    a release take it off again)."""

    had_ready_label: bool
    added_label: bool


class FencedGitHub:
    """GitHub for a Run under a Lease: every write asks the fence first, so a Run that lost its
    Lease (paused past it, say) writes nothing over its successor's work. Reads pass."""

    def __init__(self, github: GitHubPort, fence: Callable[[], None]) -> None:
        self._gh = github
        self._fence = fence

    def fence(self) -> None:
        """Raise ``LeaseLost`` unless the Lease is still held (before a write elsewhere)."""
        self._fence()

    def authenticated_login(self) -> str:
        return self._gh.authenticated_login()

    def repo(self, owner: str, name: str) -> RepoInfo:
        return self._gh.repo(owner, name)

    def permission(self, owner: str, name: str, login: str) -> str:
        return self._gh.permission(owner, name, login)

    def issue(self, owner: str, name: str, number: int) -> IssueInfo:
        return self._gh.issue(owner, name, number)

    def issue_comments(self, owner: str, name: str, number: int) -> tuple[Comment, ...]:
        return self._gh.issue_comments(owner, name, number)

    def ensure_label(self, owner: str, name: str, label: str, color: str, description: str) -> None:
        self._fence()
        return self._gh.ensure_label(owner, name, label, color, description)

    def set_issue_labels(self, owner: str, name: str, number: int, labels: Sequence[str]) -> None:
        self._fence()
        return self._gh.set_issue_labels(owner, name, number, labels)

    def add_label(self, owner: str, name: str, number: int, label: str) -> None:
        self._fence()
        return self._gh.add_label(owner, name, number, label)

    def remove_label(self, owner: str, name: str, number: int, label: str) -> None:
        self._fence()
        return self._gh.remove_label(owner, name, number, label)

    def pull_reviews(self, owner: str, name: str, number: int) -> tuple[Review, ...]:
        return self._gh.pull_reviews(owner, name, number)

    def pull_review_comments(self, owner: str, name: str, number: int) -> tuple[ReviewComment, ...]:
        return self._gh.pull_review_comments(owner, name, number)

    def open_issue(
        self, owner: str, name: str, *, title: str, body: str, labels: Sequence[str]
    ) -> IssueInfo:
        self._fence()
        return self._gh.open_issue(owner, name, title=title, body=body, labels=labels)

    def block_issue(self, owner: str, name: str, number: int, blocker: int) -> None:
        self._fence()
        return self._gh.block_issue(owner, name, number, blocker)

    def add_sub_issue(self, owner: str, name: str, number: int, sub_issue: int) -> None:
        self._fence()
        return self._gh.add_sub_issue(owner, name, number, sub_issue)

    def take_label(self, owner: str, name: str, number: int, label: str) -> bool:
        self._fence()
        return self._gh.take_label(owner, name, number, label)

    def upsert_marked_comment(
        self, owner: str, name: str, number: int, marker: str, body: str
    ) -> Comment:
        self._fence()
        return self._gh.upsert_marked_comment(owner, name, number, marker, body)

    def close_issue(self, owner: str, name: str, number: int) -> None:
        self._fence()
        return self._gh.close_issue(owner, name, number)

    def issues_labelled(
        self, owner: str, name: str, label: str, state: str = "open"
    ) -> tuple[IssueSummary, ...]:
        return self._gh.issues_labelled(owner, name, label, state)

    def labelled_by(self, owner: str, name: str, number: int, label: str) -> str | None:
        return self._gh.labelled_by(owner, name, number, label)

    def open_blockers(self, owner: str, name: str, number: int) -> tuple[int, ...]:
        return self._gh.open_blockers(owner, name, number)

    def labelling(self, owner: str, name: str, number: int, label: str) -> Labelling | None:
        return self._gh.labelling(owner, name, number, label)

    def text_edits(self, owner: str, name: str, number: int) -> tuple[TextEdit, ...]:
        return self._gh.text_edits(owner, name, number)

    def sub_issues(self, owner: str, name: str, number: int) -> tuple[int, ...]:
        return self._gh.sub_issues(owner, name, number)

    def recent_issues(
        self, owner: str, name: str, state: str, limit: int
    ) -> tuple[IssueSummary, ...]:
        return self._gh.recent_issues(owner, name, state, limit)

    def pulls_for_head(
        self, owner: str, name: str, head_branch: str, state: str = "all"
    ) -> tuple[PullRequestInfo, ...]:
        return self._gh.pulls_for_head(owner, name, head_branch, state)

    def pull(self, owner: str, name: str, number: int) -> PullRequestInfo:
        return self._gh.pull(owner, name, number)

    def wait_for_mergeable(
        self, owner: str, name: str, number: int, timeout: float
    ) -> PullRequestInfo:
        return self._gh.wait_for_mergeable(owner, name, number, timeout)

    def create_pull(
        self,
        owner: str,
        name: str,
        *,
        head: str,
        base: str,
        title: str,
        body: str,
        draft: bool = False,
    ) -> PullRequestInfo:
        self._fence()
        return self._gh.create_pull(
            owner, name, head=head, base=base, title=title, body=body, draft=draft
        )

    def update_pull(
        self,
        owner: str,
        name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        base: str | None = None,
    ) -> PullRequestInfo:
        self._fence()
        return self._gh.update_pull(owner, name, number, title=title, body=body, base=base)

    def mark_ready(self, owner: str, name: str, number: int) -> None:
        self._fence()
        return self._gh.mark_ready(owner, name, number)

    def convert_to_draft(self, owner: str, name: str, number: int) -> None:
        self._fence()
        return self._gh.convert_to_draft(owner, name, number)

    def merge_pull(
        self, owner: str, name: str, number: int, *, sha: str, title: str, message: str
    ) -> MergeResult:
        self._fence()
        return self._gh.merge_pull(owner, name, number, sha=sha, title=title, message=message)

    def delete_branch(self, owner: str, name: str, branch: str) -> None:
        self._fence()
        return self._gh.delete_branch(owner, name, branch)

    def check_runs(self, owner: str, name: str, sha: str) -> tuple[CheckRun, ...]:
        return self._gh.check_runs(owner, name, sha)

    def commit_statuses(self, owner: str, name: str, sha: str) -> tuple[CommitStatus, ...]:
        return self._gh.commit_statuses(owner, name, sha)

    def job_log_tail(self, owner: str, name: str, job_id: int, max_chars: int = 4000) -> str:
        return self._gh.job_log_tail(owner, name, job_id, max_chars)

    def rerun_failed_jobs(self, owner: str, name: str, run_id: int) -> None:
        self._fence()
        return self._gh.rerun_failed_jobs(owner, name, run_id)


CLAIM_MARKER = "<!-- thirdshift:claim -->"


class ApprovalReads(Protocol):
    """What the approval of an issue's text is read from (a Run's GitHub and a daemon's)."""

    def labelling(self, owner: str, name: str, number: int, label: str) -> Labelling | None: ...

    def text_edits(self, owner: str, name: str, number: int) -> tuple[TextEdit, ...]: ...


@dataclass(frozen=True)
class IssueText:
    """An issue's place and its text, as the approval of it is read."""

    owner: str
    name: str
    number: int
    title: str
    body: str


def text_not_approved(
    github: ApprovalReads,
    issue: IssueText,
    *,
    ready_label: str,
    earlier: Run | None,
    may_label: Callable[[str], bool],
    read_edits: Callable[[], tuple[TextEdit, ...]] | None = None,
    own_login: str | None = None,
) -> str | None:
    """Why the issue's title and body are not approved by the Ready label (``approval``), or
    None. ``earlier``: the issue's latest Run, whose recorded text a changed one must be
    approved over. ``read_edits``: how the edits are read (a daemon keeps them a while)."""
    owner, name, number = issue.owner, issue.name, issue.number
    labelling = github.labelling(owner, name, number, ready_label)
    edits = read_edits() if read_edits else github.text_edits(owner, name, number)
    return approval_reason(
        ready_label=ready_label,
        labelling=labelling,
        edits=edits,
        may_label=may_label,
        text_now=text_sha256(issue.title, issue.body),
        earlier=(
            EarlierText(earlier.text_sha256, earlier.id, earlier.started_at)
            if earlier
            else NO_EARLIER
        ),
        own_login=own_login,
    )
