"""What a Spec run knows of its Tickets as it goes, and how it reads them again: GitHub's graph
(the Spec's sub-issues, their state and blockers) joined with thirdshift's records (landed in
the Spec branch, running, held by another process's Lease, failed), for ``schedule_tickets``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from thirdshift.issue_url import IssueRef
from thirdshift.records import PullRequestInfo, Repository, Run
from thirdshift.run_states import RunState
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.approval import text_sha256
from thirdshift.runs.rules.ticket_rescue import EarlierEnd, MergeSeen, dies_now, earlier_end
from thirdshift.runs.rules.tickets import Blocker, Ticket, TicketState
from thirdshift.scrub import Scrubber
from thirdshift.store import Store

TICKET_RUN_DIED = (
    "the Ticket Run stopped without recording an ending: its process died (or was paused) "
    "and its Lease ran out"
)


@dataclass
class TicketProgress:
    """What this Spec run knows of its Tickets as it goes (the loop's thread alone writes)."""

    running: dict[int, Future[RunOutcome]] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)  # Ticket -> why its Run failed
    titles: dict[int, str] = field(default_factory=dict)  # every Ticket seen, by number
    # The titles a prompt may carry: a Ticket's, while its text is still what its latest Run
    # of this Spec branch was approved on (a stranger's retitle since reaches no session).
    prompt_titles: dict[int, str] = field(default_factory=dict)
    graph: dict[int, Ticket] = field(default_factory=dict)  # as last read
    held: set[int] = field(default_factory=set)  # under another process's live Lease
    said_held: set[int] = field(default_factory=set)  # held Tickets the run has said it waits on
    # Ticket -> its blockers when its Run started: one found after that may hold it again
    started_with: dict[int, set[int]] = field(default_factory=dict)
    # Runs an earlier Spec run left unlanded that were read to their end (``settle``)
    settled: set[int] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)  # the loop itself failed


@dataclass(frozen=True)
class TicketBefore:
    """What a Ticket's newest Run means for the Run about to start: the crashed Run it Rescues
    (``rescue_of``), a wait while that Run's Lease lives (``held``), or neither (a fresh
    start)."""

    rescue_of: int | None = None
    held: bool = False


