"""REST routes of the GitHub stand-in for repositories, issues, labels, comments, issue events,
sub-issues, blocked-by dependencies and collaborator permissions."""

from __future__ import annotations

import json
from typing import Any

from thirdshift.github.edits import ISSUE_EDITS_QUERY
from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.shapes import stamp
from thirdshift.sandbox.github.state import (
    ApiError,
    Issue,
    Repo,
    not_found,
    rank,
    utcnow,
    validation_failed,
)

_REPO = "/repos/{owner}/{repo}"
_ISSUE = _REPO + "/issues/{number}"

LISTED_EVENTS = frozenset(
    {
        "labeled",
        "unlabeled",
        "renamed",
        "sub_issue_added",
        "sub_issue_removed",
        "parent_issue_added",
        "parent_issue_removed",
        "blocked_by_added",
        "blocked_by_removed",
        "blocking_added",
        "blocking_removed",
    }
)
"""Events ``GET .../issues/{n}/events`` returns; the timeline shows every event."""

TIMELINE_EVENTS = LISTED_EVENTS | {"closed", "reopened", "merged"}


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    add = router.add
    add("GET", "/user", get_user)
    add("GET", _REPO, get_repo)
    add("GET", _REPO + "/collaborators/{username}/permission", get_permission)
    add("GET", _REPO + "/labels", list_repo_labels)
    add("POST", _REPO + "/labels", create_label)
    add("GET", _REPO + "/labels/{name}", get_label)
    add("POST", _REPO + "/issues", create_issue)
    add("GET", _REPO + "/issues/comments/{id}", get_comment)
    add("PATCH", _REPO + "/issues/comments/{id}", edit_comment)
    add("DELETE", _REPO + "/issues/comments/{id}", delete_comment)
    add("GET", _ISSUE, get_issue)
    add("PATCH", _ISSUE, update_issue)
    add("GET", _ISSUE + "/labels", list_issue_labels)
    add("POST", _ISSUE + "/labels", add_labels)
    add("PUT", _ISSUE + "/labels", set_labels)
    add("DELETE", _ISSUE + "/labels", remove_all_labels)
    add("DELETE", _ISSUE + "/labels/{name}", remove_label)
    add("GET", _ISSUE + "/comments", list_comments)
    add("POST", _ISSUE + "/comments", create_comment)
    add("GET", _ISSUE + "/events", list_events)
    add("GET", _ISSUE + "/timeline", list_timeline)
    add("GET", _ISSUE + "/sub_issues", list_sub_issues)
    add("POST", _ISSUE + "/sub_issues", add_sub_issue)
    add("DELETE", _ISSUE + "/sub_issue", remove_sub_issue)
    add("GET", _ISSUE + "/parent", get_parent)
    add("GET", _ISSUE + "/dependencies/blocked_by", list_blocked_by)
    add("POST", _ISSUE + "/dependencies/blocked_by", add_blocked_by)
    add("DELETE", _ISSUE + "/dependencies/blocked_by/{issue_id}", remove_blocked_by)
    add("GET", _ISSUE + "/dependencies/blocking", list_blocking)


# -- helpers ------------------------------------------------------------------------------


