"""Pull request reviews and review comments on the GitHub stand-in, driven by PyGithub as the
scenario's users; every answer is checked against GitHub's OpenAPI description at teardown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from github import GithubException
from github.PullRequest import PullRequest

from tests.support.openapi import OpenAPIDescription
from tests.support.stand_in_scenario import FULL_NAME, Sandbox

CALC = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
BOT = "reviewer[bot]"
BOT_TOKEN = "reviewer-bot-token"


def _pull(sandbox: Sandbox, branch: str = "agent/calc") -> tuple[PullRequest, str]:
    """wes opens a pull request adding calc.py; returns it (as ada sees it) and its head."""
    sha = sandbox.push(branch, {"calc.py": CALC})
    sandbox.github("wes").get_repo(FULL_NAME).create_pull(
        title="Add calc", body="", head=branch, base="main"
    )
    pull = next(iter(sandbox.github("ada").get_repo(FULL_NAME).get_pulls(head=f"acme:{branch}")))
    return pull, sha


def _as(sandbox: Sandbox, login: str, number: int) -> PullRequest:
    return sandbox.github(login).get_repo(FULL_NAME).get_pull(number)


def test_requested_changes_list_their_line_comments_with_path_line_and_review(
    sandbox: Sandbox,
) -> None:
    """A maintainer requests changes with two line comments: the review is CHANGES_REQUESTED on
    the head, and both comments are listed on the pull and on the review, placed on the diff."""
    pull, sha = _pull(sandbox)
    review = pull.create_review(
        body="Two things.",
        event="REQUEST_CHANGES",
        comments=[
            {"path": "calc.py", "line": 2, "body": "Name the sum."},
            {"path": "calc.py", "line": 6, "body": "Check the order.", "side": "RIGHT"},
        ],
    )
    assert (review.state, review.body, review.commit_id, review.user.login) == (
        "CHANGES_REQUESTED",
        "Two things.",
        sha,
        "ada",
    )
    assert review.html_url.endswith(f"/pull/{pull.number}#pullrequestreview-{review.id}")
    comments = list(pull.get_review_comments())
    assert [(c.path, c.line, c.side, c.body) for c in comments] == [
        ("calc.py", 2, "RIGHT", "Name the sum."),
        ("calc.py", 6, "RIGHT", "Check the order."),
    ]
    assert {c.pull_request_review_id for c in comments} == {review.id}
    assert {(c.commit_id, c.original_commit_id) for c in comments} == {(sha, sha)}
    first = comments[0]
    assert first.diff_hunk.startswith("@@ -0,0 +1,6 @@")
    assert first.diff_hunk.endswith("+    return a + b")
    assert (first.position, first.original_line, first.user.login) == (2, 2, "ada")
    assert pull.get_review_comment(first.id).body == "Name the sum."
    newest_first = pull.get_review_comments(sort="created", direction="desc")
    assert [c.id for c in newest_first] == [c.id for c in reversed(comments)]
    later = first.created_at + timedelta(days=1)
    assert list(pull.get_review_comments(since=later)) == []
    by_review = pull.get_single_review_comments(review.id)
    assert [c.id for c in by_review] == [c.id for c in comments]
    assert [(r.id, r.state) for r in pull.get_reviews()] == [(review.id, "CHANGES_REQUESTED")]
    assert pull.get_review(review.id).body == "Two things."
    assert sandbox.github("ada").get_repo(FULL_NAME).get_pull(pull.number).review_comments == 2


def test_a_reader_may_comment_and_a_bot_review_is_a_bots(sandbox: Sandbox) -> None:
    """Read permission is enough to review; a ``[bot]`` login's review has a Bot user."""
    pull, _ = _pull(sandbox)
    read = _as(sandbox, "rex", pull.number).create_review(body="Looks fine.", event="COMMENT")
    assert (read.state, read.user.login, read.user.type) == ("COMMENTED", "rex", "User")
    sandbox.client.add_user(BOT, BOT_TOKEN, {FULL_NAME: "write"})
    bot_pull = sandbox.github(token=BOT_TOKEN).get_repo(FULL_NAME).get_pull(pull.number)
    approved = bot_pull.create_review(event="APPROVE")
    assert (approved.state, approved.body, approved.user.type) == ("APPROVED", "", "Bot")
    assert [(r.user.login, r.user.type) for r in pull.get_reviews()] == [
        ("rex", "User"),
        (BOT, "Bot"),
    ]


def test_the_author_may_only_comment_on_their_own_pull_request(sandbox: Sandbox) -> None:
    """GitHub refuses its author's approval or requested changes with 422, not a comment."""
    pull, _ = _pull(sandbox)
    own = _as(sandbox, "wes", pull.number)
    for event, refusal in (
        ("REQUEST_CHANGES", "Can not request changes on your own pull request"),
        ("APPROVE", "Can not approve your own pull request"),
    ):
        with pytest.raises(GithubException) as caught:
            own.create_review(body="Hmm.", event=event)
        assert caught.value.status == 422
        assert refusal in caught.value.data["errors"][0]
    assert own.create_review(body="Note to self.", event="COMMENT").state == "COMMENTED"
    assert [r.state for r in pull.get_reviews()] == ["COMMENTED"]


