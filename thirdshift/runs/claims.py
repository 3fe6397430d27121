"""A Claim: thirdshift's hold on an issue, in two halves that go together.

The Lease, in the database (``runs.lease``, ADR 0003), fences every write a Run makes to
GitHub (``fenced`` here); the label half, on GitHub (the Claim step, ``runs.steps.claim``),
swaps ``ready-for-agent`` for ``in-progress`` so people (and other daemons) see who is on the
issue, with one marked comment (``CLAIM_MARKER``). The approval of the issue's text is read
here too, for a Run and for a daemon's poll.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from thirdshift.records import Run, TextEdit
from thirdshift.runs.approval import NO_EARLIER, EarlierText, approval_reason, text_sha256
from thirdshift.runs.ports import READS, ApprovalReads, GitHubPort


@dataclass(frozen=True)
class Claim:
    """The GitHub half of a Claim as this Run made it: whether it took ``ready-for-agent``
    away (a release gives it back) and whether it added ``in-progress`` itself (only then may
    a release take it off again)."""

    had_ready_label: bool
    added_label: bool


P = TypeVar("P")


class FencedGitHub(GitHubPort, Protocol):
    """The whole of GitHub under a Lease (``fence_github``), with the fence itself in reach for
    a write made elsewhere."""

    def fence(self) -> None:
        """Raise ``LeaseLost`` unless the Lease is still held (before a write elsewhere)."""
        ...


class _Fenced:
    """GitHub, in any of its roles, for a Run under a Lease: every method but the ``READS``
    asks the fence first, so a Run that lost its Lease (paused past it, say) writes nothing
    over its successor's work. A method nobody sorted into ``READS`` counts as a write."""

    def __init__(self, github: object, fence: Callable[[], None]) -> None:
        self._github = github
        self.fence = fence

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never forwarded: a copy asks before __init__ has run
            raise AttributeError(name)
        found = getattr(self._github, name)
        if name in READS:
            return found

        @functools.wraps(found)
        def write(*args: Any, **kwargs: Any) -> Any:
            self.fence()
            return found(*args, **kwargs)

        return write


def fenced(github: P, fence: Callable[[], None]) -> P:
    """``github`` (one role, several, or the whole ``GitHubPort``) with ``fence`` asked before
    each of its writes; reads pass."""
    return cast(P, _Fenced(github, fence))


def fence_github(github: GitHubPort, fence: Callable[[], None]) -> FencedGitHub:
    """The whole ``GitHubPort`` fenced, its ``fence()`` in reach."""
    return cast(FencedGitHub, _Fenced(github, fence))


CLAIM_MARKER = "<!-- thirdshift:claim -->"


@dataclass(frozen=True)
class IssueText:
    """An issue's place and its text, as the approval of it is read."""

    owner: str
    name: str
    number: int
    title: str
    body: str


def text_not_approved(
    github: ApprovalReads,
    issue: IssueText,
    *,
    ready_label: str,
    earlier: Run | None,
    may_label: Callable[[str], bool],
    read_edits: Callable[[], tuple[TextEdit, ...]] | None = None,
    own_login: str | None = None,
    spec: int | None = None,
) -> str | None:
    """Why the issue's title and body are not approved by the Ready label (``approval``), or
    None. ``earlier``: the issue's latest Run, whose recorded text a changed one must be
    approved over. ``read_edits``: how the edits are read (a daemon keeps them a while).
    ``spec``: a Ticket's Spec, whose Ready label approves the Ticket's text."""
    owner, name, number = issue.owner, issue.name, issue.number
    labelled = spec if spec is not None else number
    labelling = github.labelling(owner, name, labelled, ready_label)
    edits = read_edits() if read_edits else github.text_edits(owner, name, number)
    return approval_reason(
        ready_label=ready_label,
        labelling=labelling,
        edits=edits,
        may_label=may_label,
        text_now=text_sha256(issue.title, issue.body),
        earlier=(
            EarlierText(earlier.text_sha256, earlier.id, earlier.started_at)
            if earlier
            else NO_EARLIER
        ),
        own_login=own_login,
        spec=spec,
    )
