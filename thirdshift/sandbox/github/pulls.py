"""REST routes of the GitHub stand-in for pull requests (create, list, update, merge, with
mergeability from a real trial merge), plus the two GraphQL mutations PyGithub sends for
drafts.

About 510 lines: a pull request is the stand-in's largest resource, and its JSON, its
mergeability and its merge read the same git answers, so they stay in one module."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from thirdshift.errors import SandboxError
from thirdshift.sandbox.ci import WORKFLOW_BOT_LOGIN
from thirdshift.sandbox.git_http import git_env
from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.issues import is_issue_edits_query, issue_edits
from thirdshift.sandbox.github.shapes import Json, node_id, stamp
from thirdshift.sandbox.github.state import (
    ApiError,
    Issue,
    Pull,
    Repo,
    not_found,
    utcnow,
    validation_failed,
)

_REPO = "/repos/{owner}/{repo}"
_PULL = _REPO + "/pulls/{number}"
_GRAPHQL_MUTATIONS = ("markPullRequestReadyForReview", "convertPullRequestToDraft")
_MUTATION = re.compile(r"\b(markPullRequestReadyForReview|convertPullRequestToDraft)\s*\(")


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    add = router.add
    add("GET", _REPO + "/pulls", list_pulls)
    add("POST", _REPO + "/pulls", create_pull)
    add("GET", _PULL, get_pull)
    add("PATCH", _PULL, update_pull)
    add("PUT", _PULL + "/merge", merge_pull)
    add("GET", _PULL + "/merge", check_merged)


# -- pull request facts from git ----------------------------------------------------------


def head_sha(call: Call, repo: Repo, issue: Issue) -> str:
    """The pull request's head: the branch tip while open and the branch exists, else the
    last one seen."""
    pull = issue.pull
    assert pull is not None
    if issue.state == "open":
        current = call.backend.git.branches(repo.owner, repo.name).get(pull.head_ref)
        if current is not None:
            pull.head_sha = current
    return pull.head_sha


def git_output(call: Call, repo: Repo, *args: str) -> str:
    try:
        return _strict_output(call, repo, *args)
    except _GitFailed:
        return ""


def _diff_stats(call: Call, repo: Repo, base: str, head: str) -> dict[str, int]:
    """``commits``, ``additions``, ``deletions`` and ``changed_files`` between base and head
    (all 0 when git cannot say)."""
    try:
        if len(base) == len(head) == 40:  # two commits: the same answer every time git gives one
            path = str(call.backend.git.path(repo.owner, repo.name))
            return call.backend.git.remembered(
                ("diff-stats", path, base, head), lambda: _counted(call, repo, base, head)
            )
        return _counted(call, repo, base, head)
    except _GitFailed:
        return {"commits": 0, "additions": 0, "deletions": 0, "changed_files": 0}


class _GitFailed(Exception):
    """A git command of the stand-in exited non-zero: its answer is not one to remember."""


def _strict_output(call: Call, repo: Repo, *args: str) -> str:
    path = call.backend.git.path(repo.owner, repo.name)
    done = subprocess.run(
        ["git", *args], cwd=path, env=git_env(), capture_output=True, timeout=60, check=False
    )
    if done.returncode != 0:
        raise _GitFailed(args[0])
    return done.stdout.decode()


def _counted(call: Call, repo: Repo, base: str, head: str) -> dict[str, int]:
    commits = _strict_output(call, repo, "rev-list", "--count", f"{base}..{head}").strip()
    numstat = _strict_output(call, repo, "diff", "--numstat", f"{base}...{head}")
    additions = deletions = files = 0
    for line in numstat.splitlines():
        added, deleted, _ = line.split("\t", 2)
        files += 1
        additions += int(added) if added.isdigit() else 0
        deletions += int(deleted) if deleted.isdigit() else 0
    return {
        "commits": int(commits) if commits.isdigit() else 0,
        "additions": additions,
        "deletions": deletions,
        "changed_files": files,
    }


def _mergeability(call: Call, repo: Repo, issue: Issue, head: str) -> tuple[bool | None, str]:
    """``mergeable`` and ``mergeable_state`` from a real trial merge and the head's checks."""
    pull = issue.pull
    assert pull is not None
    if issue.state != "open":
        return None, "unknown"
    git = call.backend.git
    if git.resolve(repo.owner, repo.name, pull.base_ref) is None:
        return False, "dirty"
    if not git.trial_merge(repo.owner, repo.name, pull.base_ref, head):
        return False, "dirty"
    if pull.draft:
        return True, "draft"
    runs = call.backend.ci.check_runs(repo.owner, repo.name, head)
    if any(
        r.status != "completed" or r.conclusion not in ("success", "neutral", "skipped")
        for r in runs
    ):
        return True, "unstable"
    return True, "clean"


