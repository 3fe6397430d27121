"""A poll's view of Spec runs (adr/0032): a Ready issue with sub-issues is a Spec, taken as a
Spec run, and a Ticket of a Spec that a Spec run holds (running, or crashed and waiting for its
Rescue) or that the same poll takes is that Spec run's to run: it is passed over, naming the
Spec, whichever of the two has the lower number."""

from __future__ import annotations

from dataclasses import dataclass, replace

from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.ports import DaemonGitHub
from thirdshift.daemon.ready import ticket_reason
from thirdshift.records import Repository
from thirdshift.store import Store


@dataclass(frozen=True)
class SpecPickups:
    """One repository's Specs and Tickets, for one poll."""

    owner: str
    name: str
    github: DaemonGitHub
    store: Store
    activity: ActivityLog

    def held_tickets(self, repository: Repository) -> dict[int, int]:
        """Each Ticket of a Spec a Spec run holds, with its Spec's number: that Spec run runs
        it, no Run of its own. One conditional read of sub-issues per held Spec."""
        tickets: dict[int, int] = {}
        for run in self.store.held_specs(repository):
            for number in self.github.sub_issues(self.owner, self.name, run.issue):
                tickets.setdefault(number, run.issue)
        return tickets

    def taken(
        self,
        repository: Repository,
        pickups: list[Pickup],
        tickets: dict[int, int],
        passed: set[int],
    ) -> list[Pickup]:
        """The Ready issues to take, each a Spec run when it has sub-issues; a Ticket of a
        Spec taken now is passed over (noted in ``passed``), as its Spec run runs it."""
        marked: list[Pickup] = []
        for pickup in pickups:
            subs = self.github.sub_issues(self.owner, self.name, pickup.issue)
            if subs:
                pickup = replace(pickup, spec=True)
                for number in subs:
                    tickets.setdefault(number, pickup.issue)
            marked.append(pickup)
        kept: list[Pickup] = []
        for pickup in marked:
            spec = tickets.get(pickup.issue)
            reason = ticket_reason(spec) if spec != pickup.issue else None
            if reason is not None:
                self.activity.pass_over(repository, pickup.issue, reason)
                passed.add(pickup.issue)
                continue
            self.activity.forget(repository, pickup.issue)
            kept.append(pickup)
        return kept
