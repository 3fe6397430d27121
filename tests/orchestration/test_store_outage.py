"""A database that refuses for a while during a Run (adr/0028): a store error is not a lost
Lease, and a Run's endings wait for the store within salvage_wait_seconds."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.support.scripted_sessions import commit_file
from tests.support.store_outage import Outage, store_with_outage


def _with_outage(world: RunWorld, outage: Outage) -> None:
    """The world's Run and sessions on a store that ``outage`` may refuse."""
    url = f"sqlite:///{world.settings.home / 'outage.db'}"
    world.store.close()
    world.store = store_with_outage(url, world.clock, outage)
    world.sessions.store = world.store


def _implement_then(world: RunWorld, after: list[bool]) -> None:
    play = commit_file("widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT)

    def implement(worktree: Path, prompt: str) -> str | None:
        message = play(worktree, prompt)
        after.append(True)
        return message

    world.sessions.plays["implement"] = implement


def test_a_store_outage_at_the_fence_is_not_a_lost_lease(world: RunWorld) -> None:
    """Leases cannot be read for 20 s from the session's end: the fence asks again while the
    Lease's last known expiry is ahead, and the Run ends with its pull request."""
    done: list[bool] = []
    outage = Outage(world.clock, 20, lambda sql: "claims" in sql, begins=lambda: bool(done))
    _with_outage(world, outage)
    _implement_then(world, done)
    number = world.github.add_issue("Add a widget", "Please add a widget.", labels=[READY])

    assert world.run(number) == 0

    assert outage.refused > 0
    [run] = world.store.list_runs()
    assert run.state == "succeeded"
    assert len(world.github.pull_requests()) == 1
    assert world.failure_comments(number) == []


def test_a_store_outage_past_the_lease_s_expiry_is_a_lost_lease(world: RunWorld) -> None:
    """Leases cannot be read for longer than the Lease lasts: past its last known expiry the
    Lease may be another Run's, so nothing more is written to GitHub."""
    done: list[bool] = []
    outage = Outage(world.clock, 7200, lambda sql: "claims" in sql, begins=lambda: bool(done))
    _with_outage(world, outage)
    _implement_then(world, done)
    number = world.github.add_issue("Add a widget", "Please add a widget.", labels=[READY])

    assert world.run(number) == 1

    [run] = world.store.list_runs()
    assert run.state == "failed"
    assert run.cause is not None
    assert "lost the Lease" in run.cause
    assert world.github.pull_requests() == []


def test_a_store_outage_at_the_run_s_end_still_records_it_and_releases_the_lease(
    world: RunWorld,
) -> None:
    """The database refuses everything for 20 s once the pull request is open: the Run's
    success is recorded and its Lease given up once the store is back, not left for a reaper."""
    outage = Outage(world.clock, 20, begins=lambda: bool(world.github.pull_requests()))
    _with_outage(world, outage)
    _implement_then(world, [])
    number = world.github.add_issue("Add a widget", "Please add a widget.", labels=[READY])

    assert world.run(number) == 0

    assert outage.refused > 0
    [run] = world.store.list_runs()
    assert run.state == "succeeded"
    assert run.pull_request_number == world.github.pull_requests()[0].number
    repository = world.store.ensure_repository("acme", "widgets")
    assert world.store.lease_of(repository, number) is None
