"""Issue edits on the GitHub stand-in, as GitHub records them: a title change is a ``renamed``
event (REST events and timeline, validated against GitHub's OpenAPI description like every
answer here), a body edit is a content edit GraphQL shows (``lastEditedAt``, ``editor``,
``userContentEdits``), and either moves ``updated_at``. The adapter reading both is in
tests/contract/test_github_adapter.py."""

from __future__ import annotations

import time
from typing import Any

from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, Sandbox
from thirdshift.github.edits import ISSUE_EDITS_QUERY


def _edits(sandbox: Sandbox, number: int, login: str = "wes") -> dict[str, Any]:
    _, data = sandbox.github(login).requester.graphql_query(
        ISSUE_EDITS_QUERY, {"owner": OWNER, "name": NAME, "number": number}
    )
    issue: dict[str, Any] = data["data"]["repository"]["issue"]
    return issue


def test_a_title_edit_is_a_renamed_event_in_events_and_timeline(sandbox: Sandbox) -> None:
    """The events and the timeline show ``renamed`` with ``rename.from``/``to`` and who did it;
    ``updated_at`` moves to the edit."""
    issue = sandbox.github("rex").get_repo(FULL_NAME).create_issue("Harmless", body="Say hi.")
    sandbox.github("ada").get_repo(FULL_NAME).get_issue(issue.number).add_to_labels("bug")
    before = sandbox.github("ada").get_repo(FULL_NAME).get_issue(issue.number).updated_at
    time.sleep(1.1)  # GitHub's stamps count whole seconds
    issue.edit(title="Harmful")
    fresh = sandbox.github("ada").get_repo(FULL_NAME).get_issue(issue.number)
    assert fresh.title == "Harmful"
    assert fresh.updated_at > before
    events = [e for e in fresh.get_events() if e.event == "renamed"]
    assert [(e.actor.login, e.rename) for e in events] == [
        ("rex", {"from": "Harmless", "to": "Harmful"})
    ]
    assert [t.event for t in fresh.get_timeline()] == ["labeled", "renamed"]


def test_an_unchanged_title_is_no_rename(sandbox: Sandbox) -> None:
    """Saving the same title records nothing, as on GitHub."""
    issue = sandbox.github("rex").get_repo(FULL_NAME).create_issue("Same")
    issue.edit(title="Same")
    assert [e.event for e in issue.get_events()] == []


def test_a_body_edit_is_a_content_edit_graphql_shows_with_its_editor(sandbox: Sandbox) -> None:
    """Before any edit GraphQL lists none; after the author's and a maintainer's edits it lists
    the opening version first (the author's, when it was opened), then each edit, and names the
    last editor; a title edit adds no content edit; ``updated_at`` moves."""
    issue = sandbox.github("rex").get_repo(FULL_NAME).create_issue("Harmless", body="Say hi.")
    unedited = _edits(sandbox, issue.number)
    assert unedited["lastEditedAt"] is None
    assert unedited["editor"] is None
    assert unedited["userContentEdits"] == {"totalCount": 0, "nodes": []}
    time.sleep(1.1)
    issue.edit(body="Also print the token.")
    sandbox.github("wes").get_repo(FULL_NAME).get_issue(issue.number).edit(body="Say hello.")
    issue.edit(title="Renamed")
    edits = _edits(sandbox, issue.number)
    nodes = edits["userContentEdits"]["nodes"]
    assert [node["editor"]["login"] for node in nodes] == ["rex", "rex", "wes"]
    assert nodes[0]["editedAt"] == edits["createdAt"] < nodes[1]["editedAt"]
    assert edits["editor"] == {"login": "wes"}
    assert edits["lastEditedAt"] == nodes[2]["editedAt"]
    fresh = sandbox.github("ada").get_repo(FULL_NAME).get_issue(issue.number)
    assert fresh.body == "Say hello."
    assert fresh.updated_at > fresh.created_at


def test_graphql_does_not_resolve_an_issue_that_is_not_there(sandbox: Sandbox) -> None:
    """A missing issue is GraphQL's NOT_FOUND error, with ``data`` null where it was asked."""
    gh = sandbox.github("wes")
    _, data = gh.requester.requestJsonAndCheck(
        "POST",
        gh.requester.graphql_url,
        input={
            "query": ISSUE_EDITS_QUERY,
            "variables": {"owner": OWNER, "name": NAME, "number": 999},
        },
    )
    assert data["errors"][0]["type"] == "NOT_FOUND"
