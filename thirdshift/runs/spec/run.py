"""A Spec run (issue 23, adr/0032): a Spec's Tickets run as Merge runs into one pinned Spec
branch, then the Spec PR from it into the Base branch.

It composes the Run, it is no copy of it: under the Spec's own Lease it pins the Spec branch
(made from the Base branch's head when new) and records itself (kind ``spec``); then each Ticket
is a Ticket Run, the same ``Delivery`` a Merge run is (its own Lease and fencing token,
Worktree, Issue branch, session, takeover, Repair loop, CI watch and Self-merge), whose Base
branch is the Spec branch and whose parent is this Spec run. Up to ``parallel`` run at once, in
threads; before each start the Tickets and their blockers are read again from GitHub and
``schedule_tickets`` decides. A Ticket starts from the Spec branch's head, and its Repair loop
merges in what lands meanwhile (the Base branch of a Run moving). thirdshift records each
landing, closes the Ticket with a comment naming its merge and rewrites the draft Spec PR's
checklist (``spec_pull``). A Spec run run again continues: what landed in the Spec branch is
not run again.

An interrupt (Ctrl-C, SIGTERM, a lost Lease) starts nothing new and passes on to the running
Ticket Runs, which salvage their work as any Run does.

A daemon's Spec run claims the Spec as a Run claims its issue (still Ready and approved under
the Lease, the Ready label swapped for in-progress, the claim comment); a Rescue of a crashed
Spec run continues it: before each decision a Ticket Run left still ``running`` with its Lease
gone is recorded crashed, then a Ticket whose merged pull request was not yet recorded as
landed is recorded now (whatever its Lease says), and a Ticket Run that crashed unmerged is
Rescued within it. A Ticket another
process still holds (its Lease not yet run out) is waited for, not failed. The Spec run is
announced once, with a line per Ticket; its Ticket Runs are not announced.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import replace

from thirdshift.errors import ThirdshiftError, UsageError
from thirdshift.issue_url import IssueRef
from thirdshift.records import Run
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs.fence import fenced
from thirdshift.runs.notices import Announcer
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.ports import NO_NOTIFIER
from thirdshift.runs.rules.post_mortem import AnnouncedEnd
from thirdshift.runs.rules.ticket_texts import TicketText, failure_lines, ticket_texts
from thirdshift.runs.rules.tickets import (
    SpecRunState,
    TicketSchedule,
    schedule_tickets,
)
from thirdshift.runs.scope import RunHooks, RunParts, RunRequest
from thirdshift.runs.spec.brief import ticket_brief
from thirdshift.runs.spec.claim import Pinned, SpecClaim, SpecRequest
from thirdshift.runs.spec.progress import TicketProgress, TicketReads
from thirdshift.runs.spec.review import SpecDelivery, read_spec_review_prompt, review_scope
from thirdshift.runs.spec.threads import LinkedInterrupt, no_record, outcome_of_future, quiet
from thirdshift.runs.steps.preflight import preflight

TicketRunner = Callable[[RunRequest, RunHooks], RunOutcome]
"""One Ticket Run to its outcome: the composition root's ``Delivery`` with these hooks."""

WAIT_SECONDS = 1.0  # how often the loop looks at the interrupt while Tickets run
HELD_SECONDS = 5.0  # how often a Ticket another process still holds is looked at again


