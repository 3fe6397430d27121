"""The Claim: under the Lease, the Ready label taken off first (GitHub answers only one of two
removals, so Runs sharing no database cannot both claim), the Run recorded, then the labels
swapped and the one marked comment saying who works on the issue."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from thirdshift.errors import NotClaimed, ThirdshiftError
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, Lease, Repository, Run
from thirdshift.run_states import RunKind
from thirdshift.runs.claims import CLAIM_MARKER, Claim
from thirdshift.runs.ports import IssueLabels, MarkedComments, SessionSource
from thirdshift.runs.rules.approval import text_sha256
from thirdshift.runs.rules.label_looks import IN_PROGRESS_LOOK
from thirdshift.runs.scope import Found, RunRequest, RunScope, Say
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store


@dataclass(frozen=True)
class ClaimStep:
    """Claims an issue for a Run, on GitHub and in the database."""

    github: IssueLabels
    store: Store
    settings: Settings
    source: SessionSource
    scrub: Scrubber
    say: Say
    claimant: str

    def take_ready(self, ref: IssueRef, issue: IssueInfo, fence: Callable[[], None]) -> str | None:
        """The first step of the Claim on GitHub, taken under the Lease: the Ready label off.
        Runs that share no database (a workflow, a daemon elsewhere) can both hold a Lease of
        their own; GitHub answers only one of two removals of a label, so the other Run backs
        off, ``NotClaimed``, having changed nothing. The label's name as the issue spells it,
        or None when the issue had no Ready label (a Run by hand, a Continuation)."""
        wanted = self.settings.ready_label.lower()
        ready = next((label for label in issue.labels if label.lower() == wanted), None)
        if ready is None:
            return None
        fence()
        if not self.github.take_label(ref.owner, ref.repo, ref.number, ready):
            raise NotClaimed(
                f"{ref} was claimed on GitHub by another Run first (it took the {ready} label "
                "off); this Run changed nothing"
            )
        # At once in-progress, before the Run is recorded: an issue must never be left with
        # neither label (a crash then would leave nothing for a daemon's sweep to find).
        busy = self.settings.in_progress_label
        try:
            add_in_progress(self.github, ref, busy)
        except ThirdshiftError:
            with contextlib.suppress(ThirdshiftError):
                self.github.add_label(ref.owner, ref.repo, ref.number, ready)
            raise
        self.say(f"labelling #{ref.number} {busy}, in place of {ready}")
        return ready

    def record(
        self,
        lease: Lease,
        repository: Repository,
        found: Found,
        request: RunRequest,
        ready_taken: str | None,
        raise_lost: Callable[[], Exception],
        labelled_at: datetime | None = None,
    ) -> Run:
        """The Run, recorded under the Lease, with ``labelled_at`` (when the Ready label it
        answers was added, as the approval check read it); the Claim on GitHub is undone when
        it cannot be."""
        ref, issue = found.ref, found.issue
        try:
            record = self.store.start_run_under(
                lease,
                repository,
                ref.number,
                kind=RunKind.MERGE if request.merge else RunKind.DELIVERY,
                base_branch=found.base,
                issue_branch=found.choice.branch,
                harness=self.source.harness_name,
                model=self.source.model,
                text_sha256=text_sha256(issue.title, issue.body),
                parent_run_id=request.spec_run_id,
                ready_labelled_at=labelled_at,
            )
        except ThirdshiftError:
            self._give_ready_back(ref, ready_taken)
            raise
        if record is None:  # paused past the Lease before this Run was even recorded
            # The Run holding the issue now may want its Ready label; its in-progress stays.
            self._give_ready_back(ref, ready_taken, busy_too=False)
            raise raise_lost()
        return record

    def _give_ready_back(self, ref: IssueRef, ready: str | None, *, busy_too: bool = True) -> None:
        """Undo a Claim on GitHub made before the Run could be recorded (best effort: the
        issue gets its Ready label back and, with ``busy_too``, loses in-progress)."""
        if ready is None:
            return
        with contextlib.suppress(ThirdshiftError):
            self.github.add_label(ref.owner, ref.repo, ref.number, ready)
            if busy_too:
                self.github.remove_label(
                    ref.owner, ref.repo, ref.number, self.settings.in_progress_label
                )

    def labels(self, scope: RunScope) -> Claim:
        """``in-progress`` in place of the Ready label, on the Lease-fenced GitHub."""
        found = scope.found
        return claim_labels(
            scope.github,
            found.ref,
            found.issue,
            ready_label=self.settings.ready_label,
            in_progress_label=self.settings.in_progress_label,
            say=self.say,
            ready_taken=scope.ready_taken,
        )

    def comment(self, scope: RunScope) -> None:
        """The claim comment: who works on the issue, as which Run, on which branch."""
        found = scope.found
        claim_comment(
            scope.github,
            found.ref,
            run_id=scope.record.id,
            branch=found.choice.branch,
            claimant=self.scrub(self.claimant),
            continuation=found.choice.continuation,
            rescue_of=scope.request.rescue_of,
        )


def add_in_progress(github: IssueLabels, ref: IssueRef, label: str) -> None:
    """Put the in-progress ``label`` on the issue, making the repository's label first."""
    look = IN_PROGRESS_LOOK
    github.ensure_label(ref.owner, ref.repo, label, look.color, look.description)
    github.add_label(ref.owner, ref.repo, ref.number, label)


def claim_labels(
    github: IssueLabels,
    ref: IssueRef,
    issue: IssueInfo,
    *,
    ready_label: str,
    in_progress_label: str,
    say: Callable[[str], None],
    ready_taken: bool = False,
) -> Claim:
    """Put ``in-progress`` in place of ``ready-for-agent``, one label at a time. An issue
    already in progress and no longer ready is left as it is. ``ready_taken``: the Run took the
    Ready label off already, as its claim against Runs sharing no database."""
    ready, busy = ready_label, in_progress_label
    if ready_taken:  # the Run swapped both labels before it was recorded
        return Claim(had_ready_label=True, added_label=True)
    labels = list(issue.labels)
    had_ready = any(label.lower() == ready.lower() for label in labels)
    had_busy = any(label.lower() == busy.lower() for label in labels)
    if had_busy and not had_ready:
        return Claim(had_ready_label=False, added_label=False)
    # One label at a time, never the whole set: a label a person adds meanwhile must stay.
    if not had_busy:
        add_in_progress(github, ref, busy)
    if had_ready and not ready_taken:
        ready_name = next(label for label in labels if label.lower() == ready.lower())
        github.remove_label(ref.owner, ref.repo, ref.number, ready_name)
    say(f"labelling #{ref.number} {busy}" + (f", in place of {ready}" if had_ready else ""))
    return Claim(had_ready_label=had_ready, added_label=not had_busy)


def claim_comment(
    github: MarkedComments,
    ref: IssueRef,
    *,
    run_id: int,
    branch: str,
    claimant: str,
    continuation: bool,
    rescue_of: int | None,
) -> None:
    """The Claim's one marked comment: who works on the issue, as which Run, on which branch.
    A later Run edits it, so an issue never collects one per Run."""
    if rescue_of is not None:
        how = f", as a Rescue of Run {rescue_of}, which crashed"
    elif continuation:
        how = ", continuing the work already on that branch"
    else:
        how = ""
    body = (
        f"{CLAIM_MARKER}\nthirdshift is working on this issue as Run {run_id} ({claimant}), on "
        f"branch `{branch}`{how}. It ends with a pull request ready for review, or with a "
        "comment here saying what stopped it and where the work is."
    )
    github.upsert_marked_comment(ref.owner, ref.repo, ref.number, CLAIM_MARKER, body)
