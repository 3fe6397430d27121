"""The Spec run's rules: the Spec branch's name, and which Tickets start, wait or are not done,
with where the Spec run stands. Examples first, then properties over any graph of Tickets."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thirdshift.records import PullRequestInfo
from thirdshift.runs.rules.branches import branch_number, choose_issue_branch
from thirdshift.runs.rules.tickets import (
    Blocker,
    Hold,
    NotDone,
    SpecRunState,
    Ticket,
    TicketSchedule,
    TicketState,
    choose_spec_branch,
    schedule_tickets,
    spec_branch_name,
    spec_branch_number,
    tickets_not_done_line,
)

NOT_STARTED = TicketState.NOT_STARTED
RUNNING = TicketState.RUNNING
LANDED = TicketState.LANDED
FAILED = TicketState.FAILED


def pull(head: str, *, state: str = "open", merged: bool = False) -> PullRequestInfo:
    """A Spec PR of ``head`` (a draft until every Ticket landed)."""
    url = "https://github.com/o/r/pull/1"
    return PullRequestInfo(1, url, state, merged, True, head, "a" * 40, "main", "t", "b", True, "")


def ticket(
    number: int,
    *blockers: int,
    state: TicketState = NOT_STARTED,
    closed: bool = False,
    cause: str = "",
    closed_blockers: tuple[int, ...] = (),
) -> Ticket:
    """A Ticket blocked by ``blockers`` (open on GitHub) and ``closed_blockers`` (closed)."""
    listed = (*(Blocker(b, False) for b in blockers), *(Blocker(b, True) for b in closed_blockers))
    return Ticket(number, closed, listed, state, cause)


def by_number(schedule: TicketSchedule) -> dict[int, NotDone]:
    return {d.number: d for d in schedule.not_done}


# The Spec branch


def test_a_spec_branch_is_spec_n_and_numbered_from_two() -> None:
    assert spec_branch_name(5, 1) == "spec-5"
    assert spec_branch_name(5, 3) == "spec-5-branch-3"


@pytest.mark.parametrize(
    ("branch", "number"),
    [("spec-5", 1), ("spec-5-branch-12", 12), ("spec-50", None), ("issue-5", None)],
)
def test_only_this_specs_branch_names_count(branch: str, number: int | None) -> None:
    """spec-50 and the Spec's own Issue branch are not its Spec branches (the spelling of the
    number is the Issue branch rule's, tested there)."""
    assert spec_branch_number(5, branch) == number


def test_a_spec_branch_is_never_taken_for_an_issue_branch() -> None:
    """The prefix keeps the two rules apart: issue 5's Run never continues spec-5."""
    assert branch_number(5, "spec-5") is None
    assert choose_issue_branch(5, {"spec-5": "y"}, []).branch == "issue-5"


def test_nothing_used_yet_gives_a_fresh_spec_branch() -> None:
    choice = choose_spec_branch(5, {"main": "x", "issue-5": "y"}, [])
    assert (choice.branch, choice.continuation) == ("spec-5", False)


def test_a_spec_branch_without_a_done_spec_pr_is_continued() -> None:
    """An earlier Spec run's Tickets landed there: the next Spec run builds on them."""
    open_pr = pull("spec-5")
    choice = choose_spec_branch(5, {"spec-5": "y"}, [open_pr])
    assert (choice.branch, choice.continuation, choice.open_pull) == ("spec-5", True, open_pr)


@pytest.mark.parametrize("merged", [True, False])
def test_after_a_merged_or_closed_spec_pr_the_next_number_is_used(merged: bool) -> None:
    done = pull("spec-5", state="closed", merged=merged)
    choice = choose_spec_branch(5, {"spec-5": "y"}, [done])
    assert (choice.branch, choice.continuation) == ("spec-5-branch-2", False)


# Which Tickets start


def test_tickets_without_blockers_start_lowest_number_first_up_to_the_limit() -> None:
    schedule = schedule_tickets([ticket(9), ticket(3), ticket(7), ticket(5)], parallel=3)
    assert schedule.start == (3, 5, 7)
    assert schedule.waiting == (9,)
    assert schedule.state is SpecRunState.MORE_CAN_START


def test_running_tickets_count_against_the_limit() -> None:
    schedule = schedule_tickets([ticket(1, state=RUNNING), ticket(2), ticket(3)], parallel=2)
    assert (schedule.start, schedule.running, schedule.waiting) == ((2,), (1,), (3,))


