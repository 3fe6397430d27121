"""REST routes of the GitHub stand-in that list issues: a repository's, and an owner's across its
repositories: an organisation's (``GET /orgs/{org}/issues``) and the caller's own and member
repositories' (``GET /user/issues``), each issue with its ``repository``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.state import (
    ApiError,
    Issue,
    Repo,
    not_found,
    rank,
    validation_failed,
)


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    router.add("GET", "/repos/{owner}/{repo}/issues", list_issues)
    router.add("GET", "/orgs/{org}/issues", list_org_issues)
    router.add("GET", "/user/issues", list_user_issues)


def list_org_issues(call: Call) -> Reply:
    """The issues and pull requests of every repository of the organisation the caller may read,
    each with its ``repository``. ``filter``: ``all`` or ``repos`` (everything), ``created``
    (the caller's own); the stand-in assigns, mentions and subscribes nobody, so the others list
    nothing. A user's login is no organisation (404), and an installation token may not ask
    (403), as on GitHub."""
    login = _listing_caller(call)
    org = call.params["org"]
    with call.world.lock:
        if org.lower() in {login.lower() for login in call.world.users}:
            raise not_found()
        repos = [r for r in call.world.repos.values() if r.owner.lower() == org.lower()]
        return _owner_listing(call, login, repos)


def list_user_issues(call: Call) -> Reply:
    """The issues and pull requests of every repository the caller owns or is a member of (any
    role), each with its ``repository``; ``filter`` as for an organisation."""
    login = _listing_caller(call)
    with call.world.lock:
        return _owner_listing(call, login, list(call.world.repos.values()))


def _listing_caller(call: Call) -> str:
    login = call.login
    if login is None:
        raise ApiError(401, "Requires authentication")
    if login.endswith("[bot]"):
        raise ApiError(403, "Resource not accessible by integration")
    return login


def _owner_listing(call: Call, login: str, repos: list[Repo]) -> Reply:
    kind = call.query.get("filter", "assigned")
    if kind not in ("assigned", "created", "mentioned", "subscribed", "repos", "all"):
        raise validation_failed("Issue", "filter", "invalid")
    found: list[tuple[Repo, Issue]] = []
    if kind in ("all", "repos", "created"):
        creator = login if kind == "created" else None
        for repo in repos:
            if rank(call.world.role(login, repo)) >= rank("read"):
                found += [(repo, i) for i in matching_issues(call, repo.issues.values(), creator)]
    return call.page(
        [
            {**call.shapes.issue(repo, issue), "repository": call.shapes.repo(repo, login)}
            for repo, issue in sorted_issues(call, found)
        ]
    )


def list_issues(call: Call) -> Reply:
    """Issues and pull requests, newest first, filtered by ``state`` and ``labels``."""
    repo = call.repo()
    creator = call.query.get("creator")
    found = [(repo, issue) for issue in matching_issues(call, repo.issues.values(), creator)]
    return call.page([call.shapes.issue(repo, i) for repo, i in sorted_issues(call, found)])


def matching_issues(call: Call, issues: Iterable[Issue], creator: str | None) -> list[Issue]:
    """The ``issues`` in the asked ``state`` carrying every asked label (by ``creator``)."""
    state = call.query.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise validation_failed("Issue", "state", "invalid")
    wanted = {n.strip().lower() for n in call.query.get("labels", "").split(",") if n.strip()}
    since = _since(call.query.get("since"))
    return [
        issue
        for issue in issues
        if (state == "all" or issue.state == state)
        and wanted <= {lb.name.lower() for lb in issue.labels}
        and (creator is None or issue.author == creator)
        and (since is None or issue.updated_at >= since)
    ]


def _since(text: str | None) -> datetime | None:
    """GitHub's ``since`` (ISO 8601, ``YYYY-MM-DDTHH:MM:SSZ``); a 422 when it is not one."""
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise validation_failed("Issue", "since", "invalid") from None


def sorted_issues(call: Call, found: list[tuple[Repo, Issue]]) -> list[tuple[Repo, Issue]]:
    key = call.query.get("sort", "created")
    return sorted(
        found,
        key=lambda pair: (
            pair[1].updated_at if key == "updated" else pair[1].created_at,
            pair[1].id,
        ),
        reverse=call.query.get("direction", "desc") != "asc",
    )
