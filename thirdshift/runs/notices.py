"""Announcing a Run's end to the notification targets, at most once per Run.

The right to announce is taken in the database first (``Store.claim_notice``, one conditional
statement): a Run end recorded twice, two processes, or a daemon restarted after it announced
never send a second message. A message lost because its process died between the mark and the
send is not sent again; ADR 0018 weighs that against a repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from thirdshift.errors import ThirdshiftError
from thirdshift.records import Run
from thirdshift.run_states import RunKind, RunState
from thirdshift.runs.ports import Notifier
from thirdshift.runs.rules.post_mortem import AnnouncedEnd, post_mortem, run_end_notification
from thirdshift.scrub import Scrubber
from thirdshift.store import Store


def announce_run_end(
    *,
    store: Store,
    notifier: Notifier,
    scrub: Scrubber,
    progress: Callable[[str], None],
    run: Run,
    end: AnnouncedEnd,
) -> None:
    """Send the message of ``run``'s end unless it was sent already or no target is
    configured. ``end.report`` is the Post-mortem when the caller has it; else it is read
    here. Never raises."""
    Announcer(store, notifier, scrub, progress).announce(run, end)


@dataclass(frozen=True)
class Announcer:
    """Announces the end of each Run of one process (``say`` takes a warning)."""

    store: Store
    notifier: Notifier
    scrub: Scrubber
    say: Callable[[str], None]

    def announce(self, run: Run, end: AnnouncedEnd) -> None:
        """The message of ``run``'s end, at most once; never raises."""
        store, say = self.store, self.say
        if not self.notifier.configured:
            return
        try:
            if not store.claim_notice(run.id):
                recorded = store.get_run(run.id)
                if recorded is not None and recorded.state == RunState.RUNNING:
                    # Its end could not be recorded (the database failed meanwhile): say so,
                    # since this is when the team most needs to hear of it.
                    say(
                        f"warning: could not announce the end of Run {run.id}: the database "
                        "does not record that it ended"
                    )
                return
            sessions = store.run_sessions(run.id)
        except ThirdshiftError as problem:
            say(f"warning: could not announce the end of Run {run.id}: {problem}")
            return
        report = end.report
        if report is None:
            report = post_mortem(run.id, end.cause, sessions, (), self.scrub)
        costs = [s.usage.cost_usd for s in sessions if s.usage.cost_usd is not None]
        cost = round(sum(costs), 6) if costs else None
        tickets: tuple[str, ...] = ()
        if run.kind == RunKind.SPEC:
            try:  # the whole Spec run: its Ticket Runs' sessions count too
                cost = round(store.run_cost(run.id), 6)
                tickets = spec_ticket_lines(run, store)
            except ThirdshiftError as problem:
                say(f"warning: the message of Spec run {run.id} lacks its Tickets: {problem}")
        self.notifier.notify(
            run_end_notification(
                run_id=run.id,
                repository=run.repository.full_name,
                issue_number=run.issue_number,
                kind=run.kind,
                end=replace(end, report=report),
                cost_usd=cost,
                tickets=tickets,
            )
        )


def spec_ticket_lines(run: Run, store: Store) -> tuple[str, ...]:
    """A line per Ticket of Spec run ``run``: landed in its Spec branch (by it or an earlier
    Spec run) with its pull request, or how its newest Ticket Run in it ended."""
    landed = store.landed_tickets(run.repository, run.issue_branch) if run.issue_branch else {}
    newest = {ticket.issue: ticket for ticket in store.ticket_runs(run.id)}
    lines = []
    for number in sorted({*landed, *newest}):
        if number in landed:
            pull = landed[number].pull_request_number
            lines.append(f"#{number} landed" + (f" (pull request #{pull})" if pull else ""))
            continue
        ticket = newest[number]
        lines.append(f"#{number} {ticket.state}" + (f": {ticket.cause}" if ticket.cause else ""))
    return tuple(lines)
