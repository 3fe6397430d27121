"""A Spec's Tickets are its own repository's issues: a sub-issue GitHub lists from another
repository is left out of them, and a blocker from another one says which (its number is that
repository's)."""

from __future__ import annotations

from thirdshift.github.convert import blocking_issues, own_sub_issues
from thirdshift.records import BlockingIssue

API = "https://api.github.com/repos"


def test_a_sub_issue_of_another_repository_is_no_ticket_whatever_its_number() -> None:
    listed = [
        {"number": 3, "repository_url": f"{API}/acme/widgets"},
        {"number": 4, "repository_url": f"{API}/acme/gadgets"},  # #4 here is another issue
        {"number": 5, "repository_url": f"{API}/Acme/Widgets"},  # GitHub ignores case
        {"number": 6, "repository_url": f"{API}/acme/widgets-fork"},
    ]

    assert own_sub_issues(listed, "acme", "widgets") == (3, 5)


def test_the_order_github_lists_them_in_is_kept() -> None:
    listed = [{"number": n, "repository_url": f"{API}/acme/widgets"} for n in (9, 2, 7)]

    assert own_sub_issues(listed, "acme", "widgets") == (9, 2, 7)


def test_a_blocker_of_another_repository_says_which_and_comes_after_this_ones() -> None:
    listed = [
        {"number": 4, "state": "open", "repository_url": f"{API}/acme/gadgets"},
        {"number": 9, "state": "closed", "repository_url": f"{API}/acme/widgets"},
        {"number": 2, "state": "open", "repository_url": f"{API}/Acme/Widgets"},
    ]

    assert blocking_issues(listed, "acme", "widgets") == (
        BlockingIssue(2, "open"),
        BlockingIssue(9, "closed"),
        BlockingIssue(4, "open", elsewhere="acme/gadgets"),
    )
