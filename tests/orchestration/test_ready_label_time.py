"""A Run records when the Ready label it answers was added (`thirdshift report`'s label-to-ready
time), from the labelling its approval check reads under the Lease: no request of its own. On
the GitHub fake, with the Run's real steps and a real SQLite store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.orchestration.test_daemon import MAINTAINER, DaemonWorld
from tests.support.scripted_sessions import commit_file
from thirdshift.issue_url import IssueRef
from thirdshift.records import Run
from thirdshift.run_states import RunState
from thirdshift.runs import RunRequest

LABELLED = datetime(2026, 11, 30, 9, 15, 42, tzinfo=UTC)


@pytest.fixture
def dw(world: RunWorld) -> DaemonWorld:
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    return DaemonWorld(world)


def stamp_labels(world: RunWorld, number: int, *times: datetime) -> None:
    """The issue's ``labeled`` events of the Ready label, oldest first, at ``times``."""
    events = [
        event
        for event in world.github.repo_state.events
        if event.issue_number == number
        and event.event == "labeled"
        and event.label is not None
        and event.label.name == READY
    ]
    assert len(events) == len(times)
    for event, moment in zip(events, times, strict=True):
        event.created_at = moment


def the_run(world: RunWorld, run_id: int | None = None) -> Run:
    runs = world.store.list_runs()
    return runs[0] if run_id is None else next(run for run in runs if run.id == run_id)


def test_a_run_records_when_its_ready_label_was_last_added_from_the_one_read_of_it(
    dw: DaemonWorld,
) -> None:
    """Labelled, unlabelled and labelled again: the Run records the last adding, and reads the
    labelling once, for its approval check."""
    world = dw.world
    number = dw.ready_issue("Add a widget")
    dw.unlabel(number, READY, MAINTAINER)
    dw.label(number, READY, MAINTAINER)
    stamp_labels(world, number, LABELLED - timedelta(days=2), LABELLED)

    assert world.run(number) == 0

    run = the_run(world)
    assert (run.state, run.ready_labelled_at) == ("succeeded", LABELLED)
    assert len(world.github.called("labelling")) == 1


def test_a_daemon_s_pickup_records_the_time_of_the_label_it_picked_up(dw: DaemonWorld) -> None:
    number = dw.ready_issue("Add a widget")
    stamp_labels(dw.world, number, LABELLED)

    assert dw.daemon.once() == 0

    run = the_run(dw.world)
    assert (run.issue_number, run.state, run.ready_labelled_at) == (number, "succeeded", LABELLED)


def test_a_rescue_records_the_label_time_of_the_crashed_run_s_label(dw: DaemonWorld) -> None:
    """The crashed Run took the Ready label off; the label it answered is still the issue's
    last adding of it, and the Rescue that ends the work records its time."""
    number = dw.ready_issue("Half done")
    stamp_labels(dw.world, number, LABELLED)
    dw.world.push_branch("issue-1", "half.txt")
    dead = dw.crashed_run(number, branch="issue-1")

    assert dw.daemon.once() == 0

    rescue = the_run(dw.world)
    assert rescue.id != dead
    assert (rescue.state, rescue.ready_labelled_at) == ("succeeded", LABELLED)


def test_a_run_by_hand_of_an_issue_without_the_ready_label_records_no_label_time(
    world: RunWorld,
) -> None:
    """No label, no approval to check: nothing is read, nothing is recorded (the report counts
    such a Run as unknown)."""
    number = world.github.add_issue("Add a widget", "Please add it.")
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )

    assert world.run(number) == 0

    run = the_run(world)
    assert (run.state, run.ready_labelled_at) == ("succeeded", None)
    assert world.github.called("labelling") == []


def test_a_review_repair_run_records_no_label_time(dw: DaemonWorld) -> None:
    """The Run answering review feedback reads the old label for its approval check, but that
    label asked for the first pull request, not for this Run: it records none, and the first
    Run keeps its own."""
    world = dw.world
    number = dw.ready_issue("Add a widget")
    stamp_labels(world, number, LABELLED)
    assert world.run(number) == 0
    first = the_run(world)
    [pull] = world.github.pull_requests()
    world.github.add_review(pull.number, MAINTAINER, body="Rename it.")
    world.sessions.plays["review-1"] = commit_file("name.txt", "n\n", "Rename it")
    reads = len(world.github.called("labelling"))

    ref = IssueRef("github.test", "acme", "widgets", number)
    outcome = world.delivery().run(RunRequest(issue=ref, review_of=first.id))

    assert outcome.exit_code == 0
    review = the_run(world)
    assert review.id != first.id
    assert "review-1" in world.sessions.prompts
    assert review.ready_labelled_at is None
    assert the_run(world, first.id).ready_labelled_at == LABELLED
    assert len(world.github.called("labelling")) == reads + 1  # the approval check's read


def test_a_label_thirdshift_gave_back_keeps_the_time_a_person_last_asked(dw: DaemonWorld) -> None:
    """thirdshift put the Ready label back (a stopped Run, a claim never recorded): the next
    Run's wait began when the maintainer last labelled the issue, not when thirdshift put the
    label back, nor when an older Run's label was added."""
    world = dw.world
    number = dw.ready_issue("Add a widget")
    repository = world.store.ensure_repository("acme", "widgets")
    older = world.store.start_run(
        repository, number, ready_labelled_at=LABELLED - timedelta(days=7)
    )
    world.store.finish_run(older.id, RunState.FAILED, cause="interrupted")
    dw.unlabel(number, READY, MAINTAINER)
    dw.label(number, READY, world.github.login)
    stamp_labels(world, number, LABELLED, LABELLED + timedelta(hours=3))

    assert world.run(number) == 0

    run = the_run(world)
    assert run.id != older.id
    assert (run.state, run.ready_labelled_at) == ("succeeded", LABELLED)


def test_thirdshift_s_own_label_alone_is_the_time_its_own_request_began(dw: DaemonWorld) -> None:
    """An issue only thirdshift labelled (a Base fix it opened): its own label's time."""
    world = dw.world
    number = dw.ready_issue("Fix the base", labeller=world.github.login)
    stamp_labels(world, number, LABELLED)

    assert world.run(number) == 0

    assert the_run(world).ready_labelled_at == LABELLED