def test_more_running_than_the_limit_starts_nothing() -> None:
    """A lower limit on a continued Spec run lets the running ones finish, starting none."""
    running = [ticket(n, state=RUNNING) for n in (1, 2, 3)]
    schedule = schedule_tickets([*running, ticket(4)], parallel=2)
    assert schedule.start == ()
    assert schedule.state is SpecRunState.WAITING_ON_RUNNING


def test_a_and_b_start_at_once_and_c_blocked_by_both_waits() -> None:
    """The acceptance Spec: C starts only after A and B both landed."""
    a, b, c = 11, 12, 13
    first = schedule_tickets([ticket(a), ticket(b), ticket(c, a, b)], parallel=3)
    assert (first.start, first.waiting) == ((a, b), (c,))
    one_landed = [ticket(a, state=LANDED, closed=True), ticket(b, state=RUNNING), ticket(c, a, b)]
    second = schedule_tickets(one_landed, parallel=3)
    assert (second.start, second.waiting, second.state) == (
        (),
        (c,),
        SpecRunState.WAITING_ON_RUNNING,
    )
    both = [ticket(a, state=LANDED, closed=True), ticket(b, state=LANDED, closed=True)]
    third = schedule_tickets([*both, ticket(c, a, b)], parallel=3)
    assert third.start == (c,)


def test_a_running_blocker_holds_back_its_dependents_even_when_closed_on_github() -> None:
    """Closed on GitHub is not landed: its work is not in the Spec branch yet."""
    schedule = schedule_tickets([ticket(1, state=RUNNING, closed=True), ticket(2, 1)], 3)
    assert (schedule.start, schedule.waiting) == ((), (2,))


def test_a_landed_blocker_counts_before_thirdshift_closed_it_and_is_closed_again() -> None:
    """Landing is thirdshift's record; a close lost to a crash after the merge is redone."""
    schedule = schedule_tickets([ticket(1, state=LANDED, closed=False), ticket(2, 1)], 3)
    assert schedule.start == (2,)
    assert schedule.to_close == (1,)


def test_a_blocker_outside_the_spec_counts_once_closed() -> None:
    closed = schedule_tickets([ticket(2, closed_blockers=(40,))], parallel=3)
    assert closed.start == (2,)
    still_open = schedule_tickets([ticket(2, 40), ticket(3, state=RUNNING)], parallel=3)
    assert still_open.start == ()
    assert still_open.not_done == (NotDone(2, Hold.OPEN_BLOCKER, (40,)),)
    assert still_open.state is SpecRunState.WAITING_ON_RUNNING


def test_an_open_blocker_elsewhere_holds_a_ticket_though_a_landed_ticket_has_its_number() -> None:
    """Issue #1 of another repository is not Ticket #1: open, it holds Ticket 2 back (named
    with its repository); closed, Ticket 2 starts, even with Ticket 1 not landed."""
    elsewhere = Blocker(1, False, elsewhere="acme/gadgets")
    held = schedule_tickets([ticket(1, state=LANDED), Ticket(2, False, (elsewhere,))], 3)
    assert held.start == ()
    [not_done] = held.not_done
    assert not_done == NotDone(2, Hold.OPEN_BLOCKER, ("acme/gadgets#1",))
    assert not_done.why == "blocked by acme/gadgets#1, open outside the Spec"

    closed = replace(elsewhere, closed=True)
    free = schedule_tickets([ticket(1, state=RUNNING), Ticket(2, False, (closed,))], 3)
    assert free.start == (2,)


def test_open_blockers_here_and_elsewhere_are_named_here_first() -> None:
    blockers = (Blocker(40, False), Blocker(7, False, elsewhere="acme/gadgets"), Blocker(9, False))
    schedule = schedule_tickets([Ticket(2, False, blockers)], 3)
    assert (
        schedule.not_done[0].why == "blocked by #9, #40 and acme/gadgets#7, open outside the Spec"
    )


def test_a_blocker_listed_twice_is_open_if_either_says_so() -> None:
    both = Ticket(2, False, (Blocker(40, True), Blocker(40, False)))
    assert schedule_tickets([both], parallel=1).start == ()


def test_a_ticket_waits_on_a_blocker_waiting_for_room() -> None:
    """Not a hold: it starts once its blocker has run and landed."""
    schedule = schedule_tickets([ticket(1, state=RUNNING), ticket(2), ticket(3, 2)], parallel=1)
    assert (schedule.start, schedule.waiting, schedule.not_done) == ((), (2, 3), ())


