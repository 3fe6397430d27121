"""JSON bodies of the GitHub stand-in, shaped like GitHub's (every property the OpenAPI
description marks required, with its type and nullability).

Functions here only render; they read the world and never change it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from thirdshift.sandbox.github.state import (
    Event,
    Issue,
    IssueComment,
    Label,
    PullReview,
    PullReviewComment,
    Repo,
    World,
    rank,
)

Json = dict[str, Any]

EPOCH = "2008-04-10T00:00:00Z"


def stamp(at: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z``, or None."""
    if at is None:
        return None
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(prefix: str, number: int) -> str:
    """A GitHub-looking global node id (``I_kwDO...``)."""
    return prefix + "_kwDO" + base64.b64encode(str(number).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Urls:
    """Where the stand-in is: ``web`` (``http://127.0.0.1:PORT``) and ``api`` (``web/api/v3``)."""

    web: str

    @property
    def api(self) -> str:
        return f"{self.web}/api/v3"

    def repo(self, repo: Repo) -> str:
        return f"{self.api}/repos/{repo.full_name}"


class Shapes:
    """Renders the world's objects as GitHub's JSON."""

    def __init__(self, world: World, urls: Urls) -> None:
        self.world = world
        self.urls = urls

    # -- users ----------------------------------------------------------------------------

    def user(self, login: str) -> Json:
        """A ``simple-user``; logins unknown to the scenario are organisations."""
        known = self.world.users.get(login)
        uid = known.id if known else 1000 + sum(ord(c) for c in login)
        url = f"{self.urls.api}/users/{login}"
        return {
            "login": login,
            "id": uid,
            "node_id": node_id("U" if known else "O", uid),
            "avatar_url": f"{self.urls.web}/avatars/{login}",
            "gravatar_id": "",
            "url": url,
            "html_url": f"{self.urls.web}/{login}",
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions",
            "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
            "type": ("Bot" if login.endswith("[bot]") else "User") if known else "Organization",
            "user_view_type": "public",
            "site_admin": False,
        }

    def private_user(self, login: str) -> Json:
        """The authenticated user (``GET /user``)."""
        user = self.world.users[login]
        owned = sum(1 for r in self.world.repos.values() if r.owner == login)
        return {
            **self.user(login),
            "user_view_type": "private",
            "name": login,
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "twitter_username": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": stamp(user.created_at),
            "updated_at": stamp(user.created_at),
            "private_gists": 0,
            "total_private_repos": owned,
            "owned_private_repos": owned,
            "disk_usage": 0,
            "collaborators": 0,
            "two_factor_authentication": True,
        }

    def collaborator_permission(self, repo: Repo, login: str) -> Json:
        """``repository-collaborator-permission``: the legacy permission and the role."""
        role = self.world.role(login, repo)
        legacy = {"admin": "admin", "maintain": "write", "write": "write"}.get(
            role or "", "read" if role else "none"
        )
        strength = rank(role)
        user = {
            **self.user(login),
            "permissions": {
                "pull": strength >= 0,
                "triage": strength >= 1,
                "push": strength >= 2,
                "maintain": strength >= 3,
                "admin": strength >= 4,
            },
            "role_name": role or "none",
        }
        return {"permission": legacy, "role_name": role or "none", "user": user}

    def association(self, repo: Repo, login: str) -> str:
        if login == repo.owner:
            return "OWNER"
        return "COLLABORATOR" if self.world.role(login, repo) else "NONE"

    # -- repositories ---------------------------------------------------------------------

    def repo_minimal(self, repo: Repo) -> Json:
        """The URL-heavy core shared by ``minimal-repository`` and ``repository``."""
        url = self.urls.repo(repo)
        out: Json = {
            "id": repo.id,
            "node_id": node_id("R", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": self.user(repo.owner),
            "private": True,
            "html_url": f"{self.urls.web}/{repo.full_name}",
            "description": None,
            "fork": False,
            "url": url,
        }
        templates = {
            "archive_url": "/{archive_format}{/ref}",
            "assignees_url": "/assignees{/user}",
            "blobs_url": "/git/blobs{/sha}",
            "branches_url": "/branches{/branch}",
            "collaborators_url": "/collaborators{/collaborator}",
            "comments_url": "/comments{/number}",
            "commits_url": "/commits{/sha}",
            "compare_url": "/compare/{base}...{head}",
            "contents_url": "/contents/{+path}",
            "contributors_url": "/contributors",
            "deployments_url": "/deployments",
            "downloads_url": "/downloads",
            "events_url": "/events",
            "forks_url": "/forks",
            "git_commits_url": "/git/commits{/sha}",
            "git_refs_url": "/git/refs{/sha}",
            "git_tags_url": "/git/tags{/sha}",
            "hooks_url": "/hooks",
            "issue_comment_url": "/issues/comments{/number}",
            "issue_events_url": "/issues/events{/number}",
            "issues_url": "/issues{/number}",
            "keys_url": "/keys{/key_id}",
            "labels_url": "/labels{/name}",
            "languages_url": "/languages",
            "merges_url": "/merges",
            "milestones_url": "/milestones{/number}",
            "notifications_url": "/notifications{?since,all,participating}",
            "pulls_url": "/pulls{/number}",
            "releases_url": "/releases{/id}",
            "stargazers_url": "/stargazers",
            "statuses_url": "/statuses/{sha}",
            "subscribers_url": "/subscribers",
            "subscription_url": "/subscription",
            "tags_url": "/tags",
            "teams_url": "/teams",
            "trees_url": "/git/trees{/sha}",
        }
        out.update({key: url + suffix for key, suffix in templates.items()})
        return out

    def repo(self, repo: Repo, viewer: str | None, full: bool = False) -> Json:
        """``repository`` (inside pull requests) or ``full-repository`` (``GET /repos/..``)."""
        strength = rank(self.world.role(viewer, repo))
        open_issues = sum(1 for i in repo.issues.values() if i.state == "open")
        out = self.repo_minimal(repo)
        out.update(
            {
                "clone_url": f"{self.urls.web}/{repo.full_name}.git",
                "git_url": f"git://127.0.0.1/{repo.full_name}.git",
                "ssh_url": f"git@127.0.0.1:{repo.full_name}.git",
                "svn_url": f"{self.urls.web}/{repo.full_name}",
                "mirror_url": None,
                "homepage": None,
                "language": None,
                "forks": 0,
                "forks_count": 0,
                "stargazers_count": 0,
                "watchers_count": 0,
                "watchers": 0,
                "size": 0,
                "default_branch": repo.default_branch,
                "open_issues": open_issues,
                "open_issues_count": open_issues,
                "is_template": False,
                "topics": [],
                "has_issues": True,
                "has_projects": False,
                "has_wiki": False,
                "has_pages": False,
                "has_downloads": True,
                "has_discussions": False,
                "archived": repo.archived,
                "disabled": False,
                "visibility": "private",
                "pushed_at": stamp(repo.pushed_at),
                "created_at": stamp(repo.created_at),
                "updated_at": stamp(repo.pushed_at),
                "permissions": {
                    "admin": strength >= 4,
                    "maintain": strength >= 3,
                    "push": strength >= 2,
                    "triage": strength >= 1,
                    "pull": strength >= 0,
                },
                "allow_rebase_merge": False,
                "allow_squash_merge": False,
                "allow_merge_commit": True,
                "allow_auto_merge": False,
                "delete_branch_on_merge": False,
                "license": None,
            }
        )
        if full:
            out.update({"network_count": 0, "subscribers_count": 0})
        return out

    # -- labels, issues, comments, events -------------------------------------------------

    def label(self, repo: Repo, label: Label) -> Json:
        return {
            "id": label.id,
            "node_id": node_id("LA", label.id),
            "url": f"{self.urls.repo(repo)}/labels/{label.name}".replace(" ", "%20"),
            "name": label.name,
            "color": label.color,
            "default": label.default,
            "description": label.description,
        }

    def issue(self, repo: Repo, issue: Issue) -> Json:
        """An ``issue``; a pull request's issue side carries ``pull_request``."""
        url = f"{self.urls.repo(repo)}/issues/{issue.number}"
        kind = "pull" if issue.pull else "issues"
        children = self.world.sub_issues(repo, issue)
        done = sum(1 for c in children if c.state == "closed")
        blocking = self.world.blocking(repo, issue)
        blocked_by = self.world.blocked_by(repo, issue)
        parent = repo.issue_by_id(issue.parent_id) if issue.parent_id else None
        out: Json = {
            "id": issue.id,
            "node_id": node_id("PR" if issue.pull else "I", issue.id),
            "url": url,
            "repository_url": self.urls.repo(repo),
            "labels_url": url + "/labels{/name}",
            "comments_url": url + "/comments",
            "events_url": url + "/events",
            "timeline_url": url + "/timeline",
            "html_url": f"{self.urls.web}/{repo.full_name}/{kind}/{issue.number}",
            "number": issue.number,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "title": issue.title,
            "body": issue.body,
            "user": self.user(issue.author),
            "labels": [self.label(repo, lb) for lb in issue.labels],
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "locked": False,
            "active_lock_reason": None,
            "comments": len(issue.comment_ids),
            "closed_at": stamp(issue.closed_at),
            "created_at": stamp(issue.created_at),
            "updated_at": stamp(issue.updated_at),
            "closed_by": self.user(issue.closed_by) if issue.closed_by else None,
            "author_association": self.association(repo, issue.author),
            "performed_via_github_app": None,
            "reactions": self.reactions(url + "/reactions"),
            "sub_issues_summary": {
                "total": len(children),
                "completed": done,
                "percent_completed": done * 100 // len(children) if children else 0,
            },
            "issue_dependencies_summary": {
                "blocked_by": sum(1 for b in blocked_by if b.state == "open"),
                "blocking": sum(1 for b in blocking if b.state == "open"),
                "total_blocked_by": len(blocked_by),
                "total_blocking": len(blocking),
            },
        }
        if parent is not None:
            out["parent_issue_url"] = f"{self.urls.repo(repo)}/issues/{parent.number}"
        if issue.pull:
            pulls = f"{self.urls.repo(repo)}/pulls/{issue.number}"
            html = out["html_url"]
            out["draft"] = issue.pull.draft
            out["pull_request"] = {
                "url": pulls,
                "html_url": html,
                "diff_url": html + ".diff",
                "patch_url": html + ".patch",
                "merged_at": stamp(issue.pull.merged_at),
            }
        return out

    @staticmethod
    def reactions(url: str) -> Json:
        names = ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")
        return {"url": url, "total_count": 0, **dict.fromkeys(names, 0)}

    def comment(self, repo: Repo, comment: IssueComment) -> Json:
        url = f"{self.urls.repo(repo)}/issues/comments/{comment.id}"
        issue = repo.issue(comment.issue_number)
        kind = "pull" if issue.pull else "issues"
        return {
            "id": comment.id,
            "node_id": node_id("IC", comment.id),
            "url": url,
            "html_url": f"{self.urls.web}/{repo.full_name}/{kind}/{issue.number}"
            f"#issuecomment-{comment.id}",
            "body": comment.body,
            "user": self.user(comment.author),
            "created_at": stamp(comment.created_at),
            "updated_at": stamp(comment.updated_at),
            "issue_url": f"{self.urls.repo(repo)}/issues/{issue.number}",
            "author_association": self.association(repo, comment.author),
            "performed_via_github_app": None,
            "reactions": self.reactions(url + "/reactions"),
        }

    def event(self, repo: Repo, event: Event) -> Json:
        """An issue event (``labeled`` carries the label's name and colour)."""
        out: Json = {
            "id": event.id,
            "node_id": node_id("LE" if event.label else "E", event.id),
            "url": f"{self.urls.repo(repo)}/issues/events/{event.id}",
            "actor": self.user(event.actor),
            "event": event.event,
            "commit_id": None,
            "commit_url": None,
            "created_at": stamp(event.created_at),
            "performed_via_github_app": None,
        }
        if event.label is not None:
            out["label"] = {"name": event.label.name, "color": event.label.color}
        if event.rename is not None:
            out["rename"] = {"from": event.rename[0], "to": event.rename[1]}
        return out

    def comment_event(self, repo: Repo, comment: IssueComment) -> Json:
        """A comment as it appears in an issue's timeline."""
        return {
            **self.comment(repo, comment),
            "event": "commented",
            "actor": self.user(comment.author),
        }

    # -- pull request reviews -------------------------------------------------------------

    def _pull_urls(self, repo: Repo, number: int) -> tuple[str, str]:
        """The pull request's API URL and its web page."""
        return (
            f"{self.urls.repo(repo)}/pulls/{number}",
            f"{self.urls.web}/{repo.full_name}/pull/{number}",
        )

    def review(self, repo: Repo, review: PullReview) -> Json:
        """A ``pull-request-review``."""
        api, web = self._pull_urls(repo, review.pull_number)
        html = f"{web}#pullrequestreview-{review.id}"
        return {
            "id": review.id,
            "node_id": node_id("PRR", review.id),
            "user": self.user(review.author),
            "body": review.body,
            "state": review.state,
            "html_url": html,
            "pull_request_url": api,
            "author_association": self.association(repo, review.author),
            "_links": {"html": {"href": html}, "pull_request": {"href": api}},
            "submitted_at": stamp(review.submitted_at),
            "commit_id": review.commit_id,
        }

    def review_comment(self, repo: Repo, comment: PullReviewComment) -> Json:
        """A ``pull-request-review-comment`` (also a valid legacy ``review-comment``). Comments
        never go outdated here: the current place is the original one."""
        api, web = self._pull_urls(repo, comment.pull_number)
        url = f"{self.urls.repo(repo)}/pulls/comments/{comment.id}"
        html = f"{web}#discussion_r{comment.id}"
        out: Json = {
            "url": url,
            "pull_request_review_id": comment.review_id,
            "id": comment.id,
            "node_id": node_id("PRRC", comment.id),
            "diff_hunk": comment.diff_hunk,
            "path": comment.path,
            "position": comment.position,
            "original_position": comment.position,
            "commit_id": comment.commit_id,
            "original_commit_id": comment.commit_id,
            "user": self.user(comment.author),
            "body": comment.body,
            "created_at": stamp(comment.created_at),
            "updated_at": stamp(comment.updated_at),
            "html_url": html,
            "pull_request_url": api,
            "author_association": self.association(repo, comment.author),
            "_links": {
                "self": {"href": url},
                "html": {"href": html},
                "pull_request": {"href": api},
            },
            "reactions": self.reactions(url + "/reactions"),
            "start_line": None,
            "original_start_line": None,
            "start_side": None,
            "line": comment.line,
            "original_line": comment.line,
            "side": comment.side,
            "subject_type": "line",
        }
        if comment.in_reply_to_id is not None:
            out["in_reply_to_id"] = comment.in_reply_to_id
        return out
