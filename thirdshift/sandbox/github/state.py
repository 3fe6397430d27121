"""The GitHub stand-in's in-memory world: users, repositories, issues, pull requests, labels,
comments, the events that record who did what, and webhooks with their recorded deliveries.

Every change goes through a method of :class:`World` holding its lock, so the HTTP handler
threads see one consistent state. Methods raise :class:`ApiError` carrying the status and the
message GitHub gives for the same refusal; the HTTP layer renders it.

About 800 lines: one lock guards the whole world, so every mutation lives on the one class
that holds it; each family of endpoints maps onto these methods from a module of its own.
"""

from __future__ import annotations

import re
import secrets
import string
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ROLES = ("read", "triage", "write", "maintain", "admin")
"""Repository roles, weakest first, as GitHub names them."""

DEFAULT_LABELS = (
    ("bug", "d73a4a", "Something isn't working"),
    ("documentation", "0075ca", "Improvements or additions to documentation"),
    ("duplicate", "cfd3d7", "This issue or pull request already exists"),
    ("enhancement", "a2eeef", "New feature or request"),
    ("good first issue", "7057ff", "Good for newcomers"),
    ("help wanted", "008672", "Extra attention is needed"),
    ("invalid", "e4e669", "This doesn't seem right"),
    ("question", "d876e3", "Further information is requested"),
    ("wontfix", "ffffff", "This will not be worked on"),
)
"""The labels GitHub gives every new repository."""

_CLOSING = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s+#(\d+)\b", re.IGNORECASE)
_COLOR = re.compile(r"^[0-9a-fA-F]{6}$")
_TOKEN_CHARS = string.ascii_letters + string.digits


def rank(role: str | None) -> int:
    """The strength of a role: -1 for none, 0 for read up to 4 for admin."""
    return ROLES.index(role) if role in ROLES else -1


def utcnow() -> datetime:
    """The current time in UTC, to the second as GitHub reports it."""
    return datetime.now(UTC).replace(microsecond=0)


class ApiError(Exception):
    """A refusal the REST API answers with ``status`` and GitHub's JSON error body."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}


def not_found() -> ApiError:
    """GitHub's answer for anything missing or hidden from the caller."""
    return ApiError(404, "Not Found")


def unprocessable(message: str) -> ApiError:
    """A 422 whose ``errors`` are sentences, as GitHub refuses a review."""
    return ApiError(422, "Unprocessable Entity", [message])


def validation_failed(resource: str, field_name: str, code: str, **extra: str) -> ApiError:
    """A 422 with one entry in ``errors``, as GitHub reports a bad field."""
    entry: dict[str, Any] = {"resource": resource, "field": field_name, "code": code, **extra}
    return ApiError(422, "Validation Failed", [entry])


@dataclass
class User:
    """A scenario user: the token they authenticate with and their role per repository, and
    the token's OAuth scopes as a classic token has them (None: a fine-grained token's, which
    GitHub does not name)."""

    id: int
    login: str
    token: str
    permissions: dict[str, str]
    created_at: datetime
    scopes: tuple[str, ...] | None = ("repo",)


@dataclass
class App:
    """A scenario GitHub App: its RSA public key checks the tokens it signs; each account it is
    installed on has an installation; its bot user (``<slug>[bot]``) acts for it."""

    id: int
    slug: str
    public_key: str
    installations: dict[str, int]  # account login -> installation id
    created_at: datetime
    token_life: timedelta = timedelta(hours=1)  # GitHub's

    @property
    def bot(self) -> str:
        return f"{self.slug}[bot]"


@dataclass
class InstallationToken:
    """An installation token: it acts as the App's bot until ``expires_at``."""

    app_id: int
    installation: int
    expires_at: datetime


@dataclass
class Label:
    id: int
    name: str
    color: str
    description: str | None
    default: bool


@dataclass
class IssueComment:
    id: int
    issue_number: int
    author: str
    body: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Event:
    """One entry of an issue's history (``labeled``, ``closed``, ``sub_issue_added``...)."""

    id: int
    issue_number: int
    actor: str
    event: str
    created_at: datetime
    label: Label | None = None
    rename: tuple[str, str] | None = None  # a ``renamed`` event's title (from, to)


@dataclass
class ContentEdit:
    """One version of an issue's body, as GraphQL's ``userContentEdits`` lists it: once a body
    is edited, GitHub lists its first version too (by its author, when it was opened)."""

    id: int
    editor: str
    edited_at: datetime
    body: str | None


