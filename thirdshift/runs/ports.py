"""The seams through which a Run reaches the outside.

``SessionSource`` is where a Run gets its Sessions: the real one
(``thirdshift.sessions.cli_sessions.CliSessions``) runs a Harness CLI, a scripted one in the
tests plays sessions that edit the Worktree in process. A managed clone comes from a
``CloneSource`` the same way, so a test can point a Run at a bare repository on disk.

GitHub is seen by role: each protocol below is what one consumer in ``runs`` calls, a handful
of methods, and its docstring names that consumer (``review.FeedbackReads`` is the review
feedback's own). ``GitHubPort`` is all of them at once, for the code that still takes the whole
of GitHub. The real adapter (``thirdshift.github.GitHub``) plays every role, and so does the
in-process fake the orchestration tests use (``tests/support/fake_github.py``). Every method
answers with the frozen records of ``thirdshift.records`` and raises only the ``GitHubError``
tree of ``thirdshift.errors`` (``NotFound`` for a missing object, ``MergeRefused`` for a refused
merge); a method that writes is safe to call again (it reads first or carries a marker).

``READS`` and ``WRITES`` sort every role's methods: the Lease's fence (``claims.fenced``) lets
the reads pass and asks before anything else, and a test holds the two sets to the roles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from thirdshift.git import ManagedClone
from thirdshift.issue_url import RunRef
from thirdshift.records import (
    BlockingIssue,
    CheckRun,
    Comment,
    CommitStatus,
    IssueInfo,
    IssueSummary,
    Labelling,
    MergeResult,
    Notification,
    PullRequestInfo,
    RepoInfo,
    TextEdit,
)
from thirdshift.runs.rules.review import FeedbackReads
from thirdshift.sessions import Sessions

CloneSource = Callable[[RunRef, RepoInfo], ManagedClone]
"""The managed clone of the issue's repository (nothing is done until ``sync``)."""


class Notifier(Protocol):
    """Where a Run's end (and a daemon's pass-over for permissions) is announced: the real one
    (``thirdshift.notify.TargetNotifier``) sends to every configured target; ``NO_NOTIFIER`` sends
    nothing."""

    @property
    def configured(self) -> bool:
        """Whether any target is configured (else a Run end is not even marked announced)."""
        ...

    def notify(self, notification: Notification) -> None:
        """Send ``notification`` to every target, scrubbed. Never raises: a target that fails
        is a warning on the progress lines, naming the target without its secrets."""
        ...


class _Silent:
    configured = False

    def notify(self, notification: Notification) -> None:
        """Nothing is configured: nothing is sent."""


NO_NOTIFIER: Notifier = _Silent()


class SessionSource(Protocol):
    """The Harness side of a Run."""

    @property
    def harness_name(self) -> str:
        """The Harness's name, recorded with the Run."""
        ...

    @property
    def executable(self) -> str:
        """The program the Harness runs; pre-flight checks it is on PATH."""
        ...

    @property
    def model(self) -> str | None:
        """The Model sessions are asked to use (None: the Harness's own default)."""
        ...

    def sessions(self, run_id: int, worktree: Path, ref: RunRef) -> Sessions:
        """Sessions for Run ``run_id`` in ``worktree``: each recorded, each with its log."""
        ...

    def key_problem(self) -> str | None:
        """Why sessions cannot keep the model key outside the sandbox (adr/0038), or None."""

    def still_working_in(self, worktree: Path) -> tuple[int, ...]:
        """The processes still working in ``worktree`` (an earlier Run's agent that outlived
        it, only without the Agent sandbox); no Run makes a Worktree again over them."""
        ...

    def turn_ended(self, harness: str, log_path: Path) -> bool:
        """Whether the Session log at ``log_path``, of a session of Harness ``harness``, holds
        the result of its turn (the session did its work, whatever happened to its Run after)."""
        ...


# -- GitHub, by role -----------------------------------------------------------------------------
# ``owner``/``name`` name the repository in every call.


class Identity(Protocol):
    """Who thirdshift is on GitHub and who may do what there: a Run's pre-flight (``delivery``)
    asks first; the Architect run and the Repair loop ask who they are."""

    def authenticated_login(self) -> str:
        """The login of the token's user; a bad token raises ``GitHubError`` naming the fix."""
        ...

    def repo(self, owner: str, name: str) -> RepoInfo:
        """The repository, with its default branch and clone URL."""
        ...

    def permission(self, owner: str, name: str, login: str) -> str:
        """``login``'s role: admin, maintain, write, triage, read or none. GitHub refuses (403)
        to tell a token that cannot push."""
        ...