class SpecRun:
    """Runs one Spec. Built by the composition root with the Ticket runner it builds."""

    def __init__(
        self, parts: RunParts, hooks: RunHooks, run_ticket: TicketRunner, deliver: SpecDelivery
    ) -> None:
        self._parts, self._hooks, self._run_ticket = parts, hooks, run_ticket
        self._deliver = deliver

    def say(self, line: str) -> None:
        self._hooks.progress(self._parts.scrub(line))

    def run(self, request: SpecRequest) -> RunOutcome:
        """The Spec run to its end: the Spec PR ready, or a Failed spec run naming the
        Tickets not done. An error before it is recorded is raised, having changed nothing."""
        parts, ref = self._parts, request.spec
        if request.parallel < 1:
            raise UsageError(f"--parallel must be at least 1, not {request.parallel}")
        # The Run's own pre-flight: the Harness on PATH, a token that may push, an open issue.
        repo, issue = preflight(parts.github, parts.session_source, parts.environ, ref)
        if not parts.github.sub_issues(ref.owner, ref.repo, ref.number):
            raise UsageError(
                f"#{ref.number} has no sub-issues, so it is no Spec; run it without --parallel"
            )
        repository = parts.store.ensure_repository(repo.owner, repo.name)
        claim = SpecClaim(parts, self._hooks)
        keeper = claim.leases().keeper(repository, ref.number)
        with keeper as lease:
            pinned, ready_taken = claim.take(request, repo, repository, issue, keeper, lease)
            try:
                claim.announce(request, pinned, ready_taken)
            except ThirdshiftError as error:  # recorded: its end must be too, saying why
                return self._stopped(pinned, TicketProgress(), error)
            return self._tickets(request, pinned)

    def _tickets(self, request: SpecRequest, pinned: Pinned) -> RunOutcome:
        """The Ticket loop, then the end the schedule reached."""
        progress = TicketProgress()
        with ThreadPoolExecutor(request.parallel, thread_name_prefix="thirdshift-ticket") as pool:
            try:
                while True:
                    schedule = self._schedule(request, pinned, progress)
                    for number in schedule.to_close:  # a close lost earlier, done now
                        self._close(pinned, number)
                    interrupted = self._hooks.interrupt.is_set()
                    if not interrupted:
                        for number in schedule.start:
                            self._start(pool, request, pinned, progress, number)
                    if progress.running:
                        self._wait(pinned, progress)
                    elif progress.held and not interrupted:
                        # A Ticket whose crashed Run's Lease has not run out yet: its Rescue
                        # starts here once it has (the records decide, not a guess).
                        self._hooks.interrupt.wait(HELD_SECONDS)
                    else:
                        break
            except ThirdshiftError as error:
                return self._stopped(pinned, progress, error)
        try:
            return self._end(request, pinned, progress, schedule)
        except ThirdshiftError as error:  # nothing runs now: the record says why it ended
            return self._stopped(pinned, progress, error)

    def _stopped(
        self, pinned: Pinned, progress: TicketProgress, error: ThirdshiftError
    ) -> RunOutcome:
        """The loop itself failed (GitHub or the store away past their retries): the running
        Ticket Runs are stopped and salvage their work, what landed meanwhile is recorded, and
        the Spec run ends failed saying why; running it again continues."""
        progress.stop.set()
        cause = self._parts.scrub(f"the Spec run stopped: {error}")
        self.say(cause)
        for number, future in progress.running.items():
            outcome = outcome_of_future(future)
            if outcome.state == RunEnd.MERGED and outcome.run_id is not None:
                self._record_landing(outcome.run_id, number, pinned)
        self._parts.store.finish_run(pinned.record.id, RunState.FAILED, cause=cause)
        self._announce(pinned, RunEnd.FAILED, cause)
        return RunOutcome(RunEnd.FAILED, error.exit_code, run_id=pinned.record.id, cause=cause)

    def _announce(self, pinned: Pinned, state: RunEnd, cause: str) -> None:
        """The Spec run's one message, when it ends before its Spec review (the review's
        delivery announces the ends after it); never raises."""
        parts = self._parts
        try:
            draft = pinned.pull.find()
        except ThirdshiftError:  # GitHub away: the message goes without the Spec PR
            draft = None
        end = AnnouncedEnd(
            pinned.place.issue.html_url,
            state,
            cause,
            pull_request_url=draft.html_url if draft is not None else None,
        )
        announcer = Announcer(parts.store, self._hooks.notifier, parts.scrub, self.say)
        announcer.announce(pinned.record, end)

    def _record_landing(self, run_id: int, number: int, pinned: Pinned) -> Run:
        store = self._parts.store
        run = store.get_run(run_id)
        assert run is not None
        landed = store.record_landing(run.id, run.head_sha or "")
        self.say(f"Ticket #{number} landed in {pinned.branch}")
        return landed

    def _close(self, pinned: Pinned, number: int) -> None:
        """A landed Ticket closed with its comment; a failure is a warning (the next read of
        the graph finds it still open and tries again)."""
        run = self._parts.store.landed_tickets(pinned.repository, pinned.branch).get(number)
        if run is None:
            return
        try:
            pinned.pull.close_ticket(number, run.pull_request_number, run.id)
        except ThirdshiftError as problem:
            self.say(f"warning: closing Ticket #{number} failed: {problem}; trying again later")

    def _schedule(
        self, request: SpecRequest, pinned: Pinned, progress: TicketProgress
    ) -> TicketSchedule:
        """The Tickets read again from GitHub and the records, and the decision on them.
        What an earlier Spec run left is recorded first (a dead Ticket Run crashed, then a
        merge it made landed), so the decision reads a merged Ticket as landed."""
        reads = self._reads(pinned)
        reads.settle(progress, self.say)
        tickets = reads.tickets(request.spec, progress)
        progress.graph = {ticket.number: ticket for ticket in tickets}
        for number in sorted(progress.held - progress.said_held):  # said once, not each look
            progress.said_held.add(number)
            self.say(
                f"Ticket #{number} is held by another Run's Lease; "
                "waiting until it is given up or runs out"
            )
        return schedule_tickets(tickets, request.parallel)

    def _start(
        self,
        pool: ThreadPoolExecutor,
        request: SpecRequest,
        pinned: Pinned,
        progress: TicketProgress,
        number: int,
    ) -> None:
        """A Ticket Run in a thread of its own, from the Spec branch's head, with its own
        interrupt (a lost Lease of one Ticket stops only that Ticket)."""
        before = self._reads(pinned).before_start(number)
        if before.held:  # waited on, and said, as a Ticket the graph's read found held
            progress.held.add(number)
            return
        spec, parts = request.spec, self._parts
        landed = parts.store.landed_tickets(pinned.repository, pinned.branch)
        cap = parts.settings.follow_up_preamble_tokens
        preamble = ticket_brief(
            parts.store,
            parts.github,
            pinned.spec,
            progress.graph,
            number,
            landed,
            progress.prompt_titles,
            cap,
        )
        seen = progress.graph.get(number)
        progress.started_with[number] = (
            {b.number for b in seen.blockers if not b.elsewhere} if seen else set()
        )
        ticket = RunRequest(
            issue=IssueRef(spec.host, spec.owner, spec.repo, number),
            merge=True,
            base=pinned.branch,
            spec_run_id=pinned.record.id,
            preamble=preamble,
            rescue_of=before.rescue_of,
            spec_number=spec.number,
            spec_approved=pinned.approved,
        )
        interrupt = LinkedInterrupt(self._hooks.interrupt, progress.stop)
        # The Spec run is announced once, with a line per Ticket: its Ticket Runs are not.
        hooks = replace(
            self._hooks,
            interrupt=interrupt,
            emit_url=quiet,
            on_recorded=no_record,
            notifier=NO_NOTIFIER,
        )
        if before.rescue_of is None:
            self.say(f"starting Ticket #{number} into {pinned.branch}")
        else:
            self.say(
                f"starting Ticket #{number} into {pinned.branch}, rescuing Run {before.rescue_of}"
            )
        progress.running[number] = pool.submit(self._run_ticket, ticket, hooks)

    def _reads(self, pinned: Pinned) -> TicketReads:
        parts = self._parts
        return TicketReads(
            parts.github,
            parts.store,
            parts.scrub,
            pinned.repository,
            pinned.branch,
            pinned.record.id,
        )

    def _wait(self, pinned: Pinned, progress: TicketProgress) -> None:
        """Until a Ticket Run ends, then what its end means: a landing recorded and said, or
        why it failed. With a Ticket held, no longer than HELD_SECONDS: its Lease is looked at
        again then, not only once a running Ticket Run ends."""
        looks = math.ceil(HELD_SECONDS / WAIT_SECONDS) if progress.held else None
        while True:
            done, _ = wait(
                list(progress.running.values()), WAIT_SECONDS, return_when=FIRST_COMPLETED
            )
            if done:
                break
            if looks is not None:
                looks -= 1
                if looks <= 0:
                    return
        for number, future in list(progress.running.items()):
            if future in done:
                del progress.running[number]
                self._ended(pinned, progress, number, outcome_of_future(future))

    def _ended(
        self, pinned: Pinned, progress: TicketProgress, number: int, outcome: RunOutcome
    ) -> None:
        store = self._parts.store
        run = store.get_run(outcome.run_id) if outcome.run_id is not None else None
        if outcome.state != RunEnd.MERGED or run is None:
            why = self._parts.scrub(outcome.cause or outcome.state)
            waits = self._reads(pinned).new_blockers(pinned.pull.spec, progress, number)
            if waits:  # its Base fix (or a person's re-plan): it runs again after them
                listed = ", ".join(f"#{b}" for b in waits)
                self.say(
                    f"Ticket #{number} did not land: {why}; it waits for {listed}, now "
                    "blocking it in the Spec, and runs again after"
                )
                return
            progress.failed[number] = why
            self.say(f"Ticket #{number} did not land: {why}")
            return
        self._record_landing(run.id, number, pinned)
        self._close(pinned, number)
        try:
            pinned.pull.landed(self._texts(pinned, progress))
        except ThirdshiftError as problem:  # the next landing, or the end, writes it again
            self.say(f"warning: updating the Spec PR failed: {problem}")

    def _texts(self, pinned: Pinned, progress: TicketProgress) -> tuple[TicketText, ...]:
        schedule = schedule_tickets(self._reads(pinned).tickets(pinned.pull.spec, progress), 1)
        landed = self._parts.store.landed_tickets(pinned.repository, pinned.branch)
        pulls = {n: r.pull_request_number for n, r in landed.items() if r.pull_request_number}
        return ticket_texts(schedule, progress.titles, pulls)

    def _review(
        self,
        request: SpecRequest,
        pinned: Pinned,
        progress: TicketProgress,
        texts: tuple[TicketText, ...],
    ) -> RunOutcome:
        """Every Ticket landed: the draft Spec PR brought up to date, then the Spec review
        and the Spec PR delivered by the Run's own steps; once it is ready (or merged) its
        body gets the Tickets' checklist before the review's text."""
        parts = self._parts
        gh = fenced(parts.github, pinned.place.keeper.check)
        draft = pinned.pull.landed(texts)
        landed = parts.store.landed_tickets(pinned.repository, pinned.branch)
        cap = parts.settings.follow_up_preamble_tokens
        prompt = read_spec_review_prompt(
            parts.store,
            parts.github,
            pinned.spec,
            pinned.place,
            landed,
            progress.prompt_titles,
            cap,
        )
        scope = review_scope(pinned.place, pinned.record, gh, prompt, draft, merge=request.merge)
        outcome = self._deliver(scope, self._hooks)
        if outcome.succeeded:
            try:
                pinned.pull.finished(texts)
            except ThirdshiftError as problem:
                self.say(
                    f"warning: writing the Tickets' checklist into the Spec PR failed: {problem}"
                )
        return outcome

    def _end(
        self,
        request: SpecRequest,
        pinned: Pinned,
        progress: TicketProgress,
        schedule: TicketSchedule,
    ) -> RunOutcome:
        """Every Ticket landed: the Spec PR ready. Otherwise a Failed spec run."""
        store, record = self._parts.store, pinned.record
        texts = self._texts(pinned, progress)
        if self._hooks.interrupt.is_set():
            cause = self._hooks.stopped_because() or "interrupted"
            store.finish_run(record.id, RunState.INTERRUPTED, cause=cause)
            self._announce(pinned, RunEnd.INTERRUPTED, cause)
            return RunOutcome(RunEnd.INTERRUPTED, 1, run_id=record.id, cause=cause)
        if schedule.state is SpecRunState.ALL_LANDED:
            return self._review(request, pinned, progress, texts)
        lines = failure_lines(texts)
        for line in lines:
            self.say(line)
        pinned.pull.failed(texts)
        store.finish_run(record.id, RunState.FAILED, cause=lines[-1])
        self._announce(pinned, RunEnd.FAILED, lines[-1])
        return RunOutcome(RunEnd.FAILED, 1, run_id=record.id, cause=lines[-1])