# -- pull request shapes ------------------------------------------------------------------


def _branch(call: Call, repo: Repo, ref: str, sha: str) -> Json:
    return {
        "label": f"{repo.owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": call.shapes.user(repo.owner),
        "repo": call.shapes.repo(repo, call.login),
    }


def pull_json(call: Call, repo: Repo, issue: Issue, full: bool) -> Json:
    """A ``pull-request`` (``full``) or a ``pull-request-simple`` (in lists)."""
    pull = issue.pull
    assert pull is not None
    shapes = call.shapes
    head = head_sha(call, repo, issue)
    base_sha = call.backend.git.resolve(repo.owner, repo.name, pull.base_ref) or head
    url = f"{shapes.urls.repo(repo)}/pulls/{issue.number}"
    issue_url = f"{shapes.urls.repo(repo)}/issues/{issue.number}"
    html = f"{shapes.urls.web}/{repo.full_name}/pull/{issue.number}"
    statuses = f"{shapes.urls.repo(repo)}/statuses/{head}"
    links = {
        "self": url,
        "html": html,
        "issue": issue_url,
        "comments": issue_url + "/comments",
        "review_comments": url + "/comments",
        "review_comment": url + "/comments{/number}",
        "commits": url + "/commits",
        "statuses": statuses,
    }
    out: Json = {
        "url": url,
        "id": issue.id,
        "node_id": node_id("PR", issue.id),
        "html_url": html,
        "diff_url": html + ".diff",
        "patch_url": html + ".patch",
        "issue_url": issue_url,
        "commits_url": url + "/commits",
        "review_comments_url": url + "/comments",
        "review_comment_url": url + "/comments{/number}",
        "comments_url": issue_url + "/comments",
        "statuses_url": statuses,
        "number": issue.number,
        "state": issue.state,
        "locked": False,
        "title": issue.title,
        "user": shapes.user(issue.author),
        "body": issue.body,
        "labels": [shapes.label(repo, lb) for lb in issue.labels],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": stamp(issue.created_at),
        "updated_at": stamp(issue.updated_at),
        "closed_at": stamp(issue.closed_at),
        "merged_at": stamp(pull.merged_at),
        "merge_commit_sha": pull.merge_commit_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "head": _branch(call, repo, pull.head_ref, head),
        "base": _branch(call, repo, pull.base_ref, base_sha),
        "_links": {key: {"href": href} for key, href in links.items()},
        "author_association": shapes.association(repo, issue.author),
        "auto_merge": None,
        "draft": pull.draft,
    }
    if full:
        mergeable, state = _mergeability(call, repo, issue, head)
        out.update(
            {
                "merged": pull.merged,
                "mergeable": mergeable,
                "rebaseable": False if mergeable is not None else None,
                "mergeable_state": state,
                "merged_by": shapes.user(pull.merged_by) if pull.merged_by else None,
                "comments": len(issue.comment_ids),
                "review_comments": len(call.world.review_comments_of(repo, issue)),
                "maintainer_can_modify": False,
                **_diff_stats(call, repo, base_sha, head),
            }
        )
    return out


def minimal_pulls(call: Call, repo: Repo, sha: str) -> list[Json]:
    """``pull-request-minimal`` entries for the open pull requests whose head is ``sha``."""
    found = []
    for issue in repo.issues.values():
        if issue.pull is None or issue.state != "open" or head_sha(call, repo, issue) != sha:
            continue
        ref = {"id": repo.id, "url": call.shapes.urls.repo(repo), "name": repo.name}
        base = call.backend.git.resolve(repo.owner, repo.name, issue.pull.base_ref) or sha
        found.append(
            {
                "id": issue.id,
                "number": issue.number,
                "url": f"{call.shapes.urls.repo(repo)}/pulls/{issue.number}",
                "head": {"ref": issue.pull.head_ref, "sha": sha, "repo": ref},
                "base": {"ref": issue.pull.base_ref, "sha": base, "repo": ref},
            }
        )
    return found