class IssueLabels(Protocol):
    """The issue a Run works on and its labels: the Claim's label half (``claims``), its
    release by a Failed run (``failed_run``) and the close after a Self-merge (``delivery``)."""

    def issue(self, owner: str, name: str, number: int) -> IssueInfo:
        """Issue ``number``; a pull request answers too, with ``is_pull_request``."""
        ...

    def ensure_label(self, owner: str, name: str, label: str, color: str, description: str) -> None:
        """Create the repository label unless it exists."""
        ...

    def add_label(self, owner: str, name: str, number: int, label: str) -> None:
        """Add ``label``, keeping every other label (one a person added meanwhile included)."""
        ...

    def remove_label(self, owner: str, name: str, number: int, label: str) -> None:
        """Take ``label`` off, keeping every other label; one the issue lacks is fine."""
        ...

    def take_label(self, owner: str, name: str, number: int, label: str) -> bool:
        """Take ``label`` off as a claim: True when this call took it off, False when the issue
        no longer had it (someone took it first). GitHub answers one of two racing removals
        404, so this decides between Runs that share no database."""
        ...

    def close_issue(self, owner: str, name: str, number: int) -> None:
        """Close the issue; closing a closed issue is fine."""
        ...


class MarkedComments(Protocol):
    """The comments on an issue and thirdshift's own marked one there: the Claim's comment
    (``claims``) and a Failed run's one word on the issue (``failed_run``)."""

    def issue_comments(self, owner: str, name: str, number: int) -> tuple[Comment, ...]:
        """Every comment on the issue, oldest first."""
        ...

    def upsert_marked_comment(
        self, owner: str, name: str, number: int, marker: str, body: str
    ) -> Comment:
        """Edit the token user's comment carrying ``marker``, or post one: twice leaves one."""
        ...


class ApprovalReads(Protocol):
    """What the approval of an issue's text is read from (``claims.read_approval``, for a
    Run and a daemon alike)."""

    def labelling(self, owner: str, name: str, number: int, label: str) -> Labelling | None:
        """The last adding of ``label`` to the issue (its last ``labeled`` event for that name,
        in any case): who and when; None if nobody ever added it."""
        ...

    def text_edits(self, owner: str, name: str, number: int) -> tuple[TextEdit, ...]:
        """Every edit of the issue's title or body since it was opened, oldest first, as
        GitHub shows them (the creation itself is no edit)."""
        ...


class PullRequests(Protocol):
    """A Run's pull request: found, opened and kept up to date by ``delivery``, turned back
    to a draft by a Failed run (``failed_run``)."""

    def pulls_for_head(
        self, owner: str, name: str, head_branch: str, state: str = "all"
    ) -> tuple[PullRequestInfo, ...]:
        """The pull requests from ``head_branch`` of this repository, newest first; their
        ``mergeable`` is None (a list carries no mergeability)."""
        ...

    def pull(self, owner: str, name: str, number: int) -> PullRequestInfo:
        """Pull request ``number`` with its mergeability (None while GitHub computes it)."""
        ...

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
        """Open a pull request from ``head`` into ``base``; never opens two."""
        ...

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
        """Change what is not None of title, body and base."""
        ...

    def mark_ready(self, owner: str, name: str, number: int) -> None:
        """Mark the pull request ready for review, unless it already is."""
        ...

    def convert_to_draft(self, owner: str, name: str, number: int) -> None:
        """Turn the pull request back to a draft, unless it already is one."""
        ...

    def delete_branch(self, owner: str, name: str, branch: str) -> None:
        """Delete the branch; one already gone is fine."""
        ...


