"""The daemon and Spec runs in process: real polls, the daemon's own choice of a Spec run or a
Run (``bootstrap.spec_or_issue``), the real ``Delivery`` of every Ticket Run, the GitHub fake,
real git and SQLite, scripted sessions keyed by the Ticket."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.orchestration.conftest import BUSY, READY, RunWorld
from tests.orchestration.test_daemon import MAINTAINER, DaemonWorld, daemon_starter
from tests.orchestration.test_spec_runs import (
    _by_ticket,
    _fails,
    _spec,
    _ticket_clock,
    _writes,
)
from thirdshift import bootstrap
from thirdshift.issue_url import IssueRef
from thirdshift.runs import RunHooks, RunOutcome, RunRequest, SpecRequest
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.store import Store


def _spec_starter(world: RunWorld) -> Callable[..., RunOutcome]:
    """The daemon's starter as the composition root builds it: a Spec run when the issue is a
    Spec (or the Rescue of a Spec run), else a Run of the issue."""

    def work(request: RunRequest, hooks: RunHooks) -> RunOutcome:
        parts = world.parts(spec_parallel=2)
        return bootstrap.spec_or_issue(parts, hooks, request, None, _ticket_clock(world))

    return daemon_starter(world, work)


@pytest.fixture
def sdw(world: RunWorld) -> DaemonWorld:
    return DaemonWorld(world, start_run=_spec_starter(world))


def _ready_spec(sdw: DaemonWorld, *titles: str) -> tuple[int, list[int]]:
    """A Spec labelled Ready by a maintainer, its Tickets Ready too (as a hand-over might)."""
    spec, tickets = _spec(sdw.world, *titles)
    sdw.label(spec, READY, MAINTAINER)
    for ticket in tickets:
        sdw.unlabel(ticket, READY, MAINTAINER)
        sdw.label(ticket, READY, MAINTAINER)
    return spec, tickets


def _ticket_runs_by_issue(store: Store, number: int) -> list[tuple[int | None, str]]:
    return [
        (run.parent_run_id, run.state)
        for run in sorted(store.list_runs(), key=lambda r: r.id)
        if run.issue_number == number
    ]


def test_a_ready_spec_runs_as_one_spec_run_and_its_ready_tickets_are_passed_over_naming_it(
    sdw: DaemonWorld,
) -> None:
    """The poll takes the Spec, not its Ready Tickets: each Ticket runs once, as a Ticket Run
    of the one Spec run, and is passed over on its own with one Activity line naming the Spec;
    the Spec is claimed as an issue is (in-progress, one claim comment)."""
    world = sdw.world
    spec, (a, b) = _ready_spec(sdw, "Ticket A", "Ticket B")
    world.sessions.plays["implement"] = _by_ticket({a: _writes("a.txt"), b: _writes("b.txt")})

    assert sdw.daemon.once() == 0, "\n".join(world.lines)

    [spec_run] = [r for r in world.store.list_runs() if r.issue_number == spec]
    assert (spec_run.kind, spec_run.state) == ("spec", "succeeded")
    for ticket in (a, b):
        assert _ticket_runs_by_issue(world.store, ticket) == [(spec_run.id, "succeeded")]
    passed = [line for line in sdw.lines("pass-over") if "Ticket of Spec" in line]
    assert (
        sorted(passed)
        == [f"passed over: it is a Ticket of Spec #{spec}, whose Spec run runs it"] * 2
    )
    assert sdw.lines("end") == [f"Spec run {spec_run.id} ended succeeded"]
    pickups = sdw.lines("pickup")
    assert pickups == ["picked up; starting a Spec run"]
    labels = {label.lower() for label in world.github.issue("acme", "widgets", spec).labels}
    assert BUSY in labels
    assert READY not in labels
    assert len(sdw.claim_comments(spec)) == 1
    assert f"as Run {spec_run.id}" in sdw.claim_comments(spec)[0]
    assert spec_run.text_sha256 is not None

    assert sdw.daemon.once() == 0
    assert len(world.store.list_runs()) == 3  # nothing runs again


def test_a_ticket_is_passed_over_while_its_spec_run_holds_it_even_with_a_lower_number(
    sdw: DaemonWorld,
) -> None:
    """A Ticket numbered below its Spec (the Spec was opened last) is still the Spec run's:
    the poll that takes the Spec passes it over."""
    world = sdw.world
    world.github.merges_into_base = True
    ticket = world.github.add_issue("Ticket first", "Do the first thing.", [])
    spec = world.github.add_issue("A Spec opened later", "The brief.", [])
    world.github.add_sub_issue("acme", "widgets", spec, ticket)
    sdw.label(ticket, READY, MAINTAINER)
    sdw.label(spec, READY, MAINTAINER)
    world.sessions.plays["implement"] = _by_ticket({ticket: _writes("t.txt")})
    world.sessions.plays["spec-review"] = _writes("review.txt")

    assert sdw.daemon.once() == 0, "\n".join(world.lines)

    [spec_run] = [r for r in world.store.list_runs() if r.issue_number == spec]
    assert _ticket_runs_by_issue(world.store, ticket) == [(spec_run.id, "succeeded")]
    assert sdw.lines("pass-over") == [
        f"passed over: it is a Ticket of Spec #{spec}, whose Spec run runs it"
    ]


def _crash(world: RunWorld, run_id: int) -> None:
    """The Run's process died: recorded running, its Lease long run out."""
    store = world.store
    run = store.update_run(run_id, state="running", ended_at=None, cause=None)
    past = world.clock.now() - timedelta(hours=2)
    lease = store.acquire_lease(
        run.repository, run.issue_number, "dead:1", timedelta(minutes=10), now=past
    )
    assert lease is not None
    store.attach_run_to_lease(lease, run.id)