# Failures, closes and cycles


def test_a_failed_ticket_blocks_its_dependents_directly_and_transitively_naming_it() -> None:
    """Only those: an independent Ticket still starts."""
    tickets = [
        ticket(1, state=FAILED, cause="CI stayed red"),
        ticket(2, 1),
        ticket(3, 2),
        ticket(4),
    ]
    schedule = schedule_tickets(tickets, parallel=3)
    assert schedule.start == (4,)
    assert by_number(schedule) == {
        1: NotDone(1, Hold.FAILED, cause="CI stayed red"),
        2: NotDone(2, Hold.BLOCKED, (1,)),
        3: NotDone(3, Hold.BLOCKED, (1,)),
    }


def test_a_failed_ticket_is_not_started_again_in_the_same_spec_run() -> None:
    schedule = schedule_tickets([ticket(1, state=FAILED, cause="budget")], parallel=3)
    assert schedule.start == ()
    assert schedule.state is SpecRunState.FAILED


def test_a_ticket_closed_without_a_landing_is_not_done_and_holds_back_dependents() -> None:
    """It is not started again, and what depends on it would build on work never landed."""
    schedule = schedule_tickets([ticket(1, closed=True), ticket(2, 1), ticket(3)], parallel=3)
    assert schedule.start == (3,)
    assert by_number(schedule) == {
        1: NotDone(1, Hold.CLOSED),
        2: NotDone(2, Hold.BLOCKED, (1,)),
    }


def test_a_cycle_of_blockers_is_reported_blocked_and_so_is_what_depends_on_it() -> None:
    tickets = [ticket(4, 5), ticket(5, 4), ticket(6, 5), ticket(7, 7), ticket(8)]
    schedule = schedule_tickets(tickets, parallel=3)
    assert schedule.start == (8,)
    assert by_number(schedule) == {
        4: NotDone(4, Hold.CYCLE, (4, 5)),
        5: NotDone(5, Hold.CYCLE, (4, 5)),
        6: NotDone(6, Hold.CYCLE, (4, 5)),
        7: NotDone(7, Hold.CYCLE, (7,)),
    }
    assert by_number(schedule)[6].why == "blocked by a cycle of blockers (#4 and #5)"
    assert by_number(schedule)[7].why == "in a cycle of blockers (#7)"


def test_a_cycle_through_a_running_ticket_only_waits() -> None:
    """The running one may still land, and then the other starts."""
    schedule = schedule_tickets([ticket(1, 2, state=RUNNING), ticket(2, 1)], parallel=3)
    assert (schedule.waiting, schedule.not_done) == ((2,), ())


def test_a_failed_ticket_comes_before_a_cycle_and_an_open_blocker_as_the_reason() -> None:
    tickets = [ticket(1, state=FAILED), ticket(2, 1, 3, 40), ticket(3, 2)]
    assert by_number(schedule_tickets(tickets, parallel=3))[2] == NotDone(2, Hold.BLOCKED, (1,))


# Where the Spec run stands


def test_every_ticket_landed_goes_to_the_spec_review() -> None:
    landed = [ticket(n, state=LANDED, closed=True) for n in (1, 2)]
    schedule = schedule_tickets(landed, parallel=3)
    assert schedule.state is SpecRunState.ALL_LANDED
    assert (schedule.landed, schedule.start, schedule.not_done) == ((1, 2), (), ())


def test_nothing_more_to_run_with_tickets_not_done_is_a_failed_spec_run_saying_why() -> None:
    tickets = [
        ticket(1, state=LANDED, closed=True),
        ticket(2, state=FAILED, cause="the Repair budget is spent"),
        ticket(3, 2),
        ticket(4, closed=True),
        ticket(5, 40),
    ]
    schedule = schedule_tickets(tickets, parallel=3)
    assert schedule.state is SpecRunState.FAILED
    assert [(d.number, d.why) for d in schedule.not_done] == [
        (2, "failed: the Repair budget is spent"),
        (3, "blocked by #2, which is not done"),
        (4, "closed on GitHub without landing in the Spec branch"),
        (5, "blocked by #40, open outside the Spec"),
    ]
    assert tickets_not_done_line(schedule.not_done) == "Tickets not done: #2, #3, #4, #5"


