"""What thirdshift knows of GitHub objects: frozen records, converted at the adapter's boundary
(``thirdshift.github``), so nothing else ever holds a PyGithub object that fetches lazily."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class RepoInfo:
    owner: str
    name: str
    default_branch: str
    clone_url: str
    html_url: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime


@dataclass(frozen=True)
class IssueInfo:
    number: int
    title: str
    body: str
    state: str  # "open" or "closed"
    labels: tuple[str, ...]
    html_url: str
    author: str
    is_pull_request: bool = False


@dataclass(frozen=True)
class PullRequestInfo:
    number: int
    html_url: str
    state: str  # "open" or "closed"
    merged: bool
    draft: bool
    head_ref: str
    head_sha: str
    base_ref: str
    title: str
    body: str
    mergeable: bool | None  # None while GitHub is still computing it
    mergeable_state: str  # "clean", "dirty", "blocked", "unstable", "unknown", ...


@dataclass(frozen=True)
class CheckRun:
    """One check run on a commit. ``job_id`` is set when the check is a GitHub Actions job
    (then it can be re-run and its log read); ``run_id`` is its workflow run."""

    id: int
    name: str
    head_sha: str
    status: str  # "queued", "in_progress", "completed"
    conclusion: str | None  # "success", "failure", "neutral", "skipped", "cancelled", ...
    html_url: str
    job_id: int | None = None
    run_id: int | None = None


@dataclass(frozen=True)
class CommitStatus:
    """One commit status (the older statuses API): ``state`` is success, pending, failure or
    error."""

    context: str
    state: str
    target_url: str | None


@dataclass(frozen=True)
class MergeResult:
    merged: bool
    sha: str | None
    message: str