def test_a_crashed_spec_run_is_rescued_on_the_next_poll_and_each_ticket_merges_once(
    sdw: DaemonWorld,
) -> None:
    """The Spec run died after A's pull request merged (before its landing was recorded) and in
    the middle of B: the next poll records both as crashed and Rescues the Spec run, which
    records A's landing without running A again and Rescues B within it; B's crashed Run is
    never Rescued as a Run of its own. Each Ticket ends with exactly one merged pull request."""
    world = sdw.world
    spec, (a, b) = _ready_spec(sdw, "Ticket A", "Ticket B")
    plays = {a: _writes("a.txt"), b: _fails}
    world.sessions.plays["implement"] = _by_ticket(plays)
    assert sdw.daemon.once() == 1  # A lands, B fails: a Failed spec run
    [first] = [r for r in world.store.list_runs() if r.issue_number == spec]
    [a_run] = [r for r in world.store.ticket_runs(first.id) if r.issue_number == a]
    [b_run] = [r for r in world.store.ticket_runs(first.id) if r.issue_number == b]
    assert a_run.landed
    # As a kill -9 would have left it: A merged on GitHub but not recorded as landed, nor
    # closed; B and the Spec run still "running" under Leases that ran out.
    world.store.update_run(a_run.id, landed_sha=None, landed_at=None)
    sdw.close(a)
    gh = world.github
    gh.world.set_state(gh.repo_state, gh.repo_state.issue(a), "open", None, MAINTAINER)
    _crash(world, b_run.id)
    _crash(world, first.id)
    sdw.label(b, BUSY, world.github.login)
    plays[b] = _writes("b.txt")

    assert sdw.daemon.once() == 0, "\n".join(world.lines)

    assert sdw.lines("rescue") == [
        f"Spec run {first.id} crashed; starting a Rescue that continues its work"
    ]
    spec_runs = sorted(
        (r for r in world.store.list_runs() if r.issue_number == spec), key=lambda r: r.id
    )
    assert [(r.kind, r.state) for r in spec_runs] == [("spec", "crashed"), ("spec", "succeeded")]
    assert _ticket_runs_by_issue(world.store, a) == [(first.id, "succeeded")]
    assert world.store.get_run(a_run.id).landed  # type: ignore[union-attr]
    assert _ticket_runs_by_issue(world.store, b) == [
        (first.id, "crashed"),
        (spec_runs[1].id, "succeeded"),
    ]
    assert f"starting Ticket #{b} into spec-{spec}, rescuing Run {b_run.id}" in "\n".join(
        world.lines
    )
    for ticket in (a, b):
        merged = [p for p in gh.pull_requests() if p.head_ref.startswith(f"issue-{ticket}")]
        assert [(p.merged, p.base_ref) for p in merged] == [(True, f"spec-{spec}")]
        assert gh.issue("acme", "widgets", ticket).state == "closed"
    [spec_pull] = [p for p in gh.pull_requests() if p.base_ref == "main"]
    assert (spec_pull.draft, spec_pull.state) == (False, "open")
    assert sum(CLAIM_MARKER in c for c in gh.comments_on(spec)) == 1


def test_a_rescue_records_a_ticket_run_whose_lease_ran_out_after_the_poll_and_rescues_it(
    sdw: DaemonWorld,
) -> None:
    """The poll recorded the dead Spec run while B's Lease still lived, so B's dead Run still
    says running when the Rescue reaches it: the Rescue records it as crashed itself and runs
    B as its Rescue, so B's work continues rather than starting over beside it."""
    world = sdw.world
    spec, (a, b) = _ready_spec(sdw, "Ticket A", "Ticket B")
    plays = {a: _writes("a.txt"), b: _fails}
    world.sessions.plays["implement"] = _by_ticket(plays)
    assert sdw.daemon.once() == 1
    [first] = [r for r in world.store.list_runs() if r.issue_number == spec]
    [b_run] = [r for r in world.store.ticket_runs(first.id) if r.issue_number == b]
    _crash(world, b_run.id)
    _crash(world, first.id)
    assert world.store.record_crash(first.id, "its process died")  # the poll saw only this one
    plays[b] = _writes("b.txt")

    ref = IssueRef("github.test", "acme", "widgets", spec)
    rescue = bootstrap.spec_run(world.parts(), world.hooks(), _ticket_clock(world))
    outcome = rescue.run(SpecRequest(ref, parallel=2, rescue_of=first.id))

    assert outcome.exit_code == 0, "\n".join(world.lines)
    crashed = world.store.get_run(b_run.id)
    assert crashed is not None
    assert (crashed.state, "Lease ran out" in (crashed.cause or "")) == ("crashed", True)
    assert f"starting Ticket #{b} into spec-{spec}, rescuing Run {b_run.id}" in "\n".join(
        world.lines
    )
    assert _ticket_runs_by_issue(world.store, b) == [
        (first.id, "crashed"),
        (outcome.run_id, "succeeded"),
    ]


