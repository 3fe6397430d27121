"""An in-process GitHub for the orchestration tests: ``FakeGitHub`` plays every role of the Run's
``GitHubPort`` (``tests/unit/test_github_roles.py`` holds it to them) on the stand-in's own state
model (``thirdshift.sandbox.github.state.World``), so the fake and the stand-in agree on what
labels, comments, issues and pull requests do; ``tests/contract/test_github_roles.py`` runs one
test body against it and against the real adapter.

Branch heads are read from a real bare repository on disk (the Run pushes there with real
git). Check runs are scripted per commit; faults are queued per method ("the next
``convert_to_draft`` raises this"); every call is recorded in ``calls``.

Over 500 lines on purpose: one method for each method of every role and of the daemon's seam,
each a few lines on the stand-in's state, and the scenario helpers the tests set up with.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import tempfile
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.scripted_sessions import git
from thirdshift.errors import GitHubError, MergeRefused, NotFound
from thirdshift.records import (
    BlockingIssue,
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
    TextEdit,
)
from thirdshift.sandbox.github.state import ApiError, Issue, Pull, Repo, World, utcnow

_MERGES = threading.Lock()


def open_here(blockers: Sequence[BlockingIssue]) -> tuple[int, ...]:
    """The numbers of the open blockers in the blocked issue's own repository."""
    return tuple(b.number for b in blockers if b.state == "open" and not b.elsewhere)


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...]


