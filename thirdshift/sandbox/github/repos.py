"""REST routes of the GitHub stand-in for the repositories themselves: the list of those the
caller may read, and archiving one."""

from __future__ import annotations

from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.state import ApiError, rank, validation_failed

_REPO = "/repos/{owner}/{repo}"


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    router.add("GET", "/user/repos", list_user_repos)
    router.add("PATCH", _REPO, update_repo)


def list_user_repos(call: Call) -> Reply:
    """Every repository the caller may read, by full name (GitHub's ``sort=full_name``);
    refused to an installation token, as GitHub refuses it."""
    login = call.login
    if login is None:
        raise ApiError(401, "Requires authentication")
    if login.endswith("[bot]"):
        raise ApiError(403, "Resource not accessible by integration")
    with call.world.lock:
        readable = [
            repo
            for repo in call.world.repos.values()
            if rank(call.world.role(login, repo)) >= rank("read")
        ]
    readable.sort(key=lambda repo: repo.full_name.lower())
    return call.page([call.shapes.repo(repo, login) for repo in readable])


def update_repo(call: Call) -> Reply:
    """Archive or unarchive the repository (the one setting the stand-in keeps); admins only."""
    repo = call.repo("admin")
    archived = call.json().get("archived")
    if archived is not None:
        if not isinstance(archived, bool):
            raise validation_failed("Repository", "archived", "invalid")
        repo.archived = archived
    return Reply(200, call.shapes.repo(repo, call.login, full=True))