def test_a_ticket_behind_several_failed_ones_names_them_all() -> None:
    tickets = [ticket(1, state=FAILED), ticket(2, state=FAILED), ticket(3, 1, 2), ticket(9, 3)]
    schedule = by_number(schedule_tickets(tickets, parallel=3))
    assert schedule[9].why == "blocked by #1 and #2, which are not done"
    assert schedule[2].why == "failed"


def test_the_parallel_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        schedule_tickets([ticket(1)], parallel=0)


def test_a_ticket_given_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="#1 is given twice"):
        schedule_tickets([ticket(1), ticket(1, state=RUNNING)], parallel=3)


# Properties over any graph of Tickets: blockers among the Tickets and outside (40-43), cycles
# and self-blocks included.

blockers = st.lists(
    st.builds(Blocker, st.sampled_from([*range(1, 9), 40, 41, 42, 43]), st.booleans()),
    max_size=4,
)
graphs = st.lists(
    st.builds(
        Ticket,
        st.integers(min_value=1, max_value=8),
        st.booleans(),
        blockers.map(tuple),
        st.sampled_from(list(TicketState)),
        st.sampled_from(["", "a cause"]),
    ),
    max_size=8,
    unique_by=lambda t: t.number,
)


limits = st.integers(min_value=1, max_value=4)
over_any_graph = settings(max_examples=300, deadline=None)


def _landed(t: Ticket) -> bool:
    return t.state is LANDED


@over_any_graph
@given(tickets=graphs, parallel=limits)
def test_never_more_tickets_running_than_the_limit(tickets: list[Ticket], parallel: int) -> None:
    schedule = schedule_tickets(tickets, parallel)
    assert len(schedule.start) <= max(0, parallel - len(schedule.running))


@over_any_graph
@given(tickets=graphs, parallel=limits)
def test_a_started_ticket_is_open_new_and_every_blocker_is_done(
    tickets: list[Ticket], parallel: int
) -> None:
    """Done: a Ticket once landed, an issue outside the Spec once closed."""
    graph = {t.number: t for t in tickets}
    for number in schedule_tickets(tickets, parallel).start:
        started = graph[number]
        assert (started.state, started.closed) == (NOT_STARTED, False)
        for blocker in started.blockers:
            assert _landed(graph[blocker.number]) if blocker.number in graph else blocker.closed


@over_any_graph
@given(tickets=graphs, parallel=limits)
def test_a_ticket_behind_a_failed_one_never_starts_and_names_it(
    tickets: list[Ticket], parallel: int
) -> None:
    graph = {t.number: t for t in tickets}
    failed = {t.number for t in tickets if t.state is FAILED}
    pending = {t.number for t in tickets if t.state is NOT_STARTED and not t.closed}
    behind: set[int] = set()
    grew = True
    while grew:
        more = {n for n in pending if {b.number for b in graph[n].blockers} & (failed | behind)}
        grew = not more <= behind
        behind |= more
    schedule = schedule_tickets(tickets, parallel)
    held = by_number(schedule)
    for number in behind:
        assert number not in schedule.start
        assert held[number].hold is Hold.BLOCKED
        assert set(held[number].by) & failed


@over_any_graph
@given(tickets=graphs, parallel=limits, shuffled=st.randoms())
def test_the_schedule_does_not_depend_on_the_order_of_tickets_or_blockers(
    tickets: list[Ticket], parallel: int, shuffled: random.Random
) -> None:
    reordered = [
        replace(t, blockers=tuple(shuffled.sample(t.blockers, len(t.blockers))))
        for t in shuffled.sample(tickets, len(tickets))
    ]
    assert schedule_tickets(reordered, parallel) == schedule_tickets(tickets, parallel)


@over_any_graph
@given(tickets=graphs, parallel=limits)
def test_each_ticket_is_in_exactly_one_place_and_the_state_follows(
    tickets: list[Ticket], parallel: int
) -> None:
    """A Failed spec run leaves nothing waiting: each Ticket not landed is not done, with why."""
    s = schedule_tickets(tickets, parallel)
    places = [*s.start, *s.running, *s.waiting, *s.landed, *(d.number for d in s.not_done)]
    assert sorted(places) == sorted(t.number for t in tickets)
    if s.state is SpecRunState.FAILED:
        assert (s.start, s.running, s.waiting) == ((), (), ())
        assert s.not_done
        assert all(d.why for d in s.not_done)
    assert (s.state is SpecRunState.ALL_LANDED) == all(_landed(t) for t in tickets)
