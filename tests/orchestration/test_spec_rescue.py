"""The Rescue of a Spec run records before it decides (issue 30): a Ticket whose pull request
merged into the Spec branch a moment before the kill is recorded landed, whether its dead Ticket
Run's Lease ran out before the poll, after it, or not yet. In process: the real ``Delivery`` of
every Ticket Run, the GitHub fake, real git and SQLite, scripted sessions keyed by the Ticket."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.orchestration.conftest import BUSY, RunWorld
from tests.orchestration.test_daemon import MAINTAINER, DaemonWorld
from tests.orchestration.test_daemon_specs import (
    _crash,
    _ready_spec,
    _spec_starter,
    _ticket_runs_by_issue,
)
from tests.orchestration.test_spec_runs import _by_ticket, _fails, _ticket_clock, _writes
from thirdshift import bootstrap
from thirdshift.issue_url import IssueRef
from thirdshift.records import Run
from thirdshift.run_states import RunKind
from thirdshift.runs import RunOutcome, SpecRequest
from thirdshift.runs.spec.progress import TicketBefore, TicketReads
from thirdshift.scrub import Scrubber


@pytest.fixture
def rescue_world(world: RunWorld) -> DaemonWorld:
    return DaemonWorld(world, start_run=_spec_starter(world))


def _killed_after_a_merged(sdw: DaemonWorld) -> tuple[int, int, Run, Run]:
    """A Spec run whose process died a moment after Ticket A's Self-merge into the Spec branch
    (A merged on GitHub, not yet recorded landed, nor closed; its Run still ``running``) while B
    worked: the Spec, A, B, the dead Spec run (recorded crashed by the poll) and A's dead Run."""
    world = sdw.world
    spec, (a, b) = _ready_spec(sdw, "Ticket A", "Ticket B")
    plays = {a: _writes("a.txt"), b: _fails}
    world.sessions.plays["implement"] = _by_ticket(plays)
    assert sdw.daemon.once() == 1  # A lands, B fails
    [first] = [r for r in world.store.list_runs() if r.issue_number == spec]
    [a_run] = [r for r in world.store.ticket_runs(first.id) if r.issue_number == a]
    [b_run] = [r for r in world.store.ticket_runs(first.id) if r.issue_number == b]
    assert a_run.landed
    world.store.update_run(
        a_run.id, state="running", ended_at=None, cause=None, landed_sha=None, landed_at=None
    )
    gh = world.github
    gh.world.set_state(gh.repo_state, gh.repo_state.issue(a), "open", None, MAINTAINER)
    sdw.label(a, BUSY, gh.login)
    _crash(world, b_run.id)
    _crash(world, first.id)
    assert world.store.record_crash(first.id, "its process died")  # all the poll recorded
    plays[b] = _writes("b.txt")
    return spec, a, first, a_run


def _rescue(world: RunWorld, spec: int, crashed: int) -> RunOutcome:
    ref = IssueRef("github.test", "acme", "widgets", spec)
    rescue = bootstrap.spec_run(world.parts(), world.hooks(), _ticket_clock(world))
    return rescue.run(SpecRequest(ref, parallel=2, rescue_of=crashed))


def _merged_pulls(world: RunWorld, ticket: int) -> list[tuple[bool, str]]:
    return [
        (p.merged, p.base_ref)
        for p in world.github.pull_requests()
        if p.head_ref.startswith(f"issue-{ticket}")
    ]


def test_a_ticket_merged_before_the_kill_is_recorded_landed_when_its_lease_ran_out_after_the_poll(
    rescue_world: DaemonWorld,
) -> None:
    """A's dead Run still says running (its Lease ran out after the poll): the Rescue records
    it as crashed first and only then reads the landings, so A is recorded landed (one merged
    pull request, one Ticket Run) and never run again; the Spec run ends ready."""
    world = rescue_world.world
    spec, a, first, a_run = _killed_after_a_merged(rescue_world)
    _crash(world, a_run.id)  # running, its Lease run out since the poll looked

    outcome = _rescue(world, spec, first.id)

    assert outcome.state == "ready", "\n".join(world.lines)
    recorded = world.store.get_run(a_run.id)
    assert recorded is not None
    assert (recorded.state, recorded.landed) == ("crashed", True)
    assert _ticket_runs_by_issue(world.store, a) == [(first.id, "crashed")]
    assert _merged_pulls(world, a) == [(True, f"spec-{spec}")]
    assert (
        f"Ticket #{a} landed in spec-{spec} before Run {a_run.id} could record it; recorded now"
        in world.lines
    )
    assert world.github.issue("acme", "widgets", a).state == "closed"


