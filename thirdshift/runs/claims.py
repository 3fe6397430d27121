"""A Claim: thirdshift's hold on an issue, in two halves that go together.

The Lease, in the database (``runs.lease``, ADR 0003), fences every write a Run makes to
GitHub (``runs.fence``); the label half, on GitHub (the Claim step, ``runs.steps.claim``),
swaps ``ready-for-agent`` for ``in-progress`` so people (and other daemons) see who is on the
issue, with one marked comment (``CLAIM_MARKER``). The approval of the issue's text is read
here too, for a Run and for a daemon's poll.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from thirdshift.records import Labelling, Run, TextEdit
from thirdshift.runs.ports import ApprovalReads
from thirdshift.runs.rules.approval import NO_EARLIER, EarlierText, approval_reason, text_sha256


@dataclass(frozen=True)
class Claim:
    """The GitHub half of a Claim as this Run made it: whether it took ``ready-for-agent``
    away (a release gives it back) and whether it added ``in-progress`` itself (only then may
    a release take it off again)."""

    had_ready_label: bool
    added_label: bool


CLAIM_MARKER = "<!-- thirdshift:claim -->"


@dataclass(frozen=True)
class IssueText:
    """An issue's place and its text, as the approval of it is read."""

    owner: str
    name: str
    number: int
    title: str
    body: str


@dataclass(frozen=True)
class Approval:
    """What the approval check read: why the text is not approved (None: it is), and the last
    adding of the Ready label it judged by (the Spec's for a Ticket; None: never labelled)."""

    reason: str | None
    labelling: Labelling | None


def read_approval(
    github: ApprovalReads,
    issue: IssueText,
    *,
    ready_label: str,
    earlier: Run | None,
    may_label: Callable[[str], bool],
    read_edits: Callable[[], tuple[TextEdit, ...]] | None = None,
    own_login: str | None = None,
    spec: int | None = None,
) -> Approval:
    """Whether the issue's title and body are approved by the Ready label (``approval``), with
    the labelling read for it. ``earlier``: the issue's latest Run, whose recorded text a
    changed one must be approved over. ``read_edits``: how the edits are read (a daemon keeps
    them a while). ``spec``: a Ticket's Spec, whose Ready label approves the Ticket's text."""
    owner, name, number = issue.owner, issue.name, issue.number
    labelled = spec if spec is not None else number
    labelling = github.labelling(owner, name, labelled, ready_label)
    edits = read_edits() if read_edits else github.text_edits(owner, name, number)
    reason = approval_reason(
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
    return Approval(reason, labelling)