def _string(data: dict[str, Any], key: str, resource: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise validation_failed(resource, key, "invalid")
    return value


def _label_names(data: dict[str, Any], key: str = "labels") -> list[str]:
    """Label names from ``labels`` (strings or ``{"name": ...}`` objects) or a bare list."""
    raw: Any = data.get(key, []) if isinstance(data, dict) else data
    names: list[str] = []
    for item in raw if isinstance(raw, list) else []:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name:
            raise validation_failed("Label", "name", "invalid")
        names.append(name)
    if not isinstance(raw, list):
        raise validation_failed("Label", key, "invalid")
    return names


def _issue_reply(call: Call, repo: Repo, issue: Issue, status: int = 200) -> Reply:
    return Reply(status, call.shapes.issue(repo, issue))


def _may_edit(call: Call, repo: Repo, author: str) -> bool:
    return call.login == author or rank(call.role(repo)) >= rank("triage")


def _labels_reply(call: Call, repo: Repo, issue: Issue) -> Reply:
    return Reply(200, [call.shapes.label(repo, lb) for lb in issue.labels])


def _issue_id(data: dict[str, Any], key: str, resource: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise validation_failed(resource, key, "missing_field" if value is None else "invalid")
    return value


# -- users, repositories, permissions -----------------------------------------------------


def get_user(call: Call) -> Reply:
    if call.login is None:
        raise ApiError(401, "Requires authentication")
    if call.login.endswith("[bot]"):
        # A GitHub App's (or a workflow's) token is an integration's: it has no user to show.
        raise ApiError(403, "Resource not accessible by integration")
    return Reply(200, call.shapes.private_user(call.login))


def get_repo(call: Call) -> Reply:
    repo = call.repo()
    return Reply(200, call.shapes.repo(repo, call.login, full=True))


def get_permission(call: Call) -> Reply:
    repo = call.repo("write")
    username = call.params["username"]
    if username not in call.world.users and username != repo.owner:
        raise not_found()
    if username.endswith("[bot]"):
        raise not_found()  # an integration is no collaborator
    return Reply(200, call.shapes.collaborator_permission(repo, username))


# -- labels -------------------------------------------------------------------------------


def list_repo_labels(call: Call) -> Reply:
    repo = call.repo()
    labels = sorted(repo.labels.values(), key=lambda lb: lb.name.lower())
    return call.page([call.shapes.label(repo, lb) for lb in labels])


def create_label(call: Call) -> Reply:
    repo = call.repo("write")
    data = call.json()
    name = _string(data, "name", "Label") or ""
    color = _string(data, "color", "Label") or "ededed"
    label = call.world.create_label(repo, name, color, _string(data, "description", "Label"))
    return Reply(201, call.shapes.label(repo, label))


def get_label(call: Call) -> Reply:
    repo = call.repo()
    label = repo.labels.get(call.params["name"].lower())
    if label is None:
        raise not_found()
    return Reply(200, call.shapes.label(repo, label))


# -- issues -------------------------------------------------------------------------------


def create_issue(call: Call) -> Reply:
    repo = call.repo()
    data = call.json()
    title = _string(data, "title", "Issue")
    if title is None and isinstance(data.get("title"), int):
        title = str(data["title"])
    issue = call.world.create_issue(repo, title or "", _string(data, "body", "Issue"), _login(call))
    names = _label_names(data)
    if names and rank(call.role(repo)) >= rank("triage"):
        call.world.add_labels(repo, issue, names, _login(call))
    return _issue_reply(call, repo, issue, 201)


def _login(call: Call) -> str:
    if call.login is None:
        raise ApiError(401, "Requires authentication")
    return call.login


def get_issue(call: Call) -> Reply:
    repo = call.repo()
    return _issue_reply(call, repo, repo.issue(call.number()))


def update_issue(call: Call) -> Reply:
    """Edit title, body, state (with ``state_reason``) and labels; authors may edit their own."""
    repo = call.repo()
    issue = repo.issue(call.number())
    if not _may_edit(call, repo, issue.author):
        raise ApiError(403, "Must have triage access to edit this issue.")
    data = call.json()
    actor = _login(call)
    title = body = None
    if "title" in data:
        title = _string(data, "title", "Issue")
        if not title:
            raise validation_failed("Issue", "title", "missing_field")
    if "body" in data:
        body = _string(data, "body", "Issue") or ""
    call.world.edit_text(repo, issue, actor, title, body)
    if "labels" in data:
        if rank(call.role(repo)) < rank("triage"):
            raise ApiError(403, "Must have triage access to label issues.")
        call.world.set_labels(repo, issue, _label_names(data), actor)
    state = _string(data, "state", "Issue")
    if state is not None:
        reason = _string(data, "state_reason", "Issue")
        if reason not in (None, "completed", "not_planned", "reopened", "duplicate"):
            raise validation_failed("Issue", "state_reason", "invalid")
        call.world.set_state(repo, issue, state, reason, actor)
    issue.updated_at = max(issue.updated_at, issue.closed_at or issue.updated_at)
    return _issue_reply(call, repo, issue)


# -- issue labels -------------------------------------------------------------------------


def list_issue_labels(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.issue(call.number())
    return call.page([call.shapes.label(repo, lb) for lb in issue.labels])


def add_labels(call: Call) -> Reply:
    repo = call.repo("triage")
    issue = repo.issue(call.number())
    call.world.add_labels(repo, issue, _label_names(_body_labels(call)), _login(call))
    return _labels_reply(call, repo, issue)


def set_labels(call: Call) -> Reply:
    repo = call.repo("triage")
    issue = repo.issue(call.number())
    call.world.set_labels(repo, issue, _label_names(_body_labels(call)), _login(call))
    return _labels_reply(call, repo, issue)


def remove_all_labels(call: Call) -> Reply:
    repo = call.repo("triage")
    issue = repo.issue(call.number())
    call.world.set_labels(repo, issue, [], _login(call))
    return Reply(204)


def remove_label(call: Call) -> Reply:
    repo = call.repo("triage")
    issue = repo.issue(call.number())
    call.world.remove_label(repo, issue, call.params["name"], _login(call))
    return _labels_reply(call, repo, issue)


def _body_labels(call: Call) -> dict[str, Any]:
    """The label payload: ``{"labels": [...]}``, or a bare JSON array as GitHub also takes."""
    try:
        raw = json.loads(call.body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, "Problems parsing JSON") from exc
    if isinstance(raw, list):
        return {"labels": raw}
    if not isinstance(raw, dict):
        raise ApiError(400, "Problems parsing JSON")
    return raw


# -- comments -----------------------------------------------------------------------------


def list_comments(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.issue(call.number())
    comments = [repo.comments[cid] for cid in issue.comment_ids]
    return call.page([call.shapes.comment(repo, c) for c in comments])


def create_comment(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.issue(call.number())
    body = _string(call.json(), "body", "IssueComment") or ""
    comment = call.world.add_comment(repo, issue, body, _login(call))
    return Reply(201, call.shapes.comment(repo, comment))


def get_comment(call: Call) -> Reply:
    repo = call.repo()
    return Reply(200, call.shapes.comment(repo, call.world.comment(repo, call.number("id"))))


def edit_comment(call: Call) -> Reply:
    repo = call.repo()
    comment = call.world.comment(repo, call.number("id"))
    if not _may_edit(call, repo, comment.author):
        raise ApiError(403, "Must have triage access to edit this comment.")
    body = _string(call.json(), "body", "IssueComment")
    if not body:
        raise validation_failed("IssueComment", "body", "missing_field")
    comment.body = body
    comment.updated_at = utcnow()
    return Reply(200, call.shapes.comment(repo, comment))


def delete_comment(call: Call) -> Reply:
    repo = call.repo()
    comment = call.world.comment(repo, call.number("id"))
    if not _may_edit(call, repo, comment.author):
        raise ApiError(403, "Must have triage access to delete this comment.")
    call.world.delete_comment(repo, comment.id)
    return Reply(204)


# -- events and timeline ------------------------------------------------------------------


def list_events(call: Call) -> Reply:
    repo = call.repo()
    number = repo.issue(call.number()).number
    events = [e for e in repo.events if e.issue_number == number and e.event in LISTED_EVENTS]
    return call.page([call.shapes.event(repo, e) for e in events])


def list_timeline(call: Call) -> Reply:
    """Events and comments of one issue, oldest first."""
    repo = call.repo()
    issue = repo.issue(call.number())
    entries: list[tuple[Any, int, dict[str, Any]]] = [
        (e.created_at, e.id, call.shapes.event(repo, e))
        for e in repo.events
        if e.issue_number == issue.number and e.event in TIMELINE_EVENTS
    ]
    entries += [
        (c.created_at, c.id, call.shapes.comment_event(repo, c))
        for c in (repo.comments[cid] for cid in issue.comment_ids)
    ]
    entries.sort(key=lambda entry: (entry[0], entry[1]))
    return call.page([entry[2] for entry in entries])


# -- sub-issues and dependencies ----------------------------------------------------------


def list_sub_issues(call: Call) -> Reply:
    repo = call.repo()
    parent = repo.issue(call.number())
    return call.page([call.shapes.issue(repo, i) for i in call.world.sub_issues(repo, parent)])


def add_sub_issue(call: Call) -> Reply:
    repo = call.repo("triage")
    parent = repo.issue(call.number())
    data = call.json()
    child_id = _issue_id(data, "sub_issue_id", "Issue")
    replace = data.get("replace_parent") is True
    child = call.world.add_sub_issue(repo, parent, child_id, replace, _login(call))
    return _issue_reply(call, repo, child, 201)


def remove_sub_issue(call: Call) -> Reply:
    repo = call.repo("triage")
    parent = repo.issue(call.number())
    child_id = _issue_id(call.json(), "sub_issue_id", "Issue")
    child = call.world.remove_sub_issue(repo, parent, child_id, _login(call))
    return _issue_reply(call, repo, child)


def get_parent(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.issue(call.number())
    parent = repo.issue_by_id(issue.parent_id) if issue.parent_id else None
    if parent is None:
        raise not_found()
    return _issue_reply(call, repo, parent)


def list_blocked_by(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.issue(call.number())
    return call.page([call.shapes.issue(repo, i) for i in call.world.blocked_by(repo, issue)])


def list_blocking(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.issue(call.number())
    return call.page([call.shapes.issue(repo, i) for i in call.world.blocking(repo, issue)])


def add_blocked_by(call: Call) -> Reply:
    repo = call.repo("triage")
    issue = repo.issue(call.number())
    blocker_id = _issue_id(call.json(), "issue_id", "IssueDependency")
    blocker = call.world.add_blocked_by(repo, issue, blocker_id, _login(call))
    return _issue_reply(call, repo, blocker, 201)


def remove_blocked_by(call: Call) -> Reply:
    repo = call.repo("triage")
    issue = repo.issue(call.number())
    blocker = call.world.remove_blocked_by(repo, issue, call.number("issue_id"), _login(call))
    return _issue_reply(call, repo, blocker)


# -- GraphQL: an issue's edits ------------------------------------------------------------


def _words(query: str) -> str:
    return " ".join(query.replace("{", " { ").replace("}", " } ").split())


def is_issue_edits_query(query: Any) -> bool:
    """Whether ``query`` is the one issue query the stand-in's GraphQL answers (the adapter's:
    GitHub answers any, the stand-in only what thirdshift sends)."""
    return isinstance(query, str) and _words(query) == _words(ISSUE_EDITS_QUERY)


def issue_edits(call: Call, variables: dict[str, Any]) -> Reply:
    """``Issue.lastEditedAt``, ``Issue.editor`` and ``Issue.userContentEdits`` as GitHub gives
    them: nothing until the body is first edited; then every version, the opening one (its
    author's, when it was opened) first. A title change is no content edit (it is a
    ``renamed`` event)."""
    owner, name = str(variables.get("owner", "")), str(variables.get("name", ""))
    number = variables.get("number")
    try:
        repo = call.world.visible_repo(call.login, owner, name)
    except ApiError:
        return _graphql_not_found(
            ["repository"], f"Could not resolve to a Repository with the name '{owner}/{name}'."
        )
    issue = repo.issues.get(number) if isinstance(number, int) else None
    if issue is None or issue.pull is not None:
        return _graphql_not_found(
            ["repository", "issue"],
            f"Could not resolve to an Issue with the number of {number}.",
        )
    edits = issue.content_edits[-100:]
    last = issue.content_edits[-1] if issue.content_edits else None
    return Reply(
        200,
        {
            "data": {
                "repository": {
                    "issue": {
                        "createdAt": stamp(issue.created_at),
                        "lastEditedAt": stamp(last.edited_at) if last else None,
                        "editor": {"login": last.editor} if last else None,
                        "userContentEdits": {
                            "totalCount": len(issue.content_edits),
                            "nodes": [
                                {"editedAt": stamp(e.edited_at), "editor": {"login": e.editor}}
                                for e in edits
                            ],
                        },
                    }
                }
            }
        },
    )


def _graphql_not_found(path: list[str], message: str) -> Reply:
    error = {"type": "NOT_FOUND", "path": path, "locations": [{"line": 2, "column": 3}]}
    return Reply(200, {"data": {path[0]: None}, "errors": [{**error, "message": message}]})