def test_a_ticket_merged_before_the_kill_is_recorded_landed_while_its_dead_run_holds_its_lease(
    rescue_world: DaemonWorld,
) -> None:
    """A's dead Run still holds its Lease (renewed a moment before the kill): its pull request
    merged into the Spec branch, so A is recorded landed whatever its Lease says; the Rescue
    neither waits for the Lease nor runs A again, and the Spec run ends ready."""
    world = rescue_world.world
    spec, a, first, a_run = _killed_after_a_merged(rescue_world)
    lease = world.store.acquire_lease(
        a_run.repository, a, "dead:1", timedelta(hours=1), now=world.clock.now()
    )
    assert lease is not None
    assert world.store.attach_run_to_lease(lease, a_run.id)
    outcome: list[RunOutcome] = []
    thread = threading.Thread(
        target=lambda: outcome.append(_rescue(world, spec, first.id)), daemon=True
    )

    thread.start()
    thread.join(90)  # a Rescue that waited for the Lease would wait its hour

    assert [o.state for o in outcome] == ["ready"], "\n".join(world.lines)
    recorded = world.store.get_run(a_run.id)
    assert recorded is not None
    # Its Lease still lives, so only the poll that finds it run out records the crash.
    assert (recorded.state, recorded.landed) == ("running", True)
    assert _ticket_runs_by_issue(world.store, a) == [(first.id, "running")]
    assert _merged_pulls(world, a) == [(True, f"spec-{spec}")]
    assert not any(f"Ticket #{a} is held" in line for line in world.lines)


def test_a_ticket_whose_earlier_run_still_holds_a_live_lease_is_held_then_rescued(
    world: RunWorld,
) -> None:
    """The graph's read may find a Ticket's Lease run out a moment before the Ticket starts,
    and the Lease live again when it does: while the Ticket's newest Run holds a live Lease the
    Ticket waits (no fresh Run beside it); once the Lease runs out, that Run is recorded crashed
    and the Ticket Run is its Rescue."""
    store = world.store
    repository = store.ensure_repository("acme", "widgets")
    spec_run = store.start_run(repository, 1, kind=RunKind.SPEC)
    earlier = store.start_run(
        repository, 2, kind=RunKind.MERGE, base_branch="spec-1", parent_run_id=spec_run.id
    )
    lease = store.acquire_lease(repository, 2, "other:1", timedelta(seconds=30))
    assert lease is not None
    assert store.attach_run_to_lease(lease, earlier.id)
    rescue = store.start_run(repository, 1, kind=RunKind.SPEC)
    reads = TicketReads(
        world.github, store, Scrubber([]), repository, "spec-1", spec_run_id=rescue.id
    )

    assert reads.before_start(2) == TicketBefore(held=True)
    assert (store.get_run(earlier.id) or earlier).state == "running"

    world.clock.advance(31)
    assert reads.before_start(2) == TicketBefore(rescue_of=earlier.id)
    assert (store.get_run(earlier.id) or earlier).state == "crashed"
    # A Ticket with no Run of this Spec branch starts fresh.
    assert reads.before_start(3) == TicketBefore()


def test_a_ticket_whose_lease_lives_again_as_it_starts_waits_then_is_its_dead_runs_rescue(
    rescue_world: DaemonWorld,
) -> None:
    """The Rescue's read of the graph finds B's Lease given up, and B's earlier Run holds it
    again a moment later, before B starts: B does not start a Run beside that one. It waits,
    said once, while the Lease lives; once it is given up for good, that Run is recorded
    crashed and B's Run is its Rescue. (``SpecRun._start``'s look; the rule's own test is
    above.)"""
    world = rescue_world.world
    spec, a, first, _a_run = _killed_after_a_merged(rescue_world)
    store = world.store
    [b_run] = [
        r for r in store.ticket_runs(first.id) if r.issue_number != a and r.state == "running"
    ]
    b = b_run.issue
    held = store.acquire_lease(b_run.repository, b, "other:1", timedelta(hours=1))
    assert held is not None
    assert store.attach_run_to_lease(held, b_run.id)
    leases = [held]
    steps: list[str] = []

    def flip(called: str) -> None:
        """The Lease given up after the records were settled and before the graph's read (at
        A's pull request, read while settling), taken again after it (at the Spec's
        sub-issues), and given up for good at the next read of the graph."""
        if called == "pull" and steps == []:
            steps.append("given up")
            assert store.release_lease(leases[-1])
        elif called == "sub_issues" and steps == ["given up"]:
            steps.append("taken again")
            again = store.acquire_lease(b_run.repository, b, "other:1", timedelta(hours=1))
            assert again is not None
            assert store.attach_run_to_lease(again, b_run.id)
            leases.append(again)
        elif called == "sub_issues" and steps == ["given up", "taken again"]:
            steps.append("given up for good")
            assert store.release_lease(leases[-1])

    world.github.on_call = flip
    outcome = _rescue(world, spec, first.id)

    assert outcome.state == "ready", "\n".join(world.lines)
    assert steps == ["given up", "taken again", "given up for good"]
    held_lines = [line for line in world.lines if f"Ticket #{b} is held" in line]
    assert len(held_lines) == 1, "\n".join(world.lines)
    assert f"a Rescue of Run {b_run.id}, which crashed" in world.lines
    recorded = store.get_run(b_run.id)
    assert recorded is not None
    assert recorded.state == "crashed"
    # B's earlier Run, then exactly one Run of this Rescue: none started beside the live one.
    rescue_runs = [r for r in store.list_runs() if r.kind == "spec" and r.id != first.id]
    assert [parent for parent, _ in _ticket_runs_by_issue(store, b)] == [
        first.id,
        rescue_runs[0].id,
    ]
