"""The Lease and what is checked under it before the Claim: the issue is still wanted as the
daemon chose it, and its text is approved by the Ready label."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from thirdshift.clock import Clock
from thirdshift.errors import NotClaimed
from thirdshift.records import IssueInfo, Repository
from thirdshift.runs.claims import IssueText, read_approval
from thirdshift.runs.lease import LeaseKeeper
from thirdshift.runs.ports import ApprovalReads, Identity, IssueLabels
from thirdshift.runs.rules.approval import PASSED_OVER, ROLES_THAT_LABEL
from thirdshift.runs.rules.roles import Roles
from thirdshift.runs.scope import RunRequest
from thirdshift.settings import Settings
from thirdshift.store import Store


class LeaseReads(Identity, IssueLabels, ApprovalReads, Protocol):
    """The issue as it is now, and what its approval is read from."""


@dataclass(frozen=True)
class LeaseStep:
    """The Lease of one issue (or of a repository's Architect runs, issue 0) and the checks
    made under it."""

    github: LeaseReads
    store: Store
    settings: Settings
    clock: Clock
    interrupt: threading.Event
    claimant: str

    def keeper(self, repository: Repository, number: int | None) -> LeaseKeeper:
        """The Lease to enter (of the issue ``number``, or the repository's Architect Lease for
        None); losing it stops the Run's session at once."""
        return LeaseKeeper(
            self.store,
            repository,
            number,
            self.settings.lease_seconds,
            on_lost=self.interrupt.set,  # its session stops at once
            owner=self.claimant,
            clock=self.clock,
            release_seconds=self.settings.salvage_wait_seconds,
        )

    def still_wanted(
        self, request: RunRequest, repository: Repository, seen: IssueInfo
    ) -> IssueInfo:
        """Under the Lease, the issue as the daemon chose it, or ``NotClaimed``: between its
        poll and this Lease another daemon may have run the issue to its end."""
        if not request.expect_ready and request.rescue_of is None and request.review_of is None:
            return seen
        ref = request.issue
        earlier = request.rescue_of if request.rescue_of is not None else request.review_of
        if earlier is not None:
            latest = self.store.latest_run(repository, ref.number)
            if latest is None or latest.id != earlier:
                raise NotClaimed(
                    f"{ref} was taken over by Run {latest.id if latest else '?'} meanwhile"
                )
            return seen
        issue = self.github.issue(ref.owner, ref.repo, ref.number)
        ready = self.settings.ready_label.lower()
        if issue.state != "open" or ready not in {label.lower() for label in issue.labels}:
            raise NotClaimed(f"{ref} is no longer open with {self.settings.ready_label}")
        return issue

    def check_approval(
        self, request: RunRequest, repository: Repository, issue: IssueInfo
    ) -> datetime | None:
        """Under the Lease, before the Claim: ``NotClaimed`` when the issue's text is no longer
        what a person who may label approved. A Run by hand of an issue without the Ready label
        is approved by whoever started it; a Ticket Run is approved by its Spec's Ready label
        (a stranger's edit of a Ticket after it voids the approval of that Ticket).

        Returns when the issue's own Ready label was last added, as the check read it (the Run
        records it, for ``thirdshift report``'s label-to-ready time): None when nothing was
        read, for a Ticket (its label is the Spec's), and for a Run answering review feedback
        (its label approved an earlier pull request, not this Run's)."""
        ready = self.settings.ready_label
        # A Ticket Run of an approved Spec: the Spec's Ready label approved its Tickets' text
        # as it then read. Otherwise (a Spec run by hand) the Ticket is judged as any issue.
        spec = request.spec_number if request.spec_approved else None
        if spec is None:
            labelled = ready.lower() in {label.lower() for label in issue.labels}
            asked = request.expect_ready or request.rescue_of is not None
            if not (asked or request.review_of is not None or labelled):
                return None
        ref = request.issue
        me = self.github.authenticated_login().lower()
        role_of = Roles(self.github, ref.owner, ref.repo)

        def may_label(login: str) -> bool:
            if login.lower() == me:
                return True  # thirdshift's own edit (a Base fix it opened)
            return role_of(login) in ROLES_THAT_LABEL

        earlier = self.store.latest_run(repository, ref.number)
        approval = read_approval(
            self.github,
            IssueText(ref.owner, ref.repo, ref.number, issue.title, issue.body),
            ready_label=ready,
            earlier=earlier,
            may_label=may_label,
            own_login=me,
            spec=spec,
        )
        if approval.reason is not None:
            raise NotClaimed(f"{ref}{PASSED_OVER}{approval.reason}")
        labelling = approval.labelling
        if spec is not None or request.review_of is not None or labelling is None:
            return None
        if (labelling.login or "").lower() == me:
            # thirdshift gave the label back (a stopped Run, a claim never recorded): the wait
            # began when a person last asked. Its own label alone (a Base fix it opened) counts.
            asked_at = [at for login, at in labelling.adders if (login or "").lower() != me]
            return asked_at[-1] if asked_at else labelling.at
        return labelling.at
