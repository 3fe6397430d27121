"""The daemon's seams. ``DaemonGitHub``: what a poll reads of GitHub and the two label writes
of a sweep; the real adapter (``thirdshift.github.GitHub``) satisfies it, and so does the
in-process fake of the tests (``tests/support/fake_github.py``). ``RunStarter``: what starts the
Runs the daemon takes, each with the ``RunWatch`` the daemon keeps over it; the composition root
builds the real one, the orchestration tests a scripted one."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from thirdshift.records import (
    BlockingIssue,
    Comment,
    IssueSummary,
    Labelling,
    PullRequestInfo,
    Review,
    ReviewComment,
    TextEdit,
)
from thirdshift.runs import RunOutcome, RunRequest


class DaemonGitHub(Protocol):
    def issues_labelled(
        self, owner: str, name: str, label: str, state: str = "open"
    ) -> tuple[IssueSummary, ...]:
        """Issues (pull requests too, marked) carrying ``label`` in ``state``, lowest first.
        Asked conditionally: an unchanged answer costs no rate limit."""
        ...

    def labelled_by(self, owner: str, name: str, number: int, label: str) -> str | None:
        """Who added ``label`` to the issue last, from its events; None if nobody did."""
        ...

    def blockers(self, owner: str, name: str, number: int) -> tuple[BlockingIssue, ...]:
        """The issues that block this one (GitHub's blocked-by dependencies), open or closed;
        one of another repository says which."""
        ...

    def labelling(self, owner: str, name: str, number: int, label: str) -> Labelling | None:
        """The last adding of ``label`` to the issue (its last ``labeled`` event for that name,
        in any case): who and when; None if nobody ever added it."""
        ...

    def text_edits(self, owner: str, name: str, number: int) -> tuple[TextEdit, ...]:
        """Every edit of the issue's title or body since it was opened, oldest first, as
        GitHub shows them (the creation itself is no edit)."""
        ...

    def permission(self, owner: str, name: str, login: str) -> str:
        """``login``'s role on the repository."""
        ...

    def sub_issues(self, owner: str, name: str, number: int) -> tuple[int, ...]:
        """The issue's sub-issues (a Spec's Tickets), in GitHub's order; asked conditionally."""
        ...

    def branch_exists(self, owner: str, name: str, branch: str) -> bool:
        """Whether ``branch`` is on the repository now."""
        ...

    def authenticated_login(self) -> str:
        """The login thirdshift acts as (its own comments and pull requests are its)."""
        ...

    def open_pulls(self, owner: str, name: str) -> tuple[PullRequestInfo, ...]:
        """The repository's open pull requests, with when each last changed (conditionally)."""
        ...

    def pull_reviews(self, owner: str, name: str, number: int) -> tuple[Review, ...]:
        """The pull request's reviews, oldest first (conditionally)."""
        ...

    def pull_review_comments(self, owner: str, name: str, number: int) -> tuple[ReviewComment, ...]:
        """The comments on lines of the pull request's diff (conditionally)."""
        ...

    def issue_comments(self, owner: str, name: str, number: int) -> tuple[Comment, ...]:
        """The comments on an issue or a pull request, oldest first."""
        ...

    def add_label(self, owner: str, name: str, number: int, label: str) -> None: ...

    def remove_label(self, owner: str, name: str, number: int, label: str) -> None: ...


@dataclass(frozen=True)
class RunWatch:
    """What the daemon keeps over a Run it started: the Run's own interrupt, where its progress
    lines go, what learns its Run id once it is recorded (its own id, never a newer Run's on the
    issue), and what says why the daemon stopped it (None: a signal)."""

    interrupt: threading.Event
    progress: Callable[[str], None]
    on_recorded: Callable[[int], None]
    stopped_because: Callable[[], str | None]


class RunStarter(Protocol):
    """Starts each Run the daemon takes and runs it to its end, on the daemon's thread for it;
    an error before the Run's end may escape (the daemon makes it the outcome)."""

    def pickup(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        """A Ready issue's Run: a Spec run when the issue is a Spec, else a Delivery (a Merge
        run when ``request.merge``); or a review Repair (``request.review_of``), a Delivery."""
        ...

    def rescue(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        """The Rescue of the Crashed Run ``request.rescue_of``: a Spec run's as a Spec run, a
        Run's as a Delivery, continuing the work it left."""
        ...

    def architect(self, owner: str, name: str, watch: RunWatch) -> RunOutcome:
        """An Architect run on ``owner/name`` its schedule asked for (``skipped`` says why)."""
        ...
