"""A Ticket Run's Ticket preamble (adr/0032): the Spec's brief and what the Tickets it is
blocked by did, from thirdshift's records, put before its opening prompt. The rendering and its
cap are ``sessions.spec_preamble``'s; this module picks the Tickets and reads their outcomes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from thirdshift.records import Run
from thirdshift.runs.ports import PullRequests
from thirdshift.runs.rules.tickets import Ticket
from thirdshift.sessions.spec_preamble import (
    SpecBrief,
    TicketEnding,
    TicketOutcome,
    ticket_preamble,
)
from thirdshift.store import Store


@dataclass(frozen=True)
class IssueSpec:
    """The Spec as a Ticket preamble names it: where it lives, and its brief."""

    owner: str
    repo: str
    brief: SpecBrief


def blockers_of(graph: Mapping[int, Ticket], number: int) -> tuple[list[int], list[int]]:
    """The Tickets ``number`` is blocked by directly, and those further back (its blockers'
    blockers, and so on), nearest first; a cycle ends the walk (a visited set)."""
    direct = sorted(
        (b.number for b in graph[number].blockers if not b.elsewhere and b.number in graph),
        reverse=True,
    )
    seen, further, frontier = {number, *direct}, [], direct
    while frontier:
        following: list[int] = []
        for ticket in frontier:
            here = (b.number for b in graph[ticket].blockers if not b.elsewhere)
            for blocker in sorted(here, reverse=True):
                if blocker in graph and blocker not in seen:
                    seen.add(blocker)
                    further.append(blocker)
                    following.append(blocker)
        frontier = following
    return direct, further


def ticket_brief(
    store: Store,
    github: PullRequests,
    spec: IssueSpec,
    graph: Mapping[int, Ticket],
    number: int,
    landed: Mapping[int, Run],
    titles: Mapping[int, str],
    cap_tokens: int,
) -> str:
    """The Ticket preamble of Ticket ``number`` (unscrubbed: the session scrubs its prompt)."""
    direct, further = blockers_of(graph, number)

    def outcome(ticket: int) -> TicketOutcome:
        return outcome_of_ticket(store, github, spec, ticket, landed, titles)

    return ticket_preamble(
        spec.brief,
        [outcome(t) for t in direct],
        [outcome(t) for t in further],
        cap_tokens=cap_tokens,
    )


def outcome_of_ticket(
    store: Store,
    github: PullRequests,
    spec: IssueSpec,
    ticket: int,
    landed: Mapping[int, Run],
    titles: Mapping[int, str],
) -> TicketOutcome:
    """What a Ticket's Run did, from thirdshift's records: its pull request and the gist of
    its last session's final message once it landed; not done otherwise."""
    run = landed.get(ticket)
    if run is None:
        return TicketOutcome(ticket, titles.get(ticket, ""), TicketEnding.NOT_DONE)
    sessions = store.run_sessions(run.id)
    gist = next((s.final_message for s in reversed(sessions) if s.final_message), "")
    title = url = ""
    if run.pull_request_number is not None:
        pull = github.pull(spec.owner, spec.repo, run.pull_request_number)
        title, url = pull.title, pull.html_url
    return TicketOutcome(
        ticket, titles.get(ticket, ""), TicketEnding.LANDED, title, url, gist or ""
    )
