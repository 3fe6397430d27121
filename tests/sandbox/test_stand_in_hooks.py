"""Webhooks in the GitHub stand-in: a repository's and an organisation's hooks and the
deliveries recorded for each, in GitHub's shapes (the sandbox fixture holds every answer to
GitHub's OpenAPI description), shown only to whom GitHub shows them."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, TOKENS, Sandbox
from thirdshift.sandbox.github.state import Hook

BOT, BOT_TOKEN = "factory-app[bot]", "ghs_installation_0123456789"
SINCE = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _get(sandbox: Sandbox, path: str, token: str = TOKENS["ada"]) -> tuple[int, Any, str]:
    """(status, JSON body, Link header) of ``GET path`` with ``token``."""
    request = urllib.request.Request(sandbox.stand_in.api_url + path)
    request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), response.headers.get("Link", "")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), ""


def _daemon_hook(sandbox: Sandbox, name: str | None = NAME) -> Hook:
    return sandbox.stand_in.world.add_hook(
        OWNER,
        name,
        "https://hooks.example.com/webhook",
        events=("issues", "issue_comment"),
        secret="a-long-random-webhook-secret",
    )


def test_an_admin_lists_the_repository_s_hooks_with_the_secret_masked(sandbox: Sandbox) -> None:
    hook = _daemon_hook(sandbox)
    sandbox.stand_in.world.add_hook(OWNER, NAME, "http://ci.example.com/hook", content_type="form")
    sandbox.stand_in.world.record_delivery(hook, 502, delivered_at=SINCE)
    status, hooks, _ = _get(sandbox, f"/repos/{FULL_NAME}/hooks")
    assert status == 200
    assert [(h["config"]["url"], h["config"]["content_type"]) for h in hooks] == [
        ("https://hooks.example.com/webhook", "json"),
        ("http://ci.example.com/hook", "form"),
    ]
    first, second = hooks
    assert (first["id"], first["active"], first["events"]) == (
        hook.id,
        True,
        ["issues", "issue_comment"],
    )
    assert first["config"]["secret"] == "********"
    assert "secret" not in second["config"]
    assert first["last_response"] == {
        "code": 502,
        "status": "active",
        "message": "Invalid HTTP Response: 502",
    }
    assert second["last_response"]["status"] == "unused"
    assert first["deliveries_url"].endswith(f"/repos/{FULL_NAME}/hooks/{hook.id}/deliveries")


def test_a_hook_lists_its_deliveries_newest_first_a_page_at_a_time(sandbox: Sandbox) -> None:
    hook = _daemon_hook(sandbox)
    for minutes, code, event, action in [
        (0, 200, "ping", None),
        (5, 502, "issues", "labeled"),
        (9, 0, "issue_comment", "created"),
    ]:
        at = SINCE + timedelta(minutes=minutes)
        sandbox.stand_in.world.record_delivery(
            hook, code, event=event, action=action, delivered_at=at
        )
    path = f"/repos/{FULL_NAME}/hooks/{hook.id}/deliveries"
    status, page, link = _get(sandbox, f"{path}?per_page=2")
    assert status == 200
    assert [(d["event"], d["action"], d["status_code"], d["status"]) for d in page] == [
        ("issue_comment", "created", 0, "failed to connect to host"),
        ("issues", "labeled", 502, "Invalid HTTP Response: 502"),
    ]
    assert page[0]["delivered_at"] == "2026-03-02T12:09:00Z"
    following = link.removeprefix("<").partition(">")[0]
    assert 'rel="next"' in link
    status, rest, link = _get(sandbox, following.removeprefix(sandbox.stand_in.api_url))
    assert [(d["event"], d["status_code"]) for d in rest] == [("ping", 200)]
    assert link == ""
    _, failures, _ = _get(sandbox, f"{path}?status=failure")
    assert [d["status_code"] for d in failures] == [0, 502]


def test_someone_without_admin_gets_not_found_as_on_github(sandbox: Sandbox) -> None:
    _daemon_hook(sandbox)
    status, body, _ = _get(sandbox, f"/repos/{FULL_NAME}/hooks", TOKENS["wes"])
    assert (status, body["message"]) == (404, "Not Found")


def test_an_installation_token_is_refused_as_an_integration(sandbox: Sandbox) -> None:
    """The stand-in's Apps are granted no Webhooks permission: 403, as GitHub answers it."""
    hook = _daemon_hook(sandbox)
    sandbox.client.add_user(BOT, BOT_TOKEN, {FULL_NAME: "admin"})
    for path in (f"/repos/{FULL_NAME}/hooks", f"/repos/{FULL_NAME}/hooks/{hook.id}/deliveries"):
        status, body, _ = _get(sandbox, path, BOT_TOKEN)
        assert (status, body["message"]) == (403, "Resource not accessible by integration")


def test_an_organisation_s_hooks_are_listed_to_its_owners_only(sandbox: Sandbox) -> None:
    hook = _daemon_hook(sandbox, name=None)
    _daemon_hook(sandbox)  # the repository's own: not the organisation's
    sandbox.stand_in.world.add_organisation_owner(OWNER, "ada")
    sandbox.stand_in.world.record_delivery(hook, 200, event="ping", action=None)
    status, hooks, _ = _get(sandbox, f"/orgs/{OWNER}/hooks")
    assert status == 200
    assert [(h["id"], h["type"]) for h in hooks] == [(hook.id, "Organization")]
    assert hooks[0]["url"].endswith(f"/orgs/{OWNER}/hooks/{hook.id}")
    _, deliveries, _ = _get(sandbox, f"/orgs/{OWNER}/hooks/{hook.id}/deliveries")
    assert [(d["event"], d["action"], d["repository_id"]) for d in deliveries] == [
        ("ping", None, None)
    ]
    status, body, _ = _get(sandbox, f"/orgs/{OWNER}/hooks", TOKENS["wes"])
    assert (status, body["message"]) == (404, "Not Found")
    status, _, _ = _get(sandbox, f"/orgs/{urllib.parse.quote('nobody')}/hooks")
    assert status == 404
