"""What a Spec run does next: pure rules over its Tickets, and the name of its Spec branch.

The Spec branch is ``spec-<n>``, numbered ``spec-<n>-branch-<k>`` once a Spec PR of it was
merged or closed: the Issue branch rule of ``runs.rules.branches`` under another prefix.

A Ticket starts when it is open on GitHub, not yet started in this Spec run, and every issue
blocking it is done; lowest number first, up to the parallel limit counting those running. A
blocker outside the Spec is done once GitHub has it closed; a blocker that is a Ticket only once
it landed in the Spec branch (thirdshift's record, not GitHub's closed state: GitHub closes
issues only on merges into the default branch, and a person may close a Ticket that never
landed), so a running blocker always holds its dependents back.

A Ticket that failed, or that a person closed without a landing, is not done: it never starts
again in this Spec run, and it holds back the Tickets that depend on it, directly or through
other Tickets, and only those. A cycle of blockers holds its Tickets back the same way; every
walk of the graph keeps a visited set, so a cycle ends it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from enum import Enum

from thirdshift.records import PullRequestInfo
from thirdshift.runs.rules.branches import (
    BranchChoice,
    branch_name,
    branch_number,
    choose_issue_branch,
)

SPEC_PREFIX = "spec"


def spec_branch_name(spec_number: int, k: int) -> str:
    """``spec-<n>`` for k = 1, else ``spec-<n>-branch-<k>``."""
    return branch_name(spec_number, k, prefix=SPEC_PREFIX)


def spec_branch_number(spec_number: int, branch: str) -> int | None:
    """k of the Spec's branch ``branch`` (1 for ``spec-<n>``), None for any other branch."""
    return branch_number(spec_number, branch, prefix=SPEC_PREFIX)


def choose_spec_branch(
    spec_number: int, remote_branches: Mapping[str, str], pulls: Sequence[PullRequestInfo]
) -> BranchChoice:
    """The Spec branch a Spec run pins at its Claim. ``pulls`` are every pull request (any
    state) whose head is one of this Spec's branches, newest first: a merged or closed Spec PR
    moves the next Spec run to the next number; otherwise it continues the highest one."""
    return choose_issue_branch(spec_number, remote_branches, pulls, prefix=SPEC_PREFIX)


class TicketState(Enum):
    """What thirdshift recorded of a Ticket in this Spec run."""

    NOT_STARTED = "not started"
    RUNNING = "running"
    LANDED = "landed"
    FAILED = "failed"


BlockerKey = int | str


@dataclass(frozen=True)
class Blocker:
    """An issue blocking a Ticket, and whether GitHub has it closed. ``elsewhere``: another
    repository's OWNER/NAME; such a blocker is outside the Spec whatever its number."""

    number: int
    closed: bool
    elsewhere: str = ""

    @property
    def key(self) -> BlockerKey:
        """The number of an issue here (maybe a Ticket); ``OWNER/NAME#n`` of one elsewhere."""
        return f"{self.elsewhere}#{self.number}" if self.elsewhere else self.number


@dataclass(frozen=True)
class Ticket:
    """A Ticket as the Spec run decides on it: GitHub's state and blockers, read again before
    each decision, and what thirdshift recorded of it in this Spec run (``cause``: why its Run
    failed; a Spec run run again passes an earlier one's failed Tickets as not started, so they
    continue). The Tickets are the Spec's open sub-issues and each one this Spec run recorded:
    a sub-issue closed before it is none of them, and as a blocker it is outside the Spec."""

    number: int
    closed: bool
    blockers: tuple[Blocker, ...] = ()
    state: TicketState = TicketState.NOT_STARTED
    cause: str = ""


class Hold(Enum):
    """Why a Ticket cannot start on the Spec run's own progress."""

    FAILED = "failed"  # its Run failed
    CLOSED = "closed"  # a person closed it on GitHub without a landing
    BLOCKED = "blocked"  # it depends on a failed or closed Ticket
    CYCLE = "cycle"  # it is in, or depends on, a cycle of blockers
    OPEN_BLOCKER = "open blocker"  # it depends on an open issue outside the Spec