# -- pull request routes ------------------------------------------------------------------


def _branch_name(raw: str, repo: Repo) -> str:
    owner, sep, ref = raw.partition(":")
    if sep and owner != repo.owner:
        raise validation_failed("PullRequest", "head", "invalid")
    return ref if sep else raw


def list_pulls(call: Call) -> Reply:
    repo = call.repo()
    state = call.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise validation_failed("PullRequest", "state", "invalid")
    head = call.query.get("head")
    head_owner, _, head_ref = (head or "").partition(":")
    base = call.query.get("base")
    pulls = [
        issue
        for issue in repo.issues.values()
        if issue.pull is not None
        and (state == "all" or issue.state == state)
        and (head is None or (head_owner == repo.owner and issue.pull.head_ref == head_ref))
        and (base is None or issue.pull.base_ref == base)
    ]
    pulls.sort(key=lambda i: i.number, reverse=call.query.get("direction", "desc") != "asc")
    return call.page([pull_json(call, repo, p, full=False) for p in pulls])


def create_pull(call: Call) -> Reply:
    repo = call.repo()
    data = call.json()
    for key in ("head", "base"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise validation_failed("PullRequest", key, "missing_field")
    head_ref = _branch_name(data["head"], repo)
    base_ref = str(data["base"])
    branches = call.backend.git.branches(repo.owner, repo.name)
    for key, ref in (("head", head_ref), ("base", base_ref)):
        if ref not in branches:
            raise validation_failed("PullRequest", key, "invalid")
    if branches[head_ref] == branches[base_ref]:
        raise ApiError(
            422,
            "Validation Failed",
            [
                {
                    "resource": "PullRequest",
                    "code": "custom",
                    "message": f"No commits between {base_ref} and {head_ref}",
                }
            ],
        )
    for other in repo.issues.values():
        if (
            other.pull is not None
            and other.state == "open"
            and other.pull.head_ref == head_ref
            and other.pull.base_ref == base_ref
        ):
            raise ApiError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for {repo.owner}:{head_ref}.",
                    }
                ],
            )
    title = data.get("title")
    if not isinstance(title, str) or not title:
        raise validation_failed("PullRequest", "title", "missing_field")
    body = data.get("body") if isinstance(data.get("body"), str) else None
    pull = Pull(head_ref, base_ref, data.get("draft") is True, branches[head_ref])
    if call.login is None:
        raise ApiError(401, "Requires authentication")
    issue = call.world.create_issue(repo, title, body, call.login, pull)
    return Reply(201, pull_json(call, repo, issue, full=True))


def get_pull(call: Call) -> Reply:
    repo = call.repo()
    return Reply(200, pull_json(call, repo, repo.pull(call.number()), full=True))


