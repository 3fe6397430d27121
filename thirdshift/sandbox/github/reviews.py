"""REST routes of the GitHub stand-in for pull request reviews and review comments: submit a
review with its line comments at once, list and read reviews and comments, reply in a thread,
and comment on one line outside a review (GitHub wraps it in a COMMENTED review).

A line comment is placed on the pull request's real diff (``git diff base...commit``): its
``position``, ``diff_hunk`` and line numbers come from there, and a line outside the diff is
refused as GitHub refuses it. Reviews are submitted at once: the stand-in keeps no pending
reviews.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from thirdshift.sandbox.github.api import Call, Reply, Router
from thirdshift.sandbox.github.pulls import git_output, head_sha
from thirdshift.sandbox.github.state import (
    ApiError,
    DraftComment,
    Issue,
    PullReviewComment,
    Repo,
    not_found,
    unprocessable,
    validation_failed,
)

_PULL = "/repos/{owner}/{repo}/pulls/{number}"
_EVENTS = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_RESOURCE = "PullRequestReviewComment"
_LINE_OUTSIDE = "pull_request_review_thread.line must be part of the diff"
_PATH_UNKNOWN = "Path could not be resolved"


def register(router: Router) -> None:
    """Add this module's routes to ``router``."""
    add = router.add
    add("GET", "/repos/{owner}/{repo}/pulls/comments/{id}", get_review_comment)
    add("GET", _PULL + "/reviews", list_reviews)
    add("POST", _PULL + "/reviews", create_review)
    add("GET", _PULL + "/reviews/{review_id}", get_review)
    add("GET", _PULL + "/reviews/{review_id}/comments", list_comments_for_review)
    add("GET", _PULL + "/comments", list_review_comments)
    add("POST", _PULL + "/comments", create_review_comment)
    add("POST", _PULL + "/comments/{id}/replies", create_reply)


# -- placing a comment on the diff --------------------------------------------------------


@dataclass(frozen=True)
class _Spot:
    """One line of a file's diff: its ``position`` and its number on each side it is on."""

    position: int
    old: int | None
    new: int | None
    hunk: str  # from the hunk's header down to this line


def _spots(diff: str) -> list[_Spot]:
    """Every commentable line of one file's unified diff. Positions count from the line below
    the first hunk header (1), and each later hunk header takes a position too, as GitHub
    counts them."""
    spots: list[_Spot] = []
    hunk: list[str] = []
    position = old = new = 0
    started = False
    for raw in diff.splitlines():
        found = _HUNK.match(raw)
        if found:
            if started:
                position += 1
            started = True
            old, new = int(found.group(1)), int(found.group(2))
            hunk = [raw]
            continue
        if not started:
            continue  # the file's header
        position += 1
        hunk.append(raw)
        text = "\n".join(hunk)
        if raw.startswith("+"):
            spots.append(_Spot(position, None, new, text))
            new += 1
        elif raw.startswith("-"):
            spots.append(_Spot(position, old, None, text))
            old += 1
        elif raw.startswith(" ") or raw == "":
            spots.append(_Spot(position, old, new, text))
            old += 1
            new += 1
    return spots


class _Diff:
    """The pull request's diff at one commit, read file by file as comments need it."""

    def __init__(self, call: Call, repo: Repo, issue: Issue, commit: str) -> None:
        assert issue.pull is not None
        self._call, self._repo = call, repo
        self._range = f"{issue.pull.base_ref}...{commit}"
        self._files: dict[str, list[_Spot]] = {}

    def spots(self, path: str) -> list[_Spot]:
        if path not in self._files:
            args = ("diff", "--no-color", "--no-ext-diff", self._range, "--", path)
            text = git_output(self._call, self._repo, *args)
            self._files[path] = _spots(text)
        return self._files[path]