@dataclass
class FakeGitHub:
    """GitHub with one repository, ``owner/name``, whose git lives in the bare ``origin``."""

    origin: Path
    owner: str = "acme"
    name: str = "widgets"
    login: str = "factory"
    role: str = "write"
    default_branch: str = "main"
    world: World = field(default_factory=World)
    calls: list[Call] = field(default_factory=list)
    faults: dict[str, deque[Exception]] = field(default_factory=lambda: defaultdict(deque))
    checks: dict[str, list[CheckRun]] = field(default_factory=lambda: defaultdict(list))
    merge_refusals: deque[str] = field(default_factory=deque)
    merges_into_base: bool = False
    """Whether a merge also makes the merge commit on the base branch in the bare origin, as
    GitHub does (a Spec run's Tickets build on each other's merges); off, a merge is only
    recorded."""
    on_call: Callable[[str], None] | None = None
    reviews: dict[int, list[Review]] = field(default_factory=lambda: defaultdict(list))
    review_comments: dict[int, list[ReviewComment]] = field(
        default_factory=lambda: defaultdict(list)
    )
    elsewhere: dict[int, tuple[BlockingIssue, ...]] = field(default_factory=dict)
    """Blockers in other repositories, by the issue of this one they block."""

    def __post_init__(self) -> None:
        self.world.add_user(self.login, "unused", {f"{self.owner}/{self.name}": self.role})
        self.repo_state: Repo = self.world.add_repo(self.owner, self.name)
        # The World closes issues from closing keywords only on merges into this branch.
        self.repo_state.default_branch = self.default_branch

    # -- scenario ------------------------------------------------------------------------------

    def add_issue(self, title: str, body: str = "", labels: Sequence[str] = ()) -> int:
        issue = self.world.create_issue(self.repo_state, title, body, "alice")
        self.world.add_labels(self.repo_state, issue, list(labels), "alice")
        return issue.number

    def add_user(self, login: str, role: str) -> None:
        """A person with ``role`` (read, triage, write, maintain, admin) on the repository."""
        self.world.add_user(login, f"token-of-{login}", {f"{self.owner}/{self.name}": role})

    def add_comment(self, number: int, body: str, author: str = "alice") -> None:
        self.world.add_comment(self.repo_state, self.repo_state.issue(number), body, author)

    def add_review(
        self,
        pull_number: int,
        author: str,
        state: str = "CHANGES_REQUESTED",
        body: str = "",
        comments: Sequence[tuple[str, int | None, str]] = (),
    ) -> Review:
        """``author`` reviews the pull request, with comments on ``(path, line, body)``."""
        review_id = 90_000 + sum(len(r) for r in self.reviews.values()) + 1
        review = Review(review_id, author, state, body, is_bot=author.endswith("[bot]"))
        self.reviews[pull_number].append(review)
        issue = self.repo_state.issue(pull_number)
        # As on GitHub, a review is a change of the pull request; a second may pass within one
        # clock tick, so the time moves on by at least a microsecond.
        issue.updated_at = max(utcnow(), issue.updated_at + timedelta(microseconds=1))
        for path, line, text in comments:
            comment_id = 80_000 + sum(len(c) for c in self.review_comments.values()) + 1
            self.review_comments[pull_number].append(
                ReviewComment(comment_id, review_id, author, text, path, line, review.is_bot)
            )
        return review

    def label_issue(self, number: int, label: str, by: str = "alice") -> None:
        """``by`` adds ``label`` to the issue (a ``labeled`` event, as on GitHub)."""
        self.world.add_labels(self.repo_state, self.repo_state.issue(number), [label], by)

    def edit_issue(
        self, number: int, by: str, *, title: str | None = None, body: str | None = None
    ) -> None:
        """``by`` edits the issue's title or body, as GitHub records it."""
        self.world.edit_text(self.repo_state, self.repo_state.issue(number), by, title, body)

    def unlabel_issue(self, number: int, label: str, by: str = "alice") -> None:
        self.world.remove_label(self.repo_state, self.repo_state.issue(number), label, by)

    def block(self, number: int, blocker: int, by: str = "alice") -> None:
        """Issue ``blocker`` blocks issue ``number`` (GitHub's blocked-by dependency)."""
        blocked = self.repo_state.issue(number)
        self.world.add_blocked_by(self.repo_state, blocked, self.repo_state.issue(blocker).id, by)

    def fail_next(self, method: str, error: Exception) -> None:
        """The next call of ``method`` raises ``error`` (before doing anything)."""
        self.faults[method].append(error)

    def labels_of(self, number: int) -> list[str]:
        return [label.name for label in self.repo_state.issue(number).labels]

    def comments_on(self, number: int) -> list[str]:
        issue = self.repo_state.issue(number)
        return [self.repo_state.comments[i].body for i in issue.comment_ids]

    def pull_requests(self) -> list[PullRequestInfo]:
        return [self._pull_record(i) for i in self.repo_state.issues.values() if i.pull]

    def called(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    # -- the roles of GitHubPort ---------------------------------------------------------------

    def authenticated_login(self) -> str:
        self._enter("authenticated_login")
        return self.login

    def repo(self, owner: str, name: str) -> RepoInfo:
        self._enter("repo", owner, name)
        return RepoInfo(
            owner=owner,
            name=name,
            default_branch=self.default_branch,
            clone_url=str(self.origin),
            html_url=f"https://github.test/{owner}/{name}",
        )

    def permission(self, owner: str, name: str, login: str) -> str:
        self._enter("permission", owner, name, login)
        return self.world.role(login, self.repo_state) or "none"

    def issue(self, owner: str, name: str, number: int) -> IssueInfo:
        self._enter("issue", number)
        issue = self._api(lambda: self.repo_state.issue(number))
        return IssueInfo(
            number=issue.number,
            title=issue.title,
            body=issue.body or "",
            state=issue.state,
            labels=tuple(label.name for label in issue.labels),
            html_url=self._url(issue),
            author=issue.author,
            is_pull_request=issue.pull is not None,
        )

    def issue_comments(self, owner: str, name: str, number: int) -> tuple[Comment, ...]:
        self._enter("issue_comments", number)
        issue = self._api(lambda: self.repo_state.issue(number))
        return tuple(
            Comment(c.id, c.author, c.body, c.created_at)
            for c in (self.repo_state.comments[i] for i in issue.comment_ids)
        )

    def ensure_label(self, owner: str, name: str, label: str, color: str, description: str) -> None:
        self._enter("ensure_label", label)
        if label.lower() not in self.repo_state.labels:
            self.world.create_label(self.repo_state, label, color, description)

    def label_exists(self, owner: str, name: str, label: str) -> bool:
        self._enter("label_exists", label)
        return label.lower() in self.repo_state.labels

    def set_issue_labels(self, owner: str, name: str, number: int, labels: Sequence[str]) -> None:
        self._enter("set_issue_labels", number, tuple(labels))
        issue = self._api(lambda: self.repo_state.issue(number))
        self.world.set_labels(self.repo_state, issue, list(labels), self.login)

    def add_label(self, owner: str, name: str, number: int, label: str) -> None:
        self._enter("add_label", number, label)
        issue = self._api(lambda: self.repo_state.issue(number))
        self.world.add_labels(self.repo_state, issue, [label], self.login)

    def remove_label(self, owner: str, name: str, number: int, label: str) -> None:
        self._enter("remove_label", number, label)
        issue = self._api(lambda: self.repo_state.issue(number))
        if any(existing.name.lower() == label.lower() for existing in issue.labels):
            self.world.remove_label(self.repo_state, issue, label, self.login)

    def open_issue(
        self, owner: str, name: str, *, title: str, body: str, labels: Sequence[str]
    ) -> IssueInfo:
        self._enter("open_issue", title)
        issue = self.world.create_issue(self.repo_state, title, body, self.login)
        self.world.add_labels(self.repo_state, issue, list(labels), self.login)
        return self.issue(owner, name, issue.number)

    def block_issue(self, owner: str, name: str, number: int, blocker: int) -> None:
        self._enter("block_issue", number, blocker)
        if blocker not in open_here(self.blockers(owner, name, number)):
            self.block(number, blocker, by=self.login)

    def add_sub_issue(self, owner: str, name: str, number: int, sub_issue: int) -> None:
        self._enter("add_sub_issue", number, sub_issue)
        if sub_issue in self.sub_issues(owner, name, number):
            return
        parent = self._api(lambda: self.repo_state.issue(number))
        child = self._api(lambda: self.repo_state.issue(sub_issue))
        # A sub-issue with another parent is refused (422), as the stand-in and GitHub do.
        self._api(
            lambda: self.world.add_sub_issue(self.repo_state, parent, child.id, False, self.login)
        )

    def open_pulls(self, owner: str, name: str) -> tuple[PullRequestInfo, ...]:
        self._enter("open_pulls")
        return tuple(
            self._pull_record(issue, listed=True)
            for issue in self.repo_state.issues.values()
            if issue.pull is not None and issue.state == "open"
        )

    def pull_reviews(self, owner: str, name: str, number: int) -> tuple[Review, ...]:
        self._enter("pull_reviews", number)
        return tuple(self.reviews.get(number, ()))

    def pull_review_comments(self, owner: str, name: str, number: int) -> tuple[ReviewComment, ...]:
        self._enter("pull_review_comments", number)
        return tuple(self.review_comments.get(number, ()))

    def take_label(self, owner: str, name: str, number: int, label: str) -> bool:
        self._enter("take_label", number, label)
        issue = self._api(lambda: self.repo_state.issue(number))
        if not any(existing.name.lower() == label.lower() for existing in issue.labels):
            return False
        self.world.remove_label(self.repo_state, issue, label, self.login)
        return True

    def upsert_marked_comment(
        self, owner: str, name: str, number: int, marker: str, body: str
    ) -> Comment:
        self._enter("upsert_marked_comment", number, marker)
        issue = self._api(lambda: self.repo_state.issue(number))
        text = body if marker in body else f"{body.rstrip()}\n\n{marker}"
        for comment_id in issue.comment_ids:
            comment = self.repo_state.comments[comment_id]
            if comment.author == self.login and marker in comment.body:
                comment.body = text
                return Comment(comment.id, comment.author, comment.body, comment.created_at)
        made = self.world.add_comment(self.repo_state, issue, text, self.login)
        return Comment(made.id, made.author, made.body, made.created_at)

    def close_issue(self, owner: str, name: str, number: int) -> None:
        self._enter("close_issue", number)
        issue = self._api(lambda: self.repo_state.issue(number))
        self.world.set_state(self.repo_state, issue, "closed", "completed", self.login)

    def issues_labelled(
        self, owner: str, name: str, label: str, state: str = "open"
    ) -> tuple[IssueSummary, ...]:
        self._enter("issues_labelled", label, state)
        found = sorted(
            (
                issue
                for issue in self.repo_state.issues.values()
                if state in ("all", issue.state)
                and any(have.name.lower() == label.lower() for have in issue.labels)
            ),
            key=lambda issue: issue.number,
        )
        return tuple(self._summary(issue) for issue in found)

    def recent_issues(
        self, owner: str, name: str, state: str, limit: int
    ) -> tuple[IssueSummary, ...]:
        self._enter("recent_issues", state, limit)
        found = sorted(
            (
                issue
                for issue in self.repo_state.issues.values()
                if issue.pull is None and state in ("all", issue.state)
            ),
            # The stand-in's order: GitHub's stamps count whole seconds, ties newest first.
            key=lambda issue: (issue.updated_at, issue.number),
            reverse=True,
        )
        return tuple(self._summary(issue) for issue in found[:limit])

    def labelled_by(self, owner: str, name: str, number: int, label: str) -> str | None:
        self._enter("labelled_by", number, label)
        issue = self._api(lambda: self.repo_state.issue(number))
        labelled = [
            event.actor
            for event in self.repo_state.events
            if event.issue_number == issue.number
            and event.event == "labeled"
            and event.label is not None
            and event.label.name.lower() == label.lower()
        ]
        return labelled[-1] if labelled else None

    def labelling(self, owner: str, name: str, number: int, label: str) -> Labelling | None:
        self._enter("labelling", number, label)
        issue = self._api(lambda: self.repo_state.issue(number))
        adders = tuple(
            (event.actor, event.created_at)
            for event in self.repo_state.events
            if event.issue_number == issue.number
            and event.event == "labeled"
            and event.label is not None
            and event.label.name.lower() == label.lower()
        )
        return Labelling(*adders[-1], adders=adders) if adders else None

    def text_edits(self, owner: str, name: str, number: int) -> tuple[TextEdit, ...]:
        self._enter("text_edits", number)
        issue = self._api(lambda: self.repo_state.issue(number))
        titles = [
            TextEdit("title", event.actor, event.created_at)
            for event in self.repo_state.events
            if event.issue_number == issue.number and event.event == "renamed"
        ]
        # The first version GitHub lists is the opening, no edit (as the adapter reads it).
        bodies = [TextEdit("body", e.editor, e.edited_at) for e in issue.content_edits[1:]]
        return tuple(sorted([*titles, *bodies], key=lambda edit: edit.at))

    def blockers(self, owner: str, name: str, number: int) -> tuple[BlockingIssue, ...]:
        self._enter("blockers", number)
        issue = self._api(lambda: self.repo_state.issue(number))
        found = self.world.blocked_by(self.repo_state, issue)
        here = tuple(
            BlockingIssue(b.number, b.state) for b in sorted(found, key=lambda b: b.number)
        )
        return here + self.elsewhere.get(number, ())

    def sub_issues(self, owner: str, name: str, number: int) -> tuple[int, ...]:
        self._enter("sub_issues", number)
        issue = self._api(lambda: self.repo_state.issue(number))
        return tuple(child.number for child in self.world.sub_issues(self.repo_state, issue))

    def pulls_for_head(
        self, owner: str, name: str, head_branch: str, state: str = "all"
    ) -> tuple[PullRequestInfo, ...]:
        self._enter("pulls_for_head", head_branch, state)
        found = [
            issue
            for issue in self.repo_state.issues.values()
            if issue.pull is not None
            and issue.pull.head_ref == head_branch
            and state in ("all", issue.state)
        ]
        found.sort(key=lambda issue: issue.number, reverse=True)
        return tuple(self._pull_record(issue, listed=True) for issue in found)

    def pull(self, owner: str, name: str, number: int) -> PullRequestInfo:
        self._enter("pull", number)
        return self._pull_record(self._api(lambda: self.repo_state.pull(number)))

    def wait_for_mergeable(
        self, owner: str, name: str, number: int, timeout: float
    ) -> PullRequestInfo:
        self._enter("wait_for_mergeable", number)
        return self._pull_record(self._api(lambda: self.repo_state.pull(number)))

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
        self._enter("create_pull", head, base)
        sha = self.branch_head(head)
        if sha is None:
            raise GitHubError(f"no branch {head} on origin to open a pull request from", 422)
        if any(
            issue.pull is not None
            and issue.state == "open"
            and (issue.pull.head_ref, issue.pull.base_ref) == (head, base)
            for issue in self.repo_state.issues.values()
        ):
            raise GitHubError(f"A pull request already exists for {owner}:{head}.", 422)
        pull = Pull(head_ref=head, base_ref=base, draft=draft, head_sha=sha)
        issue = self.world.create_issue(self.repo_state, title, body, self.login, pull=pull)
        return self._pull_record(issue)

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
        self._enter("update_pull", number)
        issue = self._api(lambda: self.repo_state.pull(number))
        assert issue.pull is not None
        if title is not None:
            issue.title = title
        if body is not None:
            issue.body = body
        if base is not None:
            issue.pull.base_ref = base
        return self._pull_record(issue)

    def mark_ready(self, owner: str, name: str, number: int) -> None:
        self._enter("mark_ready", number)
        self._set_draft(number, draft=False)

    def convert_to_draft(self, owner: str, name: str, number: int) -> None:
        self._enter("convert_to_draft", number)
        self._set_draft(number, draft=True)

    def merge_pull(
        self, owner: str, name: str, number: int, *, sha: str, title: str, message: str
    ) -> MergeResult:
        self._enter("merge_pull", number, sha)
        issue = self._api(lambda: self.repo_state.pull(number))
        record = self._pull_record(issue)
        if self.merge_refusals:
            raise MergeRefused(
                f"GitHub refused to merge pull request #{number}: {self.merge_refusals.popleft()}",
                405,
            )
        if record.head_sha != sha:
            raise MergeRefused(f"head of pull request #{number} moved", 409)
        self.world.record_merge(self.repo_state, issue, sha, self.login)
        if self.merges_into_base:
            return MergeResult(merged=True, sha=self._merge_commit(record, title), message="ok")
        return MergeResult(merged=True, sha=sha, message="Pull Request successfully merged")

    def _merge_commit(self, pull: PullRequestInfo, title: str) -> str:
        """The merge commit of ``pull``'s head into its base, made in the bare origin; a
        conflict fails the test (the Ticket Runs merge their base in before merging)."""

        with _MERGES:  # two Ticket Runs may merge into one Spec branch at once
            return self._merge_commit_alone(pull, title)

    def _merge_commit_alone(self, pull: PullRequestInfo, title: str) -> str:
        def out(*args: str) -> str:
            done = subprocess.run(
                ["git", "-c", "user.name=GitHub", "-c", "user.email=noreply@github.test", *args],
                cwd=self.origin,
                capture_output=True,
                text=True,
                check=True,
            )
            return done.stdout.strip()

        base = out("rev-parse", f"refs/heads/{pull.base_ref}")
        tree = out("merge-tree", "--write-tree", base, pull.head_sha).splitlines()[0]
        merged = out("commit-tree", tree, "-p", base, "-p", pull.head_sha, "-m", title)
        out("update-ref", f"refs/heads/{pull.base_ref}", merged, base)
        return merged

    def branch_exists(self, owner: str, name: str, branch: str) -> bool:
        self._enter("branch_exists", branch)
        return self.branch_head(branch) is not None

    def delete_branch(self, owner: str, name: str, branch: str) -> None:
        self._enter("delete_branch", branch)
        self._git("update-ref", "-d", f"refs/heads/{branch}")
        for issue in self.repo_state.issues.values():  # as on GitHub: its pull requests close
            if issue.pull is not None and issue.state == "open" and issue.pull.head_ref == branch:
                self.world.set_state(self.repo_state, issue, "closed", None, self.login)

    def check_runs(self, owner: str, name: str, sha: str) -> tuple[CheckRun, ...]:
        self._enter("check_runs", sha)
        return tuple(self.checks.get(sha, ()))

    def commit_statuses(self, owner: str, name: str, sha: str) -> tuple[CommitStatus, ...]:
        self._enter("commit_statuses", sha)
        return ()

    def job_log_tail(self, owner: str, name: str, job_id: int, max_chars: int = 4000) -> str:
        self._enter("job_log_tail", job_id)
        return f"log of job {job_id}"[-max_chars:]

    def rerun_failed_jobs(self, owner: str, name: str, run_id: int) -> None:
        self._enter("rerun_failed_jobs", run_id)

    # -- git of the origin ---------------------------------------------------------------------

    def branch_head(self, branch: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
            cwd=self.origin,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout.strip() or None

    def _git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=self.origin, capture_output=True, check=True)

    # -- helpers -------------------------------------------------------------------------------

    def _enter(self, method: str, *args: Any) -> None:
        self.calls.append(Call(method, args))
        if self.on_call is not None:
            self.on_call(method)
        queued = self.faults.get(method)
        if queued:
            raise queued.popleft()

    def _api(self, read: Callable[[], Issue]) -> Issue:
        """The stand-in's refusals, as the real adapter translates them."""
        try:
            return read()
        except ApiError as error:
            if error.status == 404:
                raise NotFound(f"not found: {error.message}", 404) from error
            raise GitHubError(error.message, error.status) from error

    def _set_draft(self, number: int, *, draft: bool) -> None:
        issue = self._api(lambda: self.repo_state.pull(number))
        assert issue.pull is not None
        issue.pull.draft = draft

    def _summary(self, issue: Issue) -> IssueSummary:
        return IssueSummary(
            number=issue.number,
            title=issue.title,
            state=issue.state,
            labels=tuple(have.name for have in issue.labels),
            is_pull_request=issue.pull is not None,
            updated_at=issue.updated_at,
            html_url=self._url(issue),
            body=issue.body or "",
        )

    def _url(self, issue: Issue) -> str:
        kind = "pull" if issue.pull else "issues"
        return f"https://github.test/{self.owner}/{self.name}/{kind}/{issue.number}"

    def _pull_record(self, issue: Issue, *, listed: bool = False) -> PullRequestInfo:
        pull = issue.pull
        assert pull is not None
        if not pull.merged:
            pull.head_sha = self.branch_head(pull.head_ref) or pull.head_sha
        return PullRequestInfo(
            number=issue.number,
            html_url=self._url(issue),
            state=issue.state,
            merged=pull.merged,
            draft=pull.draft,
            head_ref=pull.head_ref,
            head_sha=pull.head_sha,
            base_ref=pull.base_ref,
            title=issue.title,
            body=issue.body or "",
            mergeable=None if listed else issue.state == "open",
            mergeable_state="unknown" if listed else "clean",
            author=issue.author,
            updated_at=issue.updated_at,
        )


def bare_origin(root: Path) -> Path:
    """A bare repository with one commit on main, as GitHub would hold it (the fake's origin).
    Each is a copy of one made once per test process: a few git processes fewer per test."""
    origin = root / "origin.git"
    shutil.copytree(_origin_template(), origin, symlinks=True)
    return origin


@functools.cache
def _origin_template() -> Path:
    made = Path(tempfile.mkdtemp(prefix="thirdshift-origin-"))
    atexit.register(shutil.rmtree, made, ignore_errors=True)
    seed = made / "seed"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("# widgets\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "-q", "-m", "Initial commit")
    origin = made / "origin.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(seed), str(origin)], check=True, capture_output=True
    )
    # A copy must not name the template's seed as its own remote.
    subprocess.run(["git", "-C", str(origin), "remote", "remove", "origin"], check=True)
    return origin