def test_reviews_without_a_word_or_off_the_diff_are_refused(sandbox: Sandbox) -> None:
    """REQUEST_CHANGES and COMMENT need a body or comments; a comment must be on the diff;
    no pending review is kept. Nothing is recorded by a refusal."""
    pull, _ = _pull(sandbox)
    for kwargs in (
        {"event": "REQUEST_CHANGES"},
        {"event": "COMMENT", "body": ""},
        {"event": "COMMENT", "comments": [{"path": "calc.py", "line": 40, "body": "?"}]},
        {"event": "COMMENT", "comments": [{"path": "README.md", "line": 1, "body": "?"}]},
        {"body": "pending"},
    ):
        with pytest.raises(GithubException) as caught:
            pull.create_review(**kwargs)
        assert caught.value.status == 422, kwargs
    assert list(pull.get_reviews()) == []
    assert list(pull.get_review_comments()) == []


def test_a_reply_lands_in_the_thread_and_a_lone_comment_gets_a_review(sandbox: Sandbox) -> None:
    """A reply (to the thread or to a reply) names the thread's first comment and keeps its
    place; a single comment outside a review is wrapped in a COMMENTED review, as on GitHub."""
    pull, sha = _pull(sandbox)
    review = pull.create_review(
        body="", event="COMMENT", comments=[{"path": "calc.py", "line": 5, "body": "Why?"}]
    )
    root = next(iter(pull.get_review_comments()))
    authors = _as(sandbox, "wes", pull.number)
    reply = authors.create_review_comment_reply(root.id, "Symmetry.")
    assert (reply.in_reply_to_id, reply.path, reply.line, reply.diff_hunk) == (
        root.id,
        "calc.py",
        5,
        root.diff_hunk,
    )
    again = pull.create_review_comment_reply(reply.id, "Fair.")
    assert again.in_reply_to_id == root.id
    lone = authors.create_review_comment("Typo?", sha, "calc.py", line=1)
    assert (lone.line, lone.side, lone.commit_id) == (1, "RIGHT", sha)
    comments = list(pull.get_review_comments())
    assert [(c.user.login, c.body) for c in comments] == [
        ("ada", "Why?"),
        ("wes", "Symmetry."),
        ("ada", "Fair."),
        ("wes", "Typo?"),
    ]
    reviews = list(pull.get_reviews())
    assert reviews[0].id == review.id
    assert [r.state for r in reviews] == ["COMMENTED"] * 4
    assert {c.pull_request_review_id for c in comments} == {r.id for r in reviews}
    with pytest.raises(GithubException) as caught:
        pull.create_review_comment("Off.", sha, "calc.py", line=99)
    assert caught.value.status == 422
    assert caught.value.data["errors"][0]["field"] == "pull_request_review_thread.line"


def test_the_review_list_answers_304_until_a_review_arrives(sandbox: Sandbox) -> None:
    """A conditional GET of the reviews is a 304 while nothing changes; a new review changes
    the list and its ETag."""
    pull, _ = _pull(sandbox)
    pull.create_review(body="First.", event="COMMENT")
    requester = sandbox.github("ada").requester
    url = f"{pull.url}/reviews"
    status, headers, _ = requester.requestJson("GET", url)
    assert status == 200
    etag = headers["etag"]
    status, _, body = requester.requestJson("GET", url, headers={"If-None-Match": etag})
    assert (status, body) == (304, "")
    comments = f"{pull.url}/comments"
    _, comment_headers, _ = requester.requestJson("GET", comments)
    pull.create_review(body="Second.", event="APPROVE")
    status, later, _ = requester.requestJson("GET", url, headers={"If-None-Match": etag})
    assert status == 200
    assert later["etag"] != etag
    status, _, _ = requester.requestJson(
        "GET", comments, headers={"If-None-Match": comment_headers["etag"]}
    )
    assert status == 304  # an approval without comments adds no review comment


def test_issue_comments_on_a_pull_request_stay_apart_from_review_comments(
    sandbox: Sandbox,
) -> None:
    """A pull request is an issue: its conversation comments come from the issue side and
    review comments do not mix in."""
    pull, _ = _pull(sandbox)
    pull.create_issue_comment("Thanks!")
    pull.create_review(
        body="", event="COMMENT", comments=[{"path": "calc.py", "line": 1, "body": "Nice."}]
    )
    assert [c.body for c in pull.get_issue_comments()] == ["Thanks!"]
    assert [c.body for c in pull.get_review_comments()] == ["Nice."]
    issue = sandbox.github("rex").get_repo(FULL_NAME).get_issue(pull.number)
    assert issue.comments == 1


def test_review_routes_are_checked_against_the_description(
    sandbox: Sandbox, description: OpenAPIDescription
) -> None:
    """Each review operation answered here is one the OpenAPI description defines, so the
    teardown validates its body instead of passing it by."""
    pull, sha = _pull(sandbox)
    pull.create_review(
        body="", event="COMMENT", comments=[{"path": "calc.py", "line": 1, "body": "a"}]
    )
    review = next(iter(pull.get_reviews()))
    root = next(iter(pull.get_review_comments()))
    pull.get_review(review.id)
    list(pull.get_single_review_comments(review.id))
    pull.get_review_comment(root.id)
    pull.create_review_comment_reply(root.id, "b")
    pull.create_review_comment("c", sha, "calc.py", line=2)
    seen = {
        description.match(e.method, e.path.removeprefix("/api/v3")).operation_id
        for e in sandbox.exchanges
        if "/pulls/" in e.path and e.status < 300
    }
    assert {
        "pulls/create-review",
        "pulls/list-reviews",
        "pulls/get-review",
        "pulls/list-comments-for-review",
        "pulls/list-review-comments",
        "pulls/get-review-comment",
        "pulls/create-reply-for-review-comment",
        "pulls/create-review-comment",
    } <= seen