class Checks(Protocol):
    """CI on a head, as the Repair loop's outside (``loop_outside``) watches, reads and re-runs
    it."""

    def check_runs(self, owner: str, name: str, sha: str) -> tuple[CheckRun, ...]:
        """Every check run on ``sha``, Actions checks with their job and workflow run ids."""
        ...

    def commit_statuses(self, owner: str, name: str, sha: str) -> tuple[CommitStatus, ...]:
        """The latest commit status of each context on ``sha``."""
        ...

    def job_log_tail(self, owner: str, name: str, job_id: int, max_chars: int = 4000) -> str:
        """The last ``max_chars`` characters of an Actions job's log."""
        ...

    def rerun_failed_jobs(self, owner: str, name: str, run_id: int) -> None:
        """Re-run the failed jobs of workflow run ``run_id`` as a new attempt."""
        ...


class Merging(Protocol):
    """The Self-merge of a Merge run (``loop_outside``)."""

    def wait_for_mergeable(
        self, owner: str, name: str, number: int, timeout: float
    ) -> PullRequestInfo:
        """The pull request once GitHub has computed its mergeability, or after ``timeout``."""
        ...

    def merge_pull(
        self, owner: str, name: str, number: int, *, sha: str, title: str, message: str
    ) -> MergeResult:
        """Merge with a merge commit only if the head is still ``sha``; a refusal raises
        ``MergeRefused``."""
        ...


class Publishing(Protocol):
    """Issues thirdshift opens and links: an Architect run's plan or idea (``architect``) and a
    red Base branch's fix issue (``delivery``), found again by label after a crash."""

    def open_issue(
        self, owner: str, name: str, *, title: str, body: str, labels: Sequence[str]
    ) -> IssueInfo:
        """Open an issue as thirdshift (after a lost answer: the one it opened)."""
        ...

    def block_issue(self, owner: str, name: str, number: int, blocker: int) -> None:
        """Issue ``number`` is blocked by issue ``blocker`` (GitHub's issue dependencies);
        already so is fine."""
        ...

    def add_sub_issue(self, owner: str, name: str, number: int, sub_issue: int) -> None:
        """Make issue ``sub_issue`` a sub-issue of issue ``number`` (GitHub's sub-issues);
        already so is fine."""
        ...

    def issues_labelled(
        self, owner: str, name: str, label: str, state: str = "open"
    ) -> tuple[IssueSummary, ...]:
        """Issues (pull requests too, marked) carrying ``label`` in ``state``, lowest number
        first, all pages."""
        ...

    def recent_issues(
        self, owner: str, name: str, state: str, limit: int
    ) -> tuple[IssueSummary, ...]:
        """Issues (never pull requests) in ``state`` (open or closed), most recently updated
        first, at most ``limit``."""
        ...


class SpecGraph(Protocol):
    """A Spec's Tickets and what blocks each, read again before each Ticket starts (a Spec
    run, adr/0032)."""

    def sub_issues(self, owner: str, name: str, number: int) -> tuple[int, ...]:
        """Numbers of the issue's sub-issues, in GitHub's order."""
        ...

    def blockers(self, owner: str, name: str, number: int) -> tuple[BlockingIssue, ...]:
        """Every issue blocking this one, open or closed, this repository's first, ascending
        (a Ticket a person closed without a landing still holds back what it blocks); one of
        another repository says which, its number being that repository's."""
        ...


class GitHubPort(
    Identity,
    IssueLabels,
    MarkedComments,
    ApprovalReads,
    FeedbackReads,
    PullRequests,
    Checks,
    Merging,
    Publishing,
    SpecGraph,
    Protocol,
):
    """Every role at once: GitHub as the whole of a Run sees it."""


READS = frozenset(
    {
        "authenticated_login",
        "repo",
        "permission",
        "issue",
        "issue_comments",
        "labelling",
        "text_edits",
        "pull_reviews",
        "pull_review_comments",
        "pulls_for_head",
        "pull",
        "check_runs",
        "commit_statuses",
        "job_log_tail",
        "wait_for_mergeable",
        "issues_labelled",
        "recent_issues",
        "sub_issues",
        "blockers",
    }
)
"""The role methods that change nothing on GitHub: they need no Lease."""

WRITES = frozenset(
    {
        "ensure_label",
        "add_label",
        "remove_label",
        "take_label",
        "close_issue",
        "upsert_marked_comment",
        "create_pull",
        "update_pull",
        "mark_ready",
        "convert_to_draft",
        "delete_branch",
        "rerun_failed_jobs",
        "merge_pull",
        "open_issue",
        "block_issue",
        "add_sub_issue",
    }
)
"""The role methods that change GitHub: under a Lease each asks the fence first."""