@dataclass
class PullReview:
    """A submitted pull request review: ``state`` is ``APPROVED``, ``CHANGES_REQUESTED`` or
    ``COMMENTED``; ``commit_id`` is the head it reviewed."""

    id: int
    pull_number: int
    author: str
    state: str
    body: str
    commit_id: str
    submitted_at: datetime


@dataclass
class PullReviewComment:
    """A comment on one line of a pull request's diff, in a review. ``position`` counts lines
    down from the file's first hunk header; ``diff_hunk`` ends at the commented line. A reply
    names its thread's first comment in ``in_reply_to_id``."""

    id: int
    review_id: int
    pull_number: int
    author: str
    body: str
    path: str
    line: int
    side: str
    position: int
    diff_hunk: str
    commit_id: str
    created_at: datetime
    updated_at: datetime
    in_reply_to_id: int | None = None


@dataclass
class DraftComment:
    """A review comment placed on the diff, before the review that carries it exists."""

    path: str
    line: int
    side: str
    position: int
    diff_hunk: str
    body: str


@dataclass
class Pull:
    """What makes an issue a pull request."""

    head_ref: str
    base_ref: str
    draft: bool
    head_sha: str
    merged: bool = False
    merged_at: datetime | None = None
    merged_by: str | None = None
    merge_commit_sha: str | None = None


@dataclass
class Issue:
    id: int
    number: int
    title: str
    body: str | None
    author: str
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    state_reason: str | None = None
    closed_at: datetime | None = None
    closed_by: str | None = None
    labels: list[Label] = field(default_factory=list)
    comment_ids: list[int] = field(default_factory=list)
    parent_id: int | None = None
    sub_issue_ids: list[int] = field(default_factory=list)  # in the order they were added
    blocked_by_ids: list[int] = field(default_factory=list)
    pull: Pull | None = None
    content_edits: list[ContentEdit] = field(default_factory=list)  # oldest first


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    created_at: datetime
    pushed_at: datetime
    default_branch: str = "main"
    archived: bool = False
    labels: dict[str, Label] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    comments: dict[int, IssueComment] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    reviews: dict[int, PullReview] = field(default_factory=dict)
    review_comments: dict[int, PullReviewComment] = field(default_factory=dict)
    merge_failures: deque[tuple[int, str]] = field(default_factory=deque)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def issue(self, number: int) -> Issue:
        """The issue (or pull request) numbered ``number``; 404 when there is none."""
        found = self.issues.get(number)
        if found is None:
            raise not_found()
        return found

    def issue_by_id(self, issue_id: int) -> Issue | None:
        return next((i for i in self.issues.values() if i.id == issue_id), None)

    def pull(self, number: int) -> Issue:
        """The pull request numbered ``number``; 404 for a plain issue or nothing."""
        found = self.issue(number)
        if found.pull is None:
            raise not_found()
        return found


@dataclass
class RecordedDelivery:
    """One delivery GitHub recorded for a hook: the event it carried and the receiver's answer
    (``status_code`` 0: it could not be reached)."""

    id: int
    guid: str
    event: str
    action: str | None
    status_code: int
    delivered_at: datetime
    redelivery: bool = False
    duration: float = 0.05

    @property
    def status(self) -> str:
        """GitHub's word for the answer."""
        if self.status_code == 0:
            return "failed to connect to host"
        if 200 <= self.status_code < 300:
            return "OK"
        return f"Invalid HTTP Response: {self.status_code}"


@dataclass
class Hook:
    """A webhook of a repository (``name``) or of the organisation ``owner`` (``name`` None),
    with the deliveries recorded for it, oldest first."""

    id: int
    owner: str
    name: str | None
    url: str
    events: list[str]
    active: bool
    content_type: str
    secret: str | None
    created_at: datetime
    deliveries: list[RecordedDelivery] = field(default_factory=list)


