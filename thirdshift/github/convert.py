"""Conversions from PyGithub objects to thirdshift's records (``thirdshift.records``),
for the GitHub adapter (``thirdshift.github.adapter``), which calls them inside each request so that
nothing lazy escapes."""

from __future__ import annotations

import re
from typing import Any

from github.CheckRun import CheckRun as GhCheckRun
from github.CommitStatus import CommitStatus as GhCommitStatus
from github.Issue import Issue
from github.IssueComment import IssueComment
from github.PullRequest import PullRequest

from thirdshift.records import (
    BlockingIssue,
    CheckRun,
    Comment,
    CommitStatus,
    IssueInfo,
    IssueSummary,
    PullRequestInfo,
    Review,
    ReviewComment,
)

__all__ = [
    "check_run_record",
    "comment_record",
    "issue_record",
    "issue_summary_record",
    "log_tail",
    "pull_record",
    "status_record",
]

_ACTIONS_JOB_URL = re.compile(r"/actions/runs/(\d+)/job/(\d+)(?:[/?#]|$)")


def comment_record(comment: IssueComment) -> Comment:
    return Comment(
        id=comment.id,
        author=comment.user.login,
        body=comment.body,
        created_at=comment.created_at,
    )


def issue_record(issue: Issue) -> IssueInfo:
    return IssueInfo(
        number=issue.number,
        title=issue.title,
        body=issue.body or "",
        state=issue.state,
        labels=tuple(label.name for label in issue.labels),
        html_url=issue.html_url,
        author=issue.user.login,
        is_pull_request=issue.pull_request is not None,
    )


def issue_summary_record(issue: Issue) -> IssueSummary:
    return IssueSummary(
        number=issue.number,
        title=issue.title,
        state=issue.state,
        labels=tuple(label.name for label in issue.labels),
        is_pull_request=issue.pull_request is not None,
        updated_at=issue.updated_at,
        html_url=issue.html_url,
        body=issue.body or "",
    )


def status_record(status: GhCommitStatus) -> CommitStatus:
    return CommitStatus(context=status.context, state=status.state, target_url=status.target_url)


def pull_record(pull: PullRequest, *, listed: bool = False) -> PullRequestInfo:
    """The record of a pull request. A ``listed`` one came from a list, which has no
    mergeability and no ``merged``: reading those would fetch it again."""
    return PullRequestInfo(
        number=pull.number,
        html_url=pull.html_url,
        state=pull.state,
        merged=pull.merged_at is not None if listed else bool(pull.merged),
        draft=bool(pull.draft),
        head_ref=pull.head.ref,
        head_sha=pull.head.sha,
        base_ref=pull.base.ref,
        title=pull.title,
        body=pull.body or "",
        mergeable=None if listed else pull.mergeable,
        mergeable_state="unknown" if listed else (pull.mergeable_state or "unknown"),
        author=pull.user.login if pull.user is not None else "",
        updated_at=pull.updated_at,
    )


def check_run_record(run: GhCheckRun) -> CheckRun:
    """The record of a check run. A GitHub Actions check links to its job as
    ``.../actions/runs/<run id>/job/<job id>`` (``details_url`` and ``html_url``, on GitHub and
    on the stand-in): those ids let its log be read and its failed jobs re-run."""
    job_id = run_id = None
    app = run.app
    if app is not None and app.slug == "github-actions":
        for url in (run.details_url, run.html_url):
            match = _ACTIONS_JOB_URL.search(url or "")
            if match:
                run_id, job_id = int(match.group(1)), int(match.group(2))
                break
    return CheckRun(
        id=run.id,
        name=run.name,
        head_sha=run.head_sha,
        status=run.status,
        conclusion=run.conclusion,
        html_url=run.html_url,
        job_id=job_id,
        run_id=run_id,
    )


def own_sub_issues(found: list[Any], owner: str, name: str) -> tuple[int, ...]:
    """The numbers of the sub-issues listed in ``owner/name`` itself, in GitHub's order. A
    sub-issue in another repository has a number of that repository: taken as this one's, a
    Spec run would run, land and close an unrelated issue here."""
    suffix = f"/repos/{owner}/{name}".lower()
    return tuple(
        int(item["number"])
        for item in found
        if str(item.get("repository_url") or suffix).lower().endswith(suffix)
    )


def blocking_issues(found: list[Any], owner: str, name: str) -> tuple[BlockingIssue, ...]:
    """Each blocker GitHub lists, with its state; one of another repository says which (its
    number is that repository's). This repository's first, ascending, then the others."""
    suffix = f"/repos/{owner}/{name}".lower()
    blockers = []
    for item in found:
        url = str(item.get("repository_url") or suffix)
        here = url.lower().endswith(suffix)
        elsewhere = "" if here else "/".join(url.rstrip("/").split("/")[-2:])
        blockers.append(
            BlockingIssue(int(item["number"]), str(item.get("state", "open")), elsewhere)
        )
    return tuple(sorted(blockers, key=lambda b: b.order))


def log_tail(text: str, max_chars: int) -> str:
    """The last ``max_chars`` characters of ``text``, starting at a whole line when cut."""
    if len(text) <= max_chars:
        return text
    tail = text[-max_chars:]
    cut = tail.find("\n")
    return tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail


def _is_bot(user: Any) -> bool:
    """GitHub marks an App's or a workflow's account ``type: Bot``; its login ends ``[bot]``."""
    login = str((user or {}).get("login") or "")
    return (user or {}).get("type") == "Bot" or login.endswith("[bot]")


def review_record(data: Any) -> Review:
    """A review, from the list's JSON (a deleted account's review has no user)."""
    user = data.get("user") or {}
    return Review(
        id=int(data["id"]),
        author=str(user.get("login") or ""),
        state=str(data.get("state") or ""),
        body=str(data.get("body") or ""),
        is_bot=_is_bot(user),
    )


def review_comment_record(data: Any) -> ReviewComment:
    """A comment on a line of the diff, from the list's JSON."""
    user = data.get("user") or {}
    review = data.get("pull_request_review_id")
    line = data.get("line")
    return ReviewComment(
        id=int(data["id"]),
        review_id=int(review) if review is not None else None,
        author=str(user.get("login") or ""),
        body=str(data.get("body") or ""),
        path=str(data.get("path") or ""),
        line=int(line) if line is not None else None,
        is_bot=_is_bot(user),
    )
