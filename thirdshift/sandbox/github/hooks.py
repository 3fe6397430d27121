"""REST routes of the GitHub stand-in for webhooks: a repository's and an organisation's hooks,
and the deliveries GitHub recorded for each, as ``thirdshift doctor`` reads them.

Only reading: a scenario makes hooks and records their deliveries on the world
(``World.add_hook``, ``World.record_delivery``). As on GitHub, a repository's hooks are shown to
its admins and an organisation's to its owners; anyone else gets 404, and an installation token
403 ``Resource not accessible by integration`` (the stand-in's Apps are granted no Webhooks
permission).
"""

from __future__ import annotations

import urllib.parse

from thirdshift.sandbox.github.api import DEFAULT_PER_PAGE, MAX_PER_PAGE, Call, Reply, Router
from thirdshift.sandbox.github.shapes import Json, stamp
from thirdshift.sandbox.github.state import ApiError, Hook, RecordedDelivery, not_found, rank

_REPO_HOOKS = "/repos/{owner}/{repo}/hooks"
_ORG_HOOKS = "/orgs/{org}/hooks"
_NOT_FOR_INTEGRATIONS = "Resource not accessible by integration"


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    router.add("GET", _REPO_HOOKS, list_repo_hooks)
    router.add("GET", _REPO_HOOKS + "/{hook_id}/deliveries", list_repo_hook_deliveries)
    router.add("GET", _ORG_HOOKS, list_org_hooks)
    router.add("GET", _ORG_HOOKS + "/{hook_id}/deliveries", list_org_hook_deliveries)


def list_repo_hooks(call: Call) -> Reply:
    owner, name = _repository(call)
    return call.page([_hook_json(call, hook) for hook in _hooks(call, owner, name)])


def list_repo_hook_deliveries(call: Call) -> Reply:
    owner, name = _repository(call)
    return _deliveries(call, _hook(call, owner, name))


def list_org_hooks(call: Call) -> Reply:
    organisation = _organisation(call)
    return call.page([_hook_json(call, hook) for hook in _hooks(call, organisation, None)])


def list_org_hook_deliveries(call: Call) -> Reply:
    return _deliveries(call, _hook(call, _organisation(call), None))


def _repository(call: Call) -> tuple[str, str]:
    """The repository named by the path, when the caller may read its hooks: an admin."""
    repo = call.world.visible_repo(call.login, call.params["owner"], call.params["repo"])
    _no_integration(call)
    if rank(call.role(repo)) < rank("admin"):
        raise not_found()
    return repo.owner, repo.name


def _organisation(call: Call) -> str:
    """The organisation named by the path, when the caller is one of its owners."""
    if call.login is None:
        raise ApiError(401, "Requires authentication")
    _no_integration(call)
    organisation = call.params["org"]
    if call.login not in call.world.organisation_owners.get(organisation.lower(), set()):
        raise not_found()
    return organisation


def _no_integration(call: Call) -> None:
    if call.login is not None and call.login.endswith("[bot]"):
        raise ApiError(403, _NOT_FOR_INTEGRATIONS)


def _hooks(call: Call, owner: str, name: str | None) -> list[Hook]:
    """The hooks of ``owner/name`` (``name`` None: of the organisation), oldest first."""
    found = call.world.hooks.values()
    return [h for h in found if h.owner.lower() == owner.lower() and h.name == name]


def _hook(call: Call, owner: str, name: str | None) -> Hook:
    wanted = call.number("hook_id")
    found = next((hook for hook in _hooks(call, owner, name) if hook.id == wanted), None)
    if found is None:
        raise not_found()
    return found


def _deliveries(call: Call, hook: Hook) -> Reply:
    """The hook's deliveries, newest first, a page at a time behind GitHub's ``cursor``
    (here: the id of the last delivery of the page before); ``status`` keeps only
    ``success`` or ``failure`` ones."""
    newest = sorted(hook.deliveries, key=lambda d: (d.delivered_at, d.id), reverse=True)
    wanted = call.query.get("status")
    if wanted in ("success", "failure"):
        newest = [d for d in newest if (200 <= d.status_code < 300) == (wanted == "success")]
    cursor = call.query.get("cursor")
    if cursor:
        ids = [str(d.id) for d in newest]
        if cursor not in ids:
            raise ApiError(400, "Bad request")
        newest = newest[ids.index(cursor) + 1 :]
    per_page = min(max(call.int_query("per_page", DEFAULT_PER_PAGE), 1), MAX_PER_PAGE)
    page = newest[:per_page]
    headers = {}
    if len(newest) > per_page:
        query = {k: v for k, v in call.query.items() if k != "cursor"}
        query["cursor"] = str(page[-1].id)
        following = f"{call.shapes.urls.api}{call.path}?{urllib.parse.urlencode(query)}"
        headers["Link"] = f'<{following}>; rel="next"'
    repository_id = _repository_id(call, hook)
    return Reply(200, [_delivery_json(d, repository_id) for d in page], headers)


def _repository_id(call: Call, hook: Hook) -> int | None:
    repo = call.world.repos.get((hook.owner, hook.name)) if hook.name is not None else None
    return repo.id if repo is not None else None


def _hook_json(call: Call, hook: Hook) -> Json:
    """A ``hook`` (a repository's) or an ``org-hook``, its secret shown as GitHub shows it."""
    api = call.shapes.urls.api
    where = f"repos/{hook.owner}/{hook.name}" if hook.name is not None else f"orgs/{hook.owner}"
    url = f"{api}/{where}/hooks/{hook.id}"
    config: Json = {"content_type": hook.content_type, "insecure_ssl": "0", "url": hook.url}
    if hook.secret:
        config["secret"] = "********"  # noqa: S105 (GitHub's mask, not a secret)
    body: Json = {
        "type": "Repository" if hook.name is not None else "Organization",
        "id": hook.id,
        "name": "web",
        "active": hook.active,
        "events": list(hook.events),
        "config": config,
        "updated_at": stamp(hook.created_at),
        "created_at": stamp(hook.created_at),
        "url": url,
        "ping_url": f"{url}/pings",
        "deliveries_url": f"{url}/deliveries",
    }
    if hook.name is not None:
        last = max(hook.deliveries, key=lambda d: (d.delivered_at, d.id), default=None)
        body["test_url"] = f"{url}/test"
        body["last_response"] = (
            {"code": last.status_code, "status": "active", "message": last.status}
            if last is not None
            else {"code": None, "status": "unused", "message": None}
        )
    return body


def _delivery_json(delivery: RecordedDelivery, repository_id: int | None) -> Json:
    """A ``hook-delivery-item``."""
    return {
        "id": delivery.id,
        "guid": delivery.guid,
        "delivered_at": stamp(delivery.delivered_at),
        "redelivery": delivery.redelivery,
        "duration": delivery.duration,
        "status": delivery.status,
        "status_code": delivery.status_code,
        "event": delivery.event,
        "action": delivery.action,
        "installation_id": None,
        "repository_id": repository_id,
        "throttled_at": None,
    }