def update_pull(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.pull(call.number())
    if call.login != issue.author and call.role(repo) not in ("write", "maintain", "admin"):
        raise ApiError(403, "Must have write access to edit this pull request.")
    pull = issue.pull
    assert pull is not None
    data = call.json()
    for key in ("title", "body"):
        if key in data:
            value = data[key]
            if not isinstance(value, str) or (key == "title" and not value):
                raise validation_failed("PullRequest", key, "invalid")
            setattr(issue, key, value)
    if "base" in data:
        base = data["base"]
        if (
            not isinstance(base, str)
            or call.backend.git.resolve(repo.owner, repo.name, f"refs/heads/{base}") is None
        ):
            raise validation_failed("PullRequest", "base", "invalid")
        pull.base_ref = base
    if "state" in data:
        state = data["state"]
        if state not in ("open", "closed") or (state == "open" and pull.merged):
            raise validation_failed("PullRequest", "state", "invalid")
        call.world.set_state(repo, issue, state, None, call.login or "")
    issue.updated_at = utcnow()
    return Reply(200, pull_json(call, repo, issue, full=True))


def merge_pull(call: Call) -> Reply:
    """Merge with a merge commit after GitHub's checks: head sha (409), draft and conflicts
    (405), and any scripted policy refusal."""
    repo = call.repo("write")
    issue = repo.pull(call.number())
    pull = issue.pull
    assert pull is not None
    data = call.json()
    method = data.get("merge_method", "merge")
    if method not in ("merge", "squash", "rebase"):
        raise validation_failed("PullRequest", "merge_method", "invalid")
    if repo.merge_failures:
        status, message = repo.merge_failures.popleft()
        raise ApiError(status, message)
    if pull.merged or issue.state != "open":
        raise ApiError(405, "Pull Request is not mergeable")
    if method != "merge":
        raise ApiError(405, f"{method.capitalize()} merges are not allowed on this repository.")
    head = head_sha(call, repo, issue)
    expected = data.get("sha")
    if expected is not None and expected != head:
        raise ApiError(409, "Head branch was modified. Review and try the merge again.")
    if pull.draft:
        raise ApiError(405, "Pull Request is still a draft")
    title = data.get("commit_title") or (
        f"Merge pull request #{issue.number} from {repo.owner}/{pull.head_ref}"
    )
    message = f"{title}\n\n{data.get('commit_message') or issue.title}\n"
    git = call.backend.git
    try:
        sha = git.merge(repo.owner, repo.name, pull.base_ref, head, message)
    except SandboxError as exc:
        raise ApiError(405, "Pull Request is not mergeable") from exc
    call.world.record_merge(repo, issue, sha, call.login or "")
    repo.pushed_at = utcnow()
    if call.login != WORKFLOW_BOT_LOGIN:  # a workflow's token starts no workflow
        call.backend.ci.trigger(repo.owner, repo.name, sha, pull.base_ref)
    return Reply(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})


def check_merged(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.pull(call.number())
    if issue.pull is None or not issue.pull.merged:
        raise not_found()
    return Reply(204)


# -- GraphQL ------------------------------------------------------------------------------


def graphql(call: Call) -> Reply:
    """Serve exactly the draft mutations PyGithub's PullRequest sends and the adapter's query of
    an issue's edits; refuse anything else
    with a GraphQL error, as GitHub answers a query it cannot run."""
    data = call.json()
    query = data.get("query")
    variables = data.get("variables") or {}
    if is_issue_edits_query(query) and isinstance(variables, dict):
        return issue_edits(call, variables)
    found = _MUTATION.search(query) if isinstance(query, str) else None
    if found is None or not isinstance(variables, dict):
        return Reply(
            200,
            {
                "errors": [
                    {
                        "message": "The stand-in serves only the mutations "
                        + " and ".join(_GRAPHQL_MUTATIONS),
                    }
                ]
            },
        )
    mutation = found.group(1)
    raw_input = variables.get("input")
    payload: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    target = str(payload.get("pullRequestId", ""))
    for repo in call.world.repos.values():
        for issue in repo.issues.values():
            if issue.pull is not None and node_id("PR", issue.id) == target:
                return _set_draft(call, repo, issue, mutation, payload)
    return Reply(
        200,
        {
            "data": {mutation: None},
            "errors": [
                {
                    "type": "NOT_FOUND",
                    "path": [mutation],
                    "locations": [{"line": 1, "column": 1}],
                    "message": f"Could not resolve to a node with the global id of '{target}'.",
                }
            ],
        },
    )


def _set_draft(
    call: Call, repo: Repo, issue: Issue, mutation: str, payload: dict[str, Any]
) -> Reply:
    role = call.world.role(call.login, repo)
    if role is None:
        return Reply(
            200,
            {
                "data": {mutation: None},
                "errors": [
                    {
                        "type": "NOT_FOUND",
                        "path": [mutation],
                        "message": f"Could not resolve to a node with the global id of "
                        f"'{payload.get('pullRequestId')}'.",
                    }
                ],
            },
        )
    if call.login != issue.author and role not in ("write", "maintain", "admin"):
        return Reply(
            200,
            {
                "data": {mutation: None},
                "errors": [
                    {
                        "type": "FORBIDDEN",
                        "path": [mutation],
                        "message": (
                            f"{call.login} does not have permission to update this pull request."
                        ),
                    }
                ],
            },
        )
    pull = issue.pull
    assert pull is not None
    if issue.state == "open":
        pull.draft = mutation == "convertPullRequestToDraft"
    return Reply(
        200,
        {
            "data": {
                mutation: {
                    "clientMutationId": payload.get("clientMutationId"),
                    "pullRequest": {"isDraft": pull.draft},
                }
            }
        },
    )
