"""Review Repairs: what people asked of a pull request thirdshift opened, as pure rules.

A review that requests changes, or a comment that mentions thirdshift's handle, by someone with
write permission, is Review feedback: the next Run on the issue opens with a ``review-<i>``
session whose prompt carries it. Everything else (approvals, reviews by people without write
permission, bots, thirdshift's own comments) is left out of every prompt and only counted.
Each piece of feedback is handled once: its key is recorded in the database when a Run takes
it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.defang import defanged
from thirdshift.records import Comment, IssueInfo, PullRequestInfo, Review, ReviewComment
from thirdshift.runs.rules.prompts import PULL_REQUEST_FILE, cut_bytes

# Who may ask thirdshift for changes: people who could push the change themselves.
REVIEWER_ROLES = frozenset({"admin", "maintain", "write"})
REVIEW_BYTES = 40_000  # the feedback's share of a prompt (an argv element; see prompts)
NOTE_BYTES = 4_000  # one comment, so a long one cannot crowd the others out
REPLY_MARKER_PREFIX = "<!-- thirdshift:review-reply"


def reply_marker(run_id: int) -> str:
    """The hidden mark of Run ``run_id``'s reply: one reply per review Repair, edited (never
    repeated) when its posting is retried."""
    return f"{REPLY_MARKER_PREFIX}:{run_id} -->"


@dataclass(frozen=True)
class ReviewNote:
    """One thing a reviewer said: a review's body, or a comment (on ``path`` at ``line``)."""

    author: str
    body: str
    path: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Feedback:
    """Review feedback not yet handled on one pull request: the keys to record as handled,
    the notes for the prompt (oldest first), who gave them, and how many review items were
    left out for their authors (bots, people without write permission; thirdshift's own are not
    counted)."""

    keys: tuple[str, ...]
    notes: tuple[ReviewNote, ...]
    reviewers: tuple[str, ...]
    ignored: int = 0

    def __bool__(self) -> bool:
        return bool(self.keys)


NO_FEEDBACK = Feedback((), (), ())


_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def mentions(text: str, handle: str) -> bool:
    """Whether the author of ``text`` mentions ``@handle`` as a word (``@thirdshift``, not
    ``@thirdshift-fan``), whatever its case. A mention inside a quote (``>`` lines) or code is
    someone else's words being shown, not a request: a maintainer quoting a stranger's
    ``@thirdshift ...`` must not hand the stranger the agent."""
    own = _CODE_SPAN.sub("", _FENCE.sub("", text))
    own = "\n".join(line for line in own.splitlines() if not line.lstrip().startswith(">"))
    name = re.escape(handle.lstrip("@"))
    return re.search(rf"(?<![\w@])@{name}(?![\w-])", own, re.IGNORECASE) is not None


def feedback_to_handle(
    *,
    reviews: Sequence[Review],
    review_comments: Sequence[ReviewComment],
    comments: Sequence[Comment],
    me: str,
    handle: str,
    role_of: Callable[[str], str],
    handled: frozenset[str],
) -> Feedback:
    """The pull request's feedback thirdshift has not handled yet (no ``keys``: none).

    Taken: a review requesting changes (its body and all its line comments); a review, line
    comment or pull request comment that mentions ``handle``. Each must be by a person with
    write permission (``role_of`` gives a login's role) who is neither a bot nor ``me``, and
    not in ``handled``. thirdshift's own comments are known by their author alone: a person's
    comment quoting one of its markers is heard like any other.
    """
    found = _Collector(me, role_of)
    line_comments = {c.id: c for c in review_comments}
    taken_comments: set[int] = set()
    for review in reviews:
        key = f"review:{review.id}"
        wanted = review.state == "CHANGES_REQUESTED" or mentions(review.body, handle)
        if not wanted or key in handled or found.ours(review.author):
            continue
        own = [c for c in review_comments if c.review_id == review.id]
        body = [ReviewNote(review.author, review.body.strip())] if review.body.strip() else []
        if found.take(key, review.author, review.is_bot, [*body, *(_note(c) for c in own)]):
            taken_comments.update(c.id for c in own)
    for comment in line_comments.values():
        key = f"review-comment:{comment.id}"
        if comment.id in taken_comments or key in handled or not mentions(comment.body, handle):
            continue
        if not found.ours(comment.author):
            found.take(key, comment.author, comment.is_bot, [_note(comment)])
    for said in comments:
        key = f"comment:{said.id}"
        if key in handled or found.ours(said.author) or not mentions(said.body, handle):
            continue
        found.take(key, said.author, False, [ReviewNote(said.author, said.body.strip())])
    return Feedback(tuple(found.keys), tuple(found.notes), tuple(found.reviewers), found.ignored)