def test_a_spec_run_is_announced_once_with_a_line_per_ticket_and_no_ticket_run_is(
    world: RunWorld,
) -> None:
    """A fails, B lands: one message, for the Spec run, naming both Tickets; the rerun that
    lands A sends the second, and no Ticket Run sends any."""
    target = world.notify_to()
    spec, (a, b) = _spec(world, "Ticket A", "Ticket B")
    plays = {a: _fails, b: _writes("b.txt")}
    world.sessions.plays["implement"] = _by_ticket(plays)
    sdw = DaemonWorld(world, start_run=_spec_starter(world))
    sdw.label(spec, READY, MAINTAINER)

    assert sdw.daemon.once() == 1

    [(failed, _body)] = target.sent
    assert (failed.kind, failed.state, failed.issue_number) == ("spec", "failed", spec)
    assert failed.tickets[0].startswith(f"#{a} failed: ")
    assert failed.tickets[1].startswith(f"#{b} landed (pull request #")
    plays[a] = _writes("a.txt")
    sdw.label(spec, READY, MAINTAINER)

    assert sdw.daemon.once() == 0, "\n".join(world.lines)

    assert [(n.kind, n.state) for n, _ in target.sent] == [("spec", "failed"), ("spec", "ready")]
    ready = target.sent[1][0]
    assert [line.split(" (")[0] for line in ready.tickets] == [f"#{a} landed", f"#{b} landed"]


def test_a_lease_on_an_issue_outside_the_spec_never_holds_the_spec_run_back(
    world: RunWorld,
) -> None:
    """Another Run holds an issue that is no Ticket: the Spec run does not wait for it; a
    Failed spec run ends at once."""
    spec, (a,) = _spec(world, "Ticket A")
    other = world.github.add_issue("Elsewhere", "Not a Ticket.", [])
    repository = world.store.ensure_repository("acme", "widgets")
    held = world.store.acquire_lease(
        repository, other, "another daemon", timedelta(hours=1), now=world.clock.now()
    )
    assert held is not None
    world.sessions.plays["implement"] = _by_ticket({a: _fails})
    finished = threading.Event()
    outcome: list[RunOutcome] = []

    def run() -> None:
        outcome.append(
            bootstrap.spec_run(world.parts(), world.hooks(), _ticket_clock(world)).run(
                SpecRequest(IssueRef("github.test", "acme", "widgets", spec), parallel=1)
            )
        )
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    # A Spec run that waited for the Lease would not end before it ran out (an hour).
    assert finished.wait(60), "the Spec run waits for a Lease outside its Spec"
    assert outcome[0].state == "failed"


def test_a_ticket_another_run_holds_is_waited_for_saying_so_once_and_runs_when_it_is_free(
    world: RunWorld,
) -> None:
    """Ticket B's Lease is another process's: A runs, the Spec run says once that B is held and
    waits (never failing B); once the Lease is given up, B runs and the Spec run succeeds."""
    spec, (a, b) = _spec(world, "Ticket A", "Ticket B")
    repository = world.store.ensure_repository("acme", "widgets")
    held = world.store.acquire_lease(
        repository, b, "another daemon", timedelta(hours=1), now=world.clock.now()
    )
    assert held is not None
    world.sessions.plays["implement"] = _by_ticket({a: _writes("a.txt"), b: _writes("b.txt")})
    outcome: list[RunOutcome] = []
    ref = IssueRef("github.test", "acme", "widgets", spec)
    thread = threading.Thread(
        target=lambda: outcome.append(
            bootstrap.spec_run(world.parts(), world.hooks(), _ticket_clock(world)).run(
                SpecRequest(ref, parallel=2)
            )
        ),
        daemon=True,
    )
    thread.start()
    waiting = (
        f"Ticket #{b} is held by another Run's Lease; waiting until it is given up or runs out"
    )
    lines = world.lines

    def a_landed_and_b_waits() -> bool:
        return any(waiting in line for line in lines) and any(
            f"Ticket #{a} landed" in line for line in lines
        )

    pause = threading.Event()  # never set: a sleep of 0.1 s
    for _ in range(600):
        if a_landed_and_b_waits() or pause.wait(0.1):
            break
    assert a_landed_and_b_waits(), "\n".join(lines)
    assert outcome == []
    assert world.store.release_lease(held)

    thread.join(120)
    assert [o.state for o in outcome] == ["ready"], "\n".join(lines)
    assert sum(waiting in line for line in lines) == 1
    [(_parent, state)] = _ticket_runs_by_issue(world.store, b)
    assert state == "succeeded"