class World:
    """Everything the stand-in knows, behind one re-entrant lock (``with world.lock:``)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.users: dict[str, User] = {}
        self.repos: dict[tuple[str, str], Repo] = {}
        self.apps: dict[int, App] = {}
        self.installation_tokens: dict[str, InstallationToken] = {}
        self.hooks: dict[int, Hook] = {}
        self.organisation_owners: dict[str, set[str]] = {}
        self._next_id = 1_000_001

    def new_id(self) -> int:
        with self.lock:
            self._next_id += 1
            return self._next_id

    # -- scenario -------------------------------------------------------------------------

    def add_user(
        self,
        login: str,
        token: str,
        permissions: dict[str, str],
        scopes: tuple[str, ...] | None = ("repo",),
    ) -> User:
        """Register a user (or replace one with the same login)."""
        for role in permissions.values():
            if role not in ROLES:
                raise ValueError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
        with self.lock:
            old = self.users.get(login)
            user = User(
                id=old.id if old else self.new_id(),
                login=login,
                token=token,
                permissions=dict(permissions),
                created_at=old.created_at if old else utcnow(),
                scopes=scopes,
            )
            self.users[login] = user
            return user

    def add_repo(self, owner: str, name: str) -> Repo:
        """Register a repository with GitHub's default labels."""
        with self.lock:
            now = utcnow()
            repo = Repo(id=self.new_id(), owner=owner, name=name, created_at=now, pushed_at=now)
            for label_name, color, description in DEFAULT_LABELS:
                repo.labels[label_name.lower()] = Label(
                    self.new_id(), label_name, color, description, default=True
                )
            self.repos[(owner, name)] = repo
            return repo

    def add_app(
        self,
        slug: str,
        public_key: str,
        repositories: list[str],
        token_life: timedelta = timedelta(hours=1),
    ) -> App:
        """Register a GitHub App installed on the accounts owning ``repositories`` (each
        ``owner/name``), where its bot may write. Its bot has no token of its own: it acts
        only through installation tokens."""
        with self.lock:
            app = App(
                id=self.new_id(),
                slug=slug,
                public_key=public_key,
                installations={},
                created_at=utcnow(),
                token_life=token_life,
            )
            for full_name in repositories:
                owner = full_name.partition("/")[0]
                app.installations.setdefault(owner, self.new_id())
            self.apps[app.id] = app
            unusable = f"unusable-{secrets.token_hex(16)}"
            # GitHub names no OAuth scopes for an installation token.
            self.add_user(app.bot, unusable, dict.fromkeys(repositories, "write"), None)
            return app

    def mint_installation_token(self, app: App, installation: int) -> tuple[str, datetime]:
        """A new installation token (in GitHub's shape) and when it ends."""
        with self.lock:
            token = "ghs_" + "".join(secrets.choice(_TOKEN_CHARS) for _ in range(36))
            expires = utcnow() + app.token_life
            self.installation_tokens[token] = InstallationToken(app.id, installation, expires)
            return token, expires

    def user_by_token(self, token: str) -> User | None:
        with self.lock:
            minted = self.installation_tokens.get(token)
            if minted is not None:
                app = self.apps[minted.app_id]
                return self.users[app.bot] if utcnow() < minted.expires_at else None
            return next((u for u in self.users.values() if u.token == token), None)

    def role(self, login: str | None, repo: Repo) -> str | None:
        """The role ``login`` holds on ``repo``, or None."""
        user = self.users.get(login) if login else None
        return user.permissions.get(repo.full_name) if user else None

    def visible_repo(self, login: str | None, owner: str, name: str) -> Repo:
        """The repository, when ``login`` may at least read it; 404 otherwise, as on GitHub."""
        repo = self.repos.get((owner, name))
        if repo is None or rank(self.role(login, repo)) < 0:
            raise not_found()
        return repo

    # -- labels ---------------------------------------------------------------------------

    def create_label(self, repo: Repo, name: str, color: str, description: str | None) -> Label:
        if not name:
            raise validation_failed("Label", "name", "missing_field")
        color = color.lstrip("#")
        if not _COLOR.match(color):
            raise validation_failed("Label", "color", "invalid")
        if name.lower() in repo.labels:
            raise validation_failed("Label", "name", "already_exists")
        label = Label(self.new_id(), name, color.lower(), description, default=False)
        repo.labels[name.lower()] = label
        return label

    def _label_for(self, repo: Repo, name: str) -> Label:
        """The repository label called ``name``, created (grey) when missing, as GitHub does."""
        label = repo.labels.get(name.lower())
        if label is None:
            label = Label(self.new_id(), name, "ededed", None, default=False)
            repo.labels[name.lower()] = label
        return label

    def add_labels(self, repo: Repo, issue: Issue, names: list[str], actor: str) -> None:
        """Apply labels, recording a ``labeled`` event for each one newly applied."""
        now = utcnow()
        for name in names:
            label = self._label_for(repo, name)
            if all(existing.id != label.id for existing in issue.labels):
                issue.labels.append(label)
                self._event(repo, issue, actor, "labeled", now, label)
                issue.updated_at = now

    def remove_label(self, repo: Repo, issue: Issue, name: str, actor: str) -> None:
        """Take a label off; 404 ``Label does not exist`` when it is not applied."""
        label = next((lb for lb in issue.labels if lb.name.lower() == name.lower()), None)
        if label is None:
            raise ApiError(404, "Label does not exist")
        issue.labels.remove(label)
        now = utcnow()
        self._event(repo, issue, actor, "unlabeled", now, label)
        issue.updated_at = now

    def set_labels(self, repo: Repo, issue: Issue, names: list[str], actor: str) -> None:
        wanted = {n.lower() for n in names}
        for label in list(issue.labels):
            if label.name.lower() not in wanted:
                self.remove_label(repo, issue, label.name, actor)
        self.add_labels(repo, issue, names, actor)

    # -- issues ---------------------------------------------------------------------------

    def create_issue(
        self, repo: Repo, title: str, body: str | None, author: str, pull: Pull | None = None
    ) -> Issue:
        if not title:
            raise validation_failed("PullRequest" if pull else "Issue", "title", "missing_field")
        now = utcnow()
        number = max(repo.issues, default=0) + 1
        issue = Issue(self.new_id(), number, title, body, author, now, now, pull=pull)
        repo.issues[number] = issue
        return issue

    def set_state(
        self, repo: Repo, issue: Issue, state: str, reason: str | None, actor: str
    ) -> None:
        """Close or reopen, recording the ``closed``/``reopened`` event."""
        if state not in ("open", "closed"):
            raise validation_failed("Issue", "state", "invalid")
        if state == issue.state:
            return
        now = utcnow()
        issue.state = state
        issue.updated_at = now
        if state == "closed":
            issue.closed_at = now
            issue.closed_by = actor
            issue.state_reason = None if issue.pull else (reason or "completed")
            self._event(repo, issue, actor, "closed", now)
        else:
            issue.closed_at = None
            issue.closed_by = None
            issue.state_reason = None if issue.pull else "reopened"
            self._event(repo, issue, actor, "reopened", now)

    def edit_text(
        self, repo: Repo, issue: Issue, actor: str, title: str | None, body: str | None
    ) -> None:
        """Set the title (a ``renamed`` event when it changes) and the body (a content edit
        when it changes; ``body`` None leaves it), as GitHub records an edit; either moves
        ``updated_at``."""
        with self.lock:
            now = utcnow()
            if title is not None and title != issue.title:
                self._event(repo, issue, actor, "renamed", now, rename=(issue.title, title))
                issue.title = title
                issue.updated_at = now
            if body is not None and body != (issue.body or ""):
                if not issue.content_edits:
                    first = ContentEdit(self.new_id(), issue.author, issue.created_at, issue.body)
                    issue.content_edits.append(first)
                issue.content_edits.append(ContentEdit(self.new_id(), actor, now, body))
                issue.body = body
                issue.updated_at = now

    def _event(
        self,
        repo: Repo,
        issue: Issue,
        actor: str,
        kind: str,
        at: datetime,
        label: Label | None = None,
        rename: tuple[str, str] | None = None,
    ) -> None:
        snapshot = (
            Label(label.id, label.name, label.color, label.description, label.default)
            if (label)
            else None
        )
        repo.events.append(
            Event(self.new_id(), issue.number, actor, kind, at, snapshot, rename=rename)
        )

    # -- comments -------------------------------------------------------------------------

    def add_comment(self, repo: Repo, issue: Issue, body: str, author: str) -> IssueComment:
        if not body:
            raise validation_failed("IssueComment", "body", "missing_field")
        now = utcnow()
        comment = IssueComment(self.new_id(), issue.number, author, body, now, now)
        repo.comments[comment.id] = comment
        issue.comment_ids.append(comment.id)
        issue.updated_at = now
        return comment

    def comment(self, repo: Repo, comment_id: int) -> IssueComment:
        found = repo.comments.get(comment_id)
        if found is None:
            raise not_found()
        return found

    def delete_comment(self, repo: Repo, comment_id: int) -> None:
        comment = self.comment(repo, comment_id)
        del repo.comments[comment_id]
        repo.issue(comment.issue_number).comment_ids.remove(comment_id)

    # -- sub-issues and dependencies ------------------------------------------------------

    def add_sub_issue(
        self, repo: Repo, parent: Issue, sub_issue_id: int, replace: bool, actor: str
    ) -> Issue:
        child = repo.issue_by_id(sub_issue_id)
        if child is None or child.pull is not None:
            raise validation_failed("Issue", "sub_issue_id", "invalid")
        if child.id == parent.id or self._is_ancestor(repo, child, parent):
            raise validation_failed("Issue", "sub_issue_id", "invalid")
        if child.parent_id is not None and not replace:
            raise validation_failed(
                "Issue", "sub_issue_id", "custom", message="Sub issue may only have one parent"
            )
        former = repo.issue_by_id(child.parent_id) if child.parent_id is not None else None
        if former is not None:
            former.sub_issue_ids.remove(child.id)
        child.parent_id = parent.id
        parent.sub_issue_ids.append(child.id)
        now = utcnow()
        self._event(repo, parent, actor, "sub_issue_added", now)
        self._event(repo, child, actor, "parent_issue_added", now)
        return child

    def _is_ancestor(self, repo: Repo, candidate: Issue, issue: Issue) -> bool:
        current: Issue | None = issue
        while current is not None and current.parent_id is not None:
            if current.parent_id == candidate.id:
                return True
            current = repo.issue_by_id(current.parent_id)
        return False

    def remove_sub_issue(self, repo: Repo, parent: Issue, sub_issue_id: int, actor: str) -> Issue:
        child = repo.issue_by_id(sub_issue_id)
        if child is None or child.parent_id != parent.id:
            raise not_found()
        child.parent_id = None
        parent.sub_issue_ids.remove(child.id)
        now = utcnow()
        self._event(repo, parent, actor, "sub_issue_removed", now)
        self._event(repo, child, actor, "parent_issue_removed", now)
        return child

    def sub_issues(self, repo: Repo, parent: Issue) -> list[Issue]:
        """The parent's sub-issues in the order they were added, as GitHub lists them (one
        removed and added again comes last)."""
        found = (repo.issue_by_id(i) for i in parent.sub_issue_ids)
        return [i for i in found if i is not None]

    def add_blocked_by(self, repo: Repo, issue: Issue, blocker_id: int, actor: str) -> Issue:
        blocker = repo.issue_by_id(blocker_id)
        if blocker is None or blocker.id == issue.id:
            raise validation_failed("IssueDependency", "issue_id", "invalid")
        if blocker.id in issue.blocked_by_ids:
            raise validation_failed("IssueDependency", "issue_id", "already_exists")
        issue.blocked_by_ids.append(blocker.id)
        now = utcnow()
        self._event(repo, issue, actor, "blocked_by_added", now)
        self._event(repo, blocker, actor, "blocking_added", now)
        return blocker

    def remove_blocked_by(self, repo: Repo, issue: Issue, blocker_id: int, actor: str) -> Issue:
        blocker = repo.issue_by_id(blocker_id)
        if blocker is None or blocker.id not in issue.blocked_by_ids:
            raise not_found()
        issue.blocked_by_ids.remove(blocker.id)
        now = utcnow()
        self._event(repo, issue, actor, "blocked_by_removed", now)
        self._event(repo, blocker, actor, "blocking_removed", now)
        return blocker

    def blocking(self, repo: Repo, issue: Issue) -> list[Issue]:
        return [i for i in repo.issues.values() if issue.id in i.blocked_by_ids]

    def blocked_by(self, repo: Repo, issue: Issue) -> list[Issue]:
        found = (repo.issue_by_id(i) for i in issue.blocked_by_ids)
        return [i for i in found if i is not None]

    # -- pull requests --------------------------------------------------------------------

    def add_review(
        self,
        repo: Repo,
        issue: Issue,
        author: str,
        state: str,
        body: str,
        commit_id: str,
        comments: list[DraftComment],
        in_reply_to: PullReviewComment | None = None,
    ) -> PullReview:
        """Submit a review of the pull request ``issue`` with its line comments, all at once
        (as GitHub does); ``in_reply_to`` makes its one comment a reply in that thread."""
        with self.lock:
            now = utcnow()
            review = PullReview(self.new_id(), issue.number, author, state, body, commit_id, now)
            repo.reviews[review.id] = review
            for draft in comments:
                comment = PullReviewComment(
                    id=self.new_id(),
                    review_id=review.id,
                    pull_number=issue.number,
                    author=author,
                    body=draft.body,
                    path=draft.path,
                    line=draft.line,
                    side=draft.side,
                    position=draft.position,
                    diff_hunk=draft.diff_hunk,
                    commit_id=commit_id,
                    created_at=now,
                    updated_at=now,
                    in_reply_to_id=in_reply_to.id if in_reply_to else None,
                )
                repo.review_comments[comment.id] = comment
            issue.updated_at = now
            return review

    def review(self, repo: Repo, issue: Issue, review_id: int) -> PullReview:
        """The review ``review_id`` of the pull request ``issue``; 404 otherwise."""
        found = repo.reviews.get(review_id)
        if found is None or found.pull_number != issue.number:
            raise not_found()
        return found

    def reviews(self, repo: Repo, issue: Issue) -> list[PullReview]:
        """The pull request's reviews, oldest first."""
        return sorted(
            (r for r in repo.reviews.values() if r.pull_number == issue.number), key=lambda r: r.id
        )

    def review_comments_of(self, repo: Repo, issue: Issue) -> list[PullReviewComment]:
        """The pull request's review comments, oldest first."""
        return sorted(
            (c for c in repo.review_comments.values() if c.pull_number == issue.number),
            key=lambda c: c.id,
        )

    def record_merge(self, repo: Repo, issue: Issue, merge_sha: str, actor: str) -> list[int]:
        """Mark the pull request merged and closed; close the issues its body says it fixes
        (GitHub's closing keywords) when it merged into the default branch. Returns the numbers
        of the issues closed."""
        pull = issue.pull
        assert pull is not None
        now = utcnow()
        pull.merged = True
        pull.merged_at = now
        pull.merged_by = actor
        pull.merge_commit_sha = merge_sha
        self._event(repo, issue, actor, "merged", now)
        self.set_state(repo, issue, "closed", None, actor)
        closed: list[int] = []
        # GitHub reads closing keywords only when the pull request's base is the default
        # branch; merged into any other branch (a Spec branch), it closes nothing (GitHub Docs,
        # "Linking a pull request to an issue"). GitHub also closes issues a commit message
        # names once the commit reaches the default branch; the stand-in reads no commit
        # messages, only the pull request's body.
        if pull.base_ref != repo.default_branch:
            return closed
        for match in _CLOSING.finditer(issue.body or ""):
            target = repo.issues.get(int(match.group(1)))
            if target is not None and target.pull is None and target.state == "open":
                self.set_state(repo, target, "closed", "completed", actor)
                closed.append(target.number)
        return closed

    # -- webhooks -------------------------------------------------------------------------

    def add_organisation_owner(self, organisation: str, login: str) -> None:
        """Make ``login`` an owner of ``organisation``: who may read its hooks."""
        with self.lock:
            self.organisation_owners.setdefault(organisation.lower(), set()).add(login)

    def add_hook(
        self,
        owner: str,
        name: str | None,
        url: str,
        *,
        events: tuple[str, ...] = ("push",),
        active: bool = True,
        content_type: str = "json",
        secret: str | None = None,
    ) -> Hook:
        """A webhook of ``owner/name`` (``name`` None: of the organisation ``owner``) sending
        ``events`` to ``url``, as a person makes one in the settings."""
        with self.lock:
            if name is not None and (owner, name) not in self.repos:
                raise ValueError(f"no repository {owner}/{name}")
            hook = Hook(
                id=self.new_id(),
                owner=owner,
                name=name,
                url=url,
                events=list(events),
                active=active,
                content_type=content_type,
                secret=secret,
                created_at=utcnow(),
            )
            self.hooks[hook.id] = hook
            return hook

    def record_delivery(
        self,
        hook: Hook,
        status_code: int,
        *,
        event: str = "issues",
        action: str | None = "labeled",
        delivered_at: datetime | None = None,
        redelivery: bool = False,
    ) -> RecordedDelivery:
        """Record that GitHub sent ``hook`` a delivery and its receiver answered
        ``status_code`` (0: could not be reached)."""
        with self.lock:
            delivery = RecordedDelivery(
                id=self.new_id(),
                guid=secrets.token_hex(16),
                event=event,
                action=action,
                status_code=status_code,
                delivered_at=delivered_at or utcnow(),
                redelivery=redelivery,
            )
            hook.deliveries.append(delivery)
            return delivery