class _Collector:
    """The feedback taken so far, and how many items by others were left out."""

    def __init__(self, me: str, role_of: Callable[[str], str]) -> None:
        self._me = me
        self._role_of = role_of
        self.keys: list[str] = []
        self.notes: list[ReviewNote] = []
        self.reviewers: list[str] = []
        self.ignored = 0

    def ours(self, author: str) -> bool:
        return author.lower() == self._me.lower()

    def take(self, key: str, author: str, is_bot: bool, taken: Sequence[ReviewNote]) -> bool:
        """Take the item when its author may review (a person with write permission), else
        count it left out."""
        allowed = (
            bool(author)
            and not is_bot
            and not author.endswith("[bot]")
            and self._role_of(author) in REVIEWER_ROLES
        )
        if not allowed:
            self.ignored += 1
            return False
        self.keys.append(key)
        self.notes.extend(taken)
        if author not in self.reviewers:
            self.reviewers.append(author)
        return True


class FeedbackReads(Protocol):
    """What finding review feedback reads of GitHub (the Run's port and the daemon's both):
    the role ``read_feedback`` owns."""

    def pull_reviews(self, owner: str, name: str, number: int) -> tuple[Review, ...]:
        """The pull request's reviews, oldest first (asked conditionally: an unchanged list
        costs no rate limit)."""
        ...

    def pull_review_comments(self, owner: str, name: str, number: int) -> tuple[ReviewComment, ...]:
        """The comments on lines of the pull request's diff, oldest first (conditionally)."""
        ...

    def issue_comments(self, owner: str, name: str, number: int) -> tuple[Comment, ...]:
        """Every comment on the issue (or pull request), oldest first."""
        ...


def read_feedback(
    github: FeedbackReads,
    owner: str,
    name: str,
    pull_number: int,
    *,
    me: str,
    handle: str,
    role_of: Callable[[str], str],
    handled: frozenset[str],
) -> Feedback:
    """The feedback waiting on pull request ``pull_number``, from its reviews, line comments
    and comments; thirdshift's own comments are never feedback."""
    return feedback_to_handle(
        reviews=github.pull_reviews(owner, name, pull_number),
        review_comments=github.pull_review_comments(owner, name, pull_number),
        comments=github.issue_comments(owner, name, pull_number),
        me=me,
        handle=handle,
        role_of=role_of,
        handled=handled,
    )


def _note(comment: ReviewComment) -> ReviewNote:
    return ReviewNote(comment.author, comment.body.strip(), comment.path or None, comment.line)


def review_prompt(
    preamble: str,
    *,
    issue: IssueInfo,
    pull: PullRequestInfo,
    feedback: Feedback,
    issue_branch: str,
) -> str:
    """The ``review-<i>`` session's prompt: what came before (the follow-up preamble), then
    each note with its file and line, bounded, then what to do."""
    shown: list[str] = []
    for note in feedback.notes:
        where = (
            f"{note.path}:{note.line}"
            if note.path and note.line
            else (f"{note.path} (a line no longer in the diff)" if note.path else "")
        )
        head = f"On {where}, {note.author} wrote:" if where else f"{note.author} wrote:"
        body = cut_bytes(note.body, NOTE_BYTES, "[the rest of this comment is left out]")
        quoted = "\n".join(f"> {line}" if line else ">" for line in body.splitlines())
        shown.append(f"{head}\n{quoted}")
    notes = cut_bytes(
        "\n\n".join(shown),
        REVIEW_BYTES,
        "[further review comments are left out; read the pull request]",
    )
    before = f"{preamble.strip()}\n\n" if preamble.strip() else ""
    return f"""{before}You are working unattended on pull request #{pull.number} ({pull.html_url}),
which implements issue #{issue.number} of this repository: {issue.title}

People with write access reviewed it and asked for changes:

{notes}

Do this, in order:
1. Make the changes they ask for on {issue_branch}; where you disagree or cannot, say why in
   the pull request's description instead.
2. Run the project's tests and checks, in the foreground, and make them pass.
3. Commit your work on {issue_branch} with clear messages. Do not push: thirdshift pushes.
4. If the title or description must change, write the whole pull request into the file
   {PULL_REQUEST_FILE} at the repository root (first line the title, a blank line, the body,
   which keeps the line "Closes #{issue.number}").

Never end your turn while a command you started is still running.
"""


def review_reply(
    feedback: Feedback, *, run_id: int, commits: Sequence[str], head: str, checks: str
) -> str:
    """The one reply on the pull request once a review Repair reached its goal: who asked,
    what changed (the commits' subjects), the new head and what CI said of it."""
    who = ", ".join(f"@{login}" for login in feedback.reviewers)
    if commits:
        # An agent wrote the subjects: shown as code and defanged, they can mention nobody,
        # link nowhere, close nothing and carry no hidden marker of thirdshift's.
        changed = "\n".join(f"- {defanged(_code(subject))}" for subject in commits[:20])
        if len(commits) > 20:
            changed += f"\n- ... and {len(commits) - 20} more"
    else:
        changed = "- no commit: the session changed nothing (its reasons are in the description)"
    return (
        f"{who}: thirdshift worked on your review in Run {run_id}.\n\n"
        f"{changed}\n\nThe pull request's head is now `{head[:7]}`; CI: {checks}."
    )


def _code(text: str) -> str:
    """``text`` as one inline code span that nothing in it can end or break out of."""
    flat = " ".join(text.split()).replace("<!--", "<!- -")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    return f"{fence} {flat} {fence}"