@dataclass(frozen=True)
class NotDone:
    """A Ticket that cannot start on the Spec run's own progress, and why. ``by``: the
    Tickets (or, for an open blocker, the issues outside the Spec) holding it back, lowest
    first, found directly or through other Tickets."""

    number: int
    hold: Hold
    by: tuple[BlockerKey, ...] = ()
    cause: str = ""

    @property
    def why(self) -> str:
        """Why, in the words of the Failed spec run's list on stderr."""
        listed = _listed(self.by)
        if self.hold is Hold.FAILED:
            return f"failed: {self.cause}" if self.cause else "failed"
        if self.hold is Hold.CLOSED:
            return "closed on GitHub without landing in the Spec branch"
        if self.hold is Hold.BLOCKED:
            verb = "is" if len(self.by) == 1 else "are"
            return f"blocked by {listed}, which {verb} not done"
        if self.hold is Hold.CYCLE:
            where = "in" if self.number in self.by else "blocked by"
            return f"{where} a cycle of blockers ({listed})"
        return f"blocked by {listed}, open outside the Spec"


class SpecRunState(Enum):
    """Where a Spec run stands once its Tickets were scheduled."""

    MORE_CAN_START = "more can start"
    WAITING_ON_RUNNING = "waiting on running Tickets"
    ALL_LANDED = "every Ticket landed"  # on to the Spec review
    FAILED = "failed"  # nothing more can run and a Ticket is not done: a Failed spec run


@dataclass(frozen=True)
class TicketSchedule:
    """The decision, each Ticket in exactly one of ``start``, ``running``, ``waiting`` (it
    starts once Tickets of this Spec run land, or room is free), ``landed`` and ``not_done``;
    all lowest number first. ``to_close``: Tickets landed but still open on GitHub, which
    thirdshift closes (a close lost to a crash after the merge)."""

    state: SpecRunState
    start: tuple[int, ...]
    running: tuple[int, ...]
    waiting: tuple[int, ...]
    landed: tuple[int, ...]
    not_done: tuple[NotDone, ...]
    to_close: tuple[int, ...]


def schedule_tickets(tickets: Iterable[Ticket], parallel: int) -> TicketSchedule:
    """Which Tickets start now, which wait, which are not done, and where the Spec run stands,
    with at most ``parallel`` Tickets running. Independent of the order of ``tickets`` and of
    their blockers."""
    if parallel < 1:
        raise ValueError(f"the parallel limit must be at least 1, not {parallel}")
    graph = _by_number(tickets)
    running = _numbers(graph, TicketState.RUNNING)
    landed = _numbers(graph, TicketState.LANDED)
    pending = {n for n, t in graph.items() if t.state is TicketState.NOT_STARTED and not t.closed}
    not_done = _not_done(graph, pending)
    held = {d.number for d in not_done}
    ready = sorted(n for n in pending - held if _unblocked(graph, graph[n]))
    start = tuple(ready[: max(0, parallel - len(running))])
    waiting = tuple(sorted(pending - held - set(start)))
    if start:
        state = SpecRunState.MORE_CAN_START
    elif running:
        state = SpecRunState.WAITING_ON_RUNNING
    elif len(landed) == len(graph):
        state = SpecRunState.ALL_LANDED
    else:
        state = SpecRunState.FAILED
    to_close = tuple(n for n in landed if not graph[n].closed)
    return TicketSchedule(state, start, running, waiting, landed, not_done, to_close)


def tickets_not_done_line(not_done: Iterable[NotDone]) -> str:
    """The last line a Failed spec run writes on stderr: ``Tickets not done: #3, #5``."""
    numbers = sorted({d.number for d in not_done})
    return "Tickets not done: " + ", ".join(f"#{n}" for n in numbers)


def _by_number(tickets: Iterable[Ticket]) -> dict[int, Ticket]:
    graph: dict[int, Ticket] = {}
    for ticket in tickets:
        if ticket.number in graph:
            raise ValueError(f"Ticket #{ticket.number} is given twice")
        graph[ticket.number] = ticket
    return graph


