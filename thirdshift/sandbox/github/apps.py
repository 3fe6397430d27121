"""REST routes of the GitHub stand-in for GitHub Apps: the App itself, its installation on a
repository, and installation tokens, each asked with a JSON Web Token the App signed.

The HTTP layer checks the token's signature against the App's public key (RS256), that it is
current and that it lasts at most ten minutes, as GitHub does, and hands the App in
``Call.app``; these handlers refuse calls without one.
"""

from __future__ import annotations

from typing import Any

from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.shapes import Json, node_id, stamp
from thirdshift.sandbox.github.state import ApiError, App, not_found

_PERMISSIONS = {
    "contents": "write",
    "issues": "write",
    "pull_requests": "write",
    "checks": "read",
    "statuses": "read",
    "actions": "write",
    "metadata": "read",
}


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    router.add("GET", "/app", get_app)
    router.add("GET", "/repos/{owner}/{repo}/installation", get_repo_installation)
    router.add("POST", "/app/installations/{id}/access_tokens", create_installation_token)


def _app(call: Call) -> App:
    if call.app is None:
        # GitHub answers so to a token that is not an App's JSON Web Token.
        raise ApiError(401, "A JSON web token could not be decoded")
    return call.app


def get_app(call: Call) -> Reply:
    return Reply(200, _app_json(call, _app(call)))


def get_repo_installation(call: Call) -> Reply:
    app = _app(call)
    owner, name = call.params["owner"], call.params["repo"]
    installation = app.installations.get(owner)
    if installation is None or (owner, name) not in call.world.repos:
        raise not_found()
    return Reply(200, _installation_json(call, app, owner, installation))


def create_installation_token(call: Call) -> Reply:
    app = _app(call)
    installation = call.number("id")
    if installation not in app.installations.values():
        raise not_found()
    token, expires = call.world.mint_installation_token(app, installation)
    body: dict[str, Any] = {
        "token": token,
        "expires_at": stamp(expires),
        "permissions": _PERMISSIONS,
        "repository_selection": "all",
    }
    return Reply(201, body)


def _app_json(call: Call, app: App) -> Json:
    web = call.shapes.urls.web
    owner = next(iter(app.installations), app.slug)
    return {
        "id": app.id,
        "slug": app.slug,
        "node_id": node_id("A", app.id),
        "client_id": f"Iv1.{app.id:016x}",
        "owner": call.shapes.user(owner),
        "name": app.slug,
        "description": None,
        "external_url": f"{web}/{app.slug}",
        "html_url": f"{web}/apps/{app.slug}",
        "created_at": stamp(app.created_at),
        "updated_at": stamp(app.created_at),
        "permissions": _PERMISSIONS,
        "events": ["issues", "pull_request"],
        "installations_count": len(app.installations),
    }


def _installation_json(call: Call, app: App, account: str, installation: int) -> Json:
    api, web = call.shapes.urls.api, call.shapes.urls.web
    return {
        "id": installation,
        "account": call.shapes.user(account),
        "repository_selection": "all",
        "access_tokens_url": f"{api}/app/installations/{installation}/access_tokens",
        "repositories_url": f"{api}/installation/repositories",
        "html_url": f"{web}/organizations/{account}/settings/installations/{installation}",
        "app_id": app.id,
        "app_slug": app.slug,
        "target_id": call.shapes.user(account)["id"],
        "target_type": "Organization",
        "permissions": _PERMISSIONS,
        "events": ["issues", "pull_request"],
        "created_at": stamp(app.created_at),
        "updated_at": stamp(app.created_at),
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": None,
        "suspended_at": None,
    }