@dataclass(frozen=True)
class TicketReads:
    """The Tickets of one Spec run's Spec branch, read again from GitHub and the records."""

    github: GitHubPort
    store: Store
    scrub: Scrubber
    repository: Repository
    branch: str
    spec_run_id: int  # this Spec run's: it records its own Ticket Runs' landings

    def settle(self, progress: TicketProgress, say: Callable[[str], None]) -> None:
        """The Rescue records before it decides: each Ticket Run an earlier Spec run left
        unlanded is recorded crashed first when it still says ``running`` with its Lease gone,
        then its pull request is read, and one merged into the Spec branch at a head
        thirdshift recorded is recorded landed whatever its Lease says; so a Ticket that
        merged a moment before a kill is never run again. Newest Run first, one landing per
        Ticket; a Run read to its end is not read again."""
        store, dead = self.store, None
        landed = set(store.landed_tickets(self.repository, self.branch))
        runs = store.unlanded_ticket_runs(self.repository, self.branch, besides=self.spec_run_id)
        for run in reversed(runs):
            if run.id in progress.settled or run.issue_number in landed:
                continue
            lease_live = True
            if run.state == RunState.RUNNING:
                if dead is None:
                    dead = {r.id for r in store.dead_runs(self.repository)}
                lease_live = run.id not in dead
            state = run.state
            if dies_now(state, lease_live):
                store.record_crash(run.id, TICKET_RUN_DIED)
                state = (store.get_run(run.id) or run).state
            end, pull = self._landing(run, state, lease_live)
            if end.settled:
                progress.settled.add(run.id)
            if pull is None:
                continue
            if end is EarlierEnd.LANDED:
                store.record_landing(run.id, pull.head_sha)
                landed.add(run.issue)
                say(
                    f"Ticket #{run.issue_number} landed in {self.branch} before Run {run.id} "
                    "could record it; recorded now"
                )
            elif end is EarlierEnd.UNRECORDED_HEAD:
                say(
                    f"warning: Ticket #{run.issue_number}'s pull request {pull.html_url} was "
                    f"merged at {pull.head_sha[:7]}, a head thirdshift never recorded; it is "
                    "not counted as landed"
                )

    def _landing(
        self, run: Run, state: RunState, lease_live: bool
    ) -> tuple[EarlierEnd, PullRequestInfo | None]:
        """What ``run`` is now (read after its crash is recorded), with its pull request."""
        if run.pull_request_number is None:
            return earlier_end(state, lease_live, None), None
        owner, name = self.repository.owner, self.repository.name
        pull = self.github.pull(owner, name, run.pull_request_number)
        heads = self.store.recorded_heads(self.repository, run.issue_number, pull.head_ref)
        seen = MergeSeen(
            merged=pull.merged and pull.base_ref == self.branch,
            head_recorded=pull.head_sha in heads,
        )
        return earlier_end(state, lease_live, seen), pull

    def tickets(self, ref: IssueRef, progress: TicketProgress) -> tuple[Ticket, ...]:
        """The Spec's open sub-issues and every Ticket this Spec branch recorded, with their
        open blockers and what thirdshift recorded of each."""
        gh, store = self.github, self.store
        landed = store.landed_tickets(self.repository, self.branch)
        leased = {
            lease.issue_number
            for lease in store.live_leases(self.repository)
            if lease.issue_number is not None
        }
        ours = {*landed, *progress.running, *progress.failed, *progress.titles}
        numbers = sorted({*gh.sub_issues(ref.owner, ref.repo, ref.number), *ours})
        # Only this Spec's Tickets: a Lease on any other issue is no business of this loop.
        progress.held = (leased & set(numbers)) - set(progress.running) - set(landed)
        tickets: list[Ticket] = []
        for number in numbers:
            issue = gh.issue(ref.owner, ref.repo, number)
            closed = issue.state != "open"
            if closed and number not in ours:
                continue  # closed before this Spec run saw it open: outside the Spec
            progress.titles[number] = self.scrub(issue.title)
            self._approved_title(progress, number, issue.title, issue.body)
            blockers = tuple(
                Blocker(b.number, closed=b.state != "open", elsewhere=b.elsewhere)
                for b in gh.blockers(ref.owner, ref.repo, number)
            )
            state, cause = _state_of(number, landed, progress)
            tickets.append(Ticket(number, closed, blockers, state, cause))
        return tuple(tickets)

    def _approved_title(self, progress: TicketProgress, number: int, title: str, body: str) -> None:
        latest = self.store.latest_run(self.repository, number)
        approved = (
            latest is not None
            and latest.base_branch == self.branch
            and latest.text_sha256 == text_sha256(title, body)
        )
        if approved:
            progress.prompt_titles[number] = self.scrub(title)
        else:
            progress.prompt_titles.pop(number, None)

    def before_start(self, number: int) -> TicketBefore:
        """What the Ticket's newest Run means for the one about to start. A Ticket Run of this
        Spec branch that crashed (its process died with a Spec run) is Rescued by it. One still
        recorded ``running`` whose Lease ran out is recorded as crashed here: this Spec run
        holds the Spec, so nothing else runs its Tickets, and a daemon's poll may not have come
        round to it yet. One whose Lease is live again holds the Ticket: the Lease may have been
        read as run out a moment before (``tickets``), and a Run started now would run beside
        it, or fail to take the issue, instead of Rescuing it once the Lease is gone."""
        latest = self.store.latest_run(self.repository, number)
        if latest is None or latest.parent_run_id is None or latest.base_branch != self.branch:
            return TicketBefore()
        if latest.state == RunState.RUNNING:
            dead = {run.id for run in self.store.dead_runs(self.repository)}
            if latest.id not in dead:
                return TicketBefore(held=True)
            self.store.record_crash(latest.id, TICKET_RUN_DIED)
            latest = self.store.get_run(latest.id) or latest
        return TicketBefore(rescue_of=latest.id if latest.state == RunState.CRASHED else None)

    def new_blockers(self, ref: IssueRef, progress: TicketProgress, number: int) -> list[int]:
        """The Tickets of the Spec, not landed, that block Ticket ``number`` now and did not
        when it started: a Base fix of the Spec branch its Run opened, or a person's re-plan.
        A Ticket that failed with one waits for it instead of failing the Spec run; each new
        blocker earns it one more start, no more."""
        gh = self.github
        known = progress.started_with.get(number, set())
        open_now = {
            b.number
            for b in gh.blockers(ref.owner, ref.repo, number)
            if b.state == "open" and not b.elsewhere  # one elsewhere is never a Ticket
        }
        fresh = open_now - known
        if not fresh:
            return []
        tickets = set(gh.sub_issues(ref.owner, ref.repo, ref.number))
        landed = self.store.landed_tickets(self.repository, self.branch)
        return sorted(b for b in fresh if b in tickets and b not in landed)


def _state_of(
    number: int, landed: Mapping[int, Run], progress: TicketProgress
) -> tuple[TicketState, str]:
    """What thirdshift recorded of a Ticket: landed in the Spec branch (by any Spec run),
    running (in this one, or still held by a Run of another process) or failed in this one, or
    not started (an earlier Spec run's failure continues)."""
    if number in landed:
        return TicketState.LANDED, ""
    if number in progress.running or number in progress.held:
        return TicketState.RUNNING, ""
    if number in progress.failed:
        return TicketState.FAILED, progress.failed[number]
    return TicketState.NOT_STARTED, ""
