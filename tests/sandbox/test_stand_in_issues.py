"""Issues, labels, comments, events, sub-issues and dependencies on the GitHub stand-in."""

from __future__ import annotations

import pytest
from github import GithubException

from tests.support.stand_in_scenario import FULL_NAME, Sandbox


def test_a_missing_title_is_a_validation_error_with_errors(sandbox: Sandbox) -> None:
    """422 ``Validation Failed`` names the resource, field and code, as GitHub does."""
    gh = sandbox.github()
    with pytest.raises(GithubException) as caught:
        gh.requester.requestJsonAndCheck(
            "POST", f"{gh.get_repo(FULL_NAME).url}/issues", input={"body": "no title"}
        )
    assert caught.value.status == 422
    assert caught.value.data["message"] == "Validation Failed"
    assert caught.value.data["errors"] == [
        {"resource": "Issue", "field": "title", "code": "missing_field"}
    ]


def test_the_timeline_tells_labels_comments_and_closing_in_order(sandbox: Sandbox) -> None:
    """Timeline entries carry actor and time: labeled, commented, closed, reopened."""
    repo = sandbox.github("tia").get_repo(FULL_NAME)
    issue = repo.create_issue("Flaky test")
    issue.add_to_labels("bug")
    issue.create_comment("Looking")
    issue.edit(state="closed", state_reason="not_planned")
    issue.edit(state="open")
    timeline = list(issue.get_timeline())
    assert [t.event for t in timeline] == ["labeled", "commented", "closed", "reopened"]
    assert {t.actor.login for t in timeline} == {"tia"}
    assert all(t.created_at.tzinfo is not None for t in timeline)


def test_issue_filters_by_state_and_every_listed_label(sandbox: Sandbox) -> None:
    """``labels`` means all of them; ``state`` picks open, closed or all."""
    repo = sandbox.github().get_repo(FULL_NAME)
    both = repo.create_issue("Both", labels=["bug", "enhancement"])
    repo.create_issue("Bug only", labels=["bug"])
    closed = repo.create_issue("Closed bug", labels=["bug", "enhancement"])
    closed.edit(state="closed")
    assert [i.number for i in repo.get_issues(labels=["bug", "enhancement"])] == [both.number]
    assert [i.number for i in repo.get_issues(state="closed", labels=["bug"])] == [closed.number]
    assert len(list(repo.get_issues(state="all", labels=["bug"]))) == 3


def test_removing_a_label_that_is_not_applied_is_not_found(sandbox: Sandbox) -> None:
    """404 ``Label does not exist`` for a label the issue does not carry."""
    issue = sandbox.github().get_repo(FULL_NAME).create_issue("Unlabelled")
    with pytest.raises(GithubException) as caught:
        issue.remove_from_labels("bug")
    assert (caught.value.status, caught.value.data["message"]) == (404, "Label does not exist")


def test_labels_can_all_be_removed_and_comments_deleted(sandbox: Sandbox) -> None:
    """``DELETE .../labels`` clears them; a deleted comment is gone from the list."""
    issue = sandbox.github().get_repo(FULL_NAME).create_issue("Tidy", labels=["bug"])
    issue.delete_labels()
    assert list(issue.get_labels()) == []
    comment = issue.create_comment("temporary")
    comment.delete()
    assert list(issue.get_comments()) == []


def test_an_issue_has_one_parent_unless_replaced(sandbox: Sandbox) -> None:
    """Adding a parented sub-issue elsewhere is 422; ``replace_parent`` moves it."""
    gh = sandbox.github()
    repo = gh.get_repo(FULL_NAME)
    first, second, child = (repo.create_issue(t) for t in ("Epic 1", "Epic 2", "Task"))
    first.add_sub_issue(child)
    with pytest.raises(GithubException) as caught:
        second.add_sub_issue(child)
    assert caught.value.status == 422
    gh.requester.requestJsonAndCheck(
        "POST", f"{second.url}/sub_issues", input={"sub_issue_id": child.id, "replace_parent": True}
    )
    assert [i.number for i in second.get_sub_issues()] == [child.number]
    assert list(first.get_sub_issues()) == []
    assert repo.get_issue(second.number).raw_data["sub_issues_summary"]["total"] == 1


def test_sub_issues_are_listed_in_the_order_they_were_added_page_by_page(
    sandbox: Sandbox,
) -> None:
    """Not by number: the order of adding, and one removed and added again comes last; the
    list is paged with GitHub's ``Link`` header."""
    gh = sandbox.github()
    repo = gh.get_repo(FULL_NAME)
    spec = repo.create_issue("Spec")
    first, second, third = (repo.create_issue(t) for t in ("One", "Two", "Three"))
    for child in (third, first, second):
        spec.add_sub_issue(child)
    assert [i.number for i in spec.get_sub_issues()] == [n.number for n in (third, first, second)]
    spec.remove_sub_issue(first)
    spec.add_sub_issue(first)
    order = [n.number for n in (third, second, first)]
    assert [i.number for i in spec.get_sub_issues()] == order
    pages: list[tuple[list[int], bool]] = []
    for page in (1, 2):
        headers, found = gh.requester.requestJsonAndCheck(
            "GET", f"{spec.url}/sub_issues", parameters={"per_page": 2, "page": page}
        )
        pages.append(([i["number"] for i in found], 'rel="next"' in headers.get("link", "")))
    assert pages == [(order[:2], True), (order[2:], False)]


def test_dependencies_are_summarised_on_the_blocked_issue(sandbox: Sandbox) -> None:
    """``issue_dependencies_summary`` counts open blockers and drops closed ones."""
    gh = sandbox.github()
    repo = gh.get_repo(FULL_NAME)
    blocked, blocker = repo.create_issue("Blocked"), repo.create_issue("Blocker")
    gh.requester.requestJsonAndCheck(
        "POST", f"{blocked.url}/dependencies/blocked_by", input={"issue_id": blocker.id}
    )
    summary = repo.get_issue(blocked.number).raw_data["issue_dependencies_summary"]
    assert (summary["blocked_by"], summary["total_blocked_by"]) == (1, 1)
    blocker.edit(state="closed")
    summary = repo.get_issue(blocked.number).raw_data["issue_dependencies_summary"]
    assert (summary["blocked_by"], summary["total_blocked_by"]) == (0, 1)