def _place(diff: _Diff, raw: Any, body: str, fail: Any) -> DraftComment:
    """A comment placed by ``line`` (and ``side``) or by ``position``; ``fail(field, message)``
    builds the refusal GitHub gives on the route at hand."""
    if not isinstance(raw, dict):
        raise fail("comments", "Comments must be objects")
    path = raw.get("path")
    if not isinstance(path, str) or not path:
        raise fail("path", "Path can't be blank")
    if raw.get("start_line") is not None or raw.get("subject_type") == "file":
        raise fail("start_line", "The stand-in places comments on one line only")
    spots = diff.spots(path)
    if not spots:
        raise fail("path", _PATH_UNKNOWN)
    side = raw.get("side", "RIGHT")
    line, position = raw.get("line"), raw.get("position")
    if side not in ("LEFT", "RIGHT"):
        raise fail("side", "Side must be LEFT or RIGHT")
    spot: _Spot | None = None
    if isinstance(line, int) and not isinstance(line, bool):
        spot = next((s for s in spots if (s.new if side == "RIGHT" else s.old) == line), None)
    elif isinstance(position, int) and not isinstance(position, bool):
        spot = next((s for s in spots if s.position == position), None)
        if spot is not None:
            side = "RIGHT" if spot.new is not None else "LEFT"
    if spot is None:
        raise fail("pull_request_review_thread.line", _LINE_OUTSIDE)
    number = spot.new if side == "RIGHT" else spot.old
    assert number is not None
    return DraftComment(path, number, side, spot.position, spot.hunk, body)


def _commit(call: Call, repo: Repo, issue: Issue, given: Any) -> str | None:
    """The commit a review is on: the head by default, else one of the pull's commits (None
    when ``given`` is none of them)."""
    head = head_sha(call, repo, issue)
    if given is None or given == head:
        return head
    assert issue.pull is not None
    commits = git_output(call, repo, "rev-list", f"{issue.pull.base_ref}..{head}").split()
    return given if isinstance(given, str) and given in commits else None


def _login(call: Call) -> str:
    if call.login is None:
        raise ApiError(401, "Requires authentication")
    return call.login


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


# -- reviews ------------------------------------------------------------------------------