def _numbers(graph: Mapping[int, Ticket], state: TicketState) -> tuple[int, ...]:
    return tuple(sorted(n for n, t in graph.items() if t.state is state))


def _blockers(ticket: Ticket) -> dict[BlockerKey, bool]:
    """Each blocker's key and whether it is closed; one listed twice is open if either says
    so (a blocker read while it was reopened)."""
    closed: dict[BlockerKey, bool] = {}
    for blocker in ticket.blockers:
        closed[blocker.key] = closed.get(blocker.key, True) and blocker.closed
    return closed


def _ticket(graph: Mapping[int, Ticket], key: BlockerKey) -> Ticket | None:
    """The Ticket a blocker is, or None: an issue outside the Spec (here, or elsewhere)."""
    return graph.get(key) if isinstance(key, int) else None


def _unblocked(graph: Mapping[int, Ticket], ticket: Ticket) -> bool:
    """Every blocker done: a Ticket once landed, an issue outside the Spec once closed."""
    return all(
        found.state is TicketState.LANDED if (found := _ticket(graph, b)) is not None else closed
        for b, closed in _blockers(ticket).items()
    )


def _own_hold(ticket: Ticket) -> NotDone | None:
    """A Ticket not done of itself: its Run failed, or it was closed without starting here."""
    if ticket.state is TicketState.FAILED:
        return NotDone(ticket.number, Hold.FAILED, cause=ticket.cause)
    if ticket.state is TicketState.NOT_STARTED and ticket.closed:
        return NotDone(ticket.number, Hold.CLOSED)
    return None


def _reach(graph: Mapping[int, Ticket], pending: Set[int], number: int) -> frozenset[int]:
    """The pending Tickets ``number`` depends on through pending Tickets; itself only when it
    is in a cycle. Running and finished Tickets end a path: they hold nothing back for good."""
    seen: set[int] = set()
    todo = [number]
    while todo:
        for blocker in _blockers(graph[todo.pop()]):
            if isinstance(blocker, int) and blocker in pending and blocker not in seen:
                seen.add(blocker)
                todo.append(blocker)
    return frozenset(seen)


def _not_done(graph: Mapping[int, Ticket], pending: Set[int]) -> tuple[NotDone, ...]:
    reach = {n: _reach(graph, pending, n) for n in pending}
    cyclic = {n for n in pending if n in reach[n]}
    found: list[NotDone] = []
    for number in sorted(graph):
        own = _own_hold(graph[number])
        held = own or (_held(graph, number, reach, cyclic) if number in pending else None)
        if held is not None:
            found.append(held)
    return tuple(found)


def _held(
    graph: Mapping[int, Ticket],
    number: int,
    reach: Mapping[int, frozenset[int]],
    cyclic: Set[int],
) -> NotDone | None:
    """Why a pending Ticket cannot start on the Spec run's own progress, or None. A failed or
    closed Ticket comes first, then a cycle, then an open issue outside the Spec."""
    chain = reach[number] | {number}
    blockers = [item for n in chain for item in _blockers(graph[n]).items()]
    roots = {
        b for b, _ in blockers if (t := _ticket(graph, b)) is not None and _own_hold(t) is not None
    }
    if roots:
        return NotDone(number, Hold.BLOCKED, _ordered(roots))
    if chain & cyclic:
        return NotDone(number, Hold.CYCLE, tuple(sorted(chain & cyclic)))
    outside = {b for b, closed in blockers if _ticket(graph, b) is None and not closed}
    if outside:
        return NotDone(number, Hold.OPEN_BLOCKER, _ordered(outside))
    return None


def _ordered(keys: Iterable[BlockerKey]) -> tuple[BlockerKey, ...]:
    """This repository's issues by number, then those elsewhere by name."""
    return tuple(sorted(keys, key=lambda k: (0, k, "") if isinstance(k, int) else (1, 0, k)))


def _listed(numbers: Sequence[BlockerKey]) -> str:
    named = [f"#{n}" if isinstance(n, int) else n for n in numbers]
    return " and ".join(named) if len(named) <= 2 else ", ".join(named[:-1]) + " and " + named[-1]
