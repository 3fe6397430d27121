"""``GitHub.owner_issues`` against the real stand-in: one listing of an owner's issues across its
repositories (an organisation's, or the token's own user's), asked conditionally, and GitHub's
refusal for any other user (adr/0048). Every exchange is validated against GitHub's OpenAPI
description by the ``sandbox`` fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.contract.test_github_adapter import adapter
from tests.support.stand_in_scenario import FULL_NAME, OWNER, ROLES, TOKENS, Sandbox
from thirdshift.errors import GitHubError

READY = "ready-for-agent"
GADGETS = f"{OWNER}/gadgets"
NOTES = "wes/notes"


@pytest.fixture
def owners(sandbox: Sandbox, tmp_path: Path) -> Sandbox:
    """The scenario's organisation ``acme`` with a second repository, and a repository of
    wes's own; wes may write to all three."""
    source = tmp_path / "more"
    source.mkdir()
    (source / "README.md").write_text("# more\n")
    sandbox.client.add_repo(OWNER, "gadgets", source, {})
    sandbox.client.add_repo("wes", "notes", source, {})
    every = {FULL_NAME: "write", GADGETS: "write", NOTES: "admin"}
    sandbox.client.add_user("wes", TOKENS["wes"], every)
    sandbox.client.add_user("ada", TOKENS["ada"], {FULL_NAME: ROLES["ada"], GADGETS: "admin"})
    return sandbox


def test_an_organisations_labelled_issues_come_in_one_listing_across_its_repositories(
    owners: Sandbox,
) -> None:
    ada = owners.github("ada")
    widgets, gadgets = ada.get_repo(FULL_NAME), ada.get_repo(GADGETS)
    first = widgets.create_issue("Add a", labels=[READY])
    widgets.create_issue("Not yet")
    second = gadgets.create_issue("Add b", labels=[READY])
    gadgets.create_issue("Closed one", labels=[READY]).edit(state="closed")
    github, _seen = adapter(owners, "wes")

    listed = github.owner_issues(OWNER, label=READY, state="open")

    assert [(entry.repository, entry.issue.number) for entry in listed] == [
        (GADGETS, second.number),
        (FULL_NAME, first.number),
    ]
    assert all(entry.author == "ada" and not entry.issue.is_pull_request for entry in listed)


def test_asking_again_with_nothing_changed_costs_a_304_and_gives_the_same_answer(
    owners: Sandbox,
) -> None:
    owners.github("ada").get_repo(GADGETS).create_issue("Add b", labels=[READY])
    github, _seen = adapter(owners, "wes")
    first = github.owner_issues(OWNER, label=READY, state="open")
    before = github.request_counts()

    again = github.owner_issues(OWNER, label=READY, state="open")

    after = github.request_counts()
    assert again == first
    assert (after.sent - before.sent, after.not_modified - before.not_modified) == (1, 1)
    owners.github("ada").get_repo(FULL_NAME).create_issue("Add c", labels=[READY])
    assert len(github.owner_issues(OWNER, label=READY, state="open")) == 2


def test_the_tokens_own_login_is_listed_through_its_user_listing_narrowed_to_its_repositories(
    owners: Sandbox,
) -> None:
    wes = owners.github("wes")
    mine = wes.get_repo(NOTES).create_issue("Tidy", labels=[READY])
    wes.get_repo(FULL_NAME).create_issue("Elsewhere", labels=[READY])
    github, _seen = adapter(owners, "wes")

    listed = github.owner_issues("wes", label=READY, state="open")

    assert [(entry.repository, entry.issue.number) for entry in listed] == [(NOTES, mine.number)]


def test_created_lists_only_what_the_tokens_user_opened_with_each_pull_requests_draft(
    owners: Sandbox,
) -> None:
    owners.push("issue-1", {"a.py": "a = 1\n"})
    wes = owners.github("wes").get_repo(FULL_NAME)
    draft = wes.create_pull(title="Add a", body="", head="issue-1", base="main", draft=True)
    owners.github("ada").get_repo(FULL_NAME).create_issue("By someone else")
    github, _seen = adapter(owners, "wes")

    listed = github.owner_issues(OWNER, label=None, state="open", created=True)

    assert [(entry.issue.number, entry.issue.is_pull_request) for entry in listed] == [
        (draft.number, True)
    ]
    assert listed[0].draft
    assert listed[0].author == "wes"


def test_another_users_repositories_cannot_be_listed_at_once_github_answers_404(
    owners: Sandbox,
) -> None:
    github, _seen = adapter(owners, "ada")

    with pytest.raises(GitHubError) as refused:
        github.owner_issues("wes", label=READY, state="open")

    assert refused.value.status == 404