def list_reviews(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.pull(call.number())
    return call.page([call.shapes.review(repo, r) for r in call.world.reviews(repo, issue)])


def get_review(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.pull(call.number())
    review = call.world.review(repo, issue, call.number("review_id"))
    return Reply(200, call.shapes.review(repo, review))


def create_review(call: Call) -> Reply:
    """Submit a review and its comments at once. Anyone who may read the repository may
    review; its author may only comment. Without ``event`` GitHub would keep a pending review:
    the stand-in refuses that instead."""
    repo = call.repo()
    issue = repo.pull(call.number())
    author = _login(call)
    data = call.json()
    event = data.get("event")
    if event is None or event == "PENDING":
        raise unprocessable("The stand-in keeps no pending reviews: give event")
    state = _EVENTS.get(event) if isinstance(event, str) else None
    if state is None:
        raise unprocessable(f"Unknown event {event!r}: use APPROVE, REQUEST_CHANGES or COMMENT")
    if author == issue.author and state == "APPROVED":
        raise unprocessable("Review Can not approve your own pull request")
    if author == issue.author and state == "CHANGES_REQUESTED":
        raise unprocessable("Review Can not request changes on your own pull request")
    body = _text(data, "body")
    raw_comments = data.get("comments") or []
    if not isinstance(raw_comments, list):
        raise unprocessable("Comments must be a list")
    if not body and not raw_comments and state == "CHANGES_REQUESTED":
        raise unprocessable("You need to leave a comment indicating the requested changes.")
    if not body and not raw_comments and state == "COMMENTED":
        raise unprocessable("Body can't be blank")
    commit = _commit(call, repo, issue, data.get("commit_id"))
    if commit is None:
        raise unprocessable("Commit could not be found in this pull request")
    diff = _Diff(call, repo, issue, commit)

    def fail(_field: str, message: str) -> ApiError:
        return unprocessable(message)

    drafts = []
    for raw in raw_comments:
        text = raw.get("body") if isinstance(raw, dict) else None
        if not isinstance(text, str) or not text:
            raise unprocessable("Body can't be blank")
        drafts.append(_place(diff, raw, text, fail))
    review = call.world.add_review(repo, issue, author, state, body, commit, drafts)
    return Reply(200, call.shapes.review(repo, review))


# -- review comments ----------------------------------------------------------------------


def _comment_reply(call: Call, repo: Repo, comment: PullReviewComment, status: int = 200) -> Reply:
    return Reply(status, call.shapes.review_comment(repo, comment))


def _only_comment(repo: Repo, review_id: int) -> PullReviewComment:
    return next(c for c in repo.review_comments.values() if c.review_id == review_id)


def get_review_comment(call: Call) -> Reply:
    repo = call.repo()
    comment = repo.review_comments.get(call.number("id"))
    if comment is None:
        raise not_found()
    return _comment_reply(call, repo, comment)


def list_comments_for_review(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.pull(call.number())
    review = call.world.review(repo, issue, call.number("review_id"))
    comments = [c for c in call.world.review_comments_of(repo, issue) if c.review_id == review.id]
    return call.page([call.shapes.review_comment(repo, c) for c in comments])


def list_review_comments(call: Call) -> Reply:
    """The pull request's review comments, oldest first; ``sort`` (``created``/``updated``),
    ``direction`` and ``since`` as GitHub takes them."""
    repo = call.repo()
    issue = repo.pull(call.number())
    comments = call.world.review_comments_of(repo, issue)
    since = call.query.get("since")
    if since:
        try:
            moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError:
            raise ApiError(400, "Invalid value for parameter 'since'") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        comments = [c for c in comments if c.updated_at >= moment]
    sort = call.query.get("sort")
    if sort is not None:
        if sort not in ("created", "updated"):
            raise validation_failed(_RESOURCE, "sort", "invalid")
        comments.sort(
            key=lambda c: (c.updated_at if sort == "updated" else c.created_at, c.id),
            reverse=call.query.get("direction", "asc") == "desc",
        )
    return call.page([call.shapes.review_comment(repo, c) for c in comments])


def _reply(call: Call, repo: Repo, issue: Issue, to: PullReviewComment, body: str) -> Reply:
    """A reply in ``to``'s thread, in a COMMENTED review of its own as GitHub makes it."""
    root = repo.review_comments.get(to.in_reply_to_id or to.id, to)
    draft = DraftComment(root.path, root.line, root.side, root.position, root.diff_hunk, body)
    review = call.world.add_review(
        repo, issue, _login(call), "COMMENTED", "", root.commit_id, [draft], in_reply_to=root
    )
    return _comment_reply(call, repo, _only_comment(repo, review.id), 201)


def create_reply(call: Call) -> Reply:
    repo = call.repo()
    issue = repo.pull(call.number())
    to = repo.review_comments.get(call.number("id"))
    if to is None or to.pull_number != issue.number:
        raise not_found()
    body = _text(call.json(), "body")
    if not body:
        raise validation_failed(_RESOURCE, "body", "missing_field")
    return _reply(call, repo, issue, to, body)


def create_review_comment(call: Call) -> Reply:
    """One line comment outside a review (GitHub wraps it in a COMMENTED review), or a reply
    when ``in_reply_to`` names a comment of this pull request."""
    repo = call.repo()
    issue = repo.pull(call.number())
    author = _login(call)
    data = call.json()
    body = _text(data, "body")
    if not body:
        raise validation_failed(_RESOURCE, "body", "missing_field")
    in_reply_to = data.get("in_reply_to")
    if in_reply_to is not None:
        to = repo.review_comments.get(in_reply_to) if isinstance(in_reply_to, int) else None
        if to is None or to.pull_number != issue.number:
            raise validation_failed(_RESOURCE, "in_reply_to", "invalid")
        return _reply(call, repo, issue, to, body)
    for key in ("commit_id", "path"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise validation_failed(_RESOURCE, key, "missing_field")
    if data.get("line") is None and data.get("position") is None:
        raise validation_failed(_RESOURCE, "line", "missing_field")
    commit = _commit(call, repo, issue, data["commit_id"])
    if commit is None:
        raise validation_failed(_RESOURCE, "commit_id", "invalid")

    def fail(field: str, message: str) -> ApiError:
        return ApiError(
            422,
            "Validation Failed",
            [{"resource": _RESOURCE, "code": "custom", "field": field, "message": message}],
        )

    draft = _place(_Diff(call, repo, issue, commit), data, body, fail)
    review = call.world.add_review(repo, issue, author, "COMMENTED", "", commit, [draft])
    return _comment_reply(call, repo, _only_comment(repo, review.id), 201)
