"""The store's Spec run records (migration 0011), one body run on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from thirdshift.errors import StoreError
from thirdshift.records import Usage
from thirdshift.run_states import RunState
from thirdshift.store import Store


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def test_ticket_runs_are_the_children_of_their_spec_run_oldest_first(store: Store) -> None:
    """A Ticket Run names its Spec run; another Spec run's Tickets are not among them."""
    repository = store.ensure_repository("octo", "widgets")
    spec = store.start_run(repository, 10, kind="spec", base_branch="main", issue_branch="spec-10")
    other = store.start_run(repository, 20, kind="spec", issue_branch="spec-20")
    first = store.start_run(
        repository, 11, kind="merge", base_branch="spec-10", parent_run_id=spec.id
    )
    store.start_run(repository, 21, kind="merge", base_branch="spec-20", parent_run_id=other.id)
    second = store.start_run(
        repository, 12, kind="merge", base_branch="spec-10", parent_run_id=spec.id
    )
    store.start_run(repository, 13)  # a plain Run: no parent

    tickets = store.ticket_runs(spec.id)

    assert [run.id for run in tickets] == [first.id, second.id]
    assert {run.parent_run_id for run in tickets} == {spec.id}
    assert store.get_run(spec.id) is not None
    assert store.get_run(spec.id).issue_branch == "spec-10"  # type: ignore[union-attr]
    assert store.ticket_runs(10_000) == []


def test_a_landing_is_kept_with_its_ticket_run_and_found_by_spec_branch(store: Store) -> None:
    """Landed Tickets of a Spec branch are found across Spec runs (a rerun continues), not
    those of another Spec branch nor a Ticket Run that failed without landing."""
    repository = store.ensure_repository("octo", "widgets")
    spec = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")
    landed = store.start_run(
        repository, 11, kind="merge", base_branch="spec-10", parent_run_id=spec.id
    )
    failed = store.start_run(
        repository, 12, kind="merge", base_branch="spec-10", parent_run_id=spec.id
    )
    store.finish_run(failed.id, RunState.FAILED, cause="the CI-fix budget is spent")
    store.finish_run(landed.id, RunState.SUCCEEDED)
    recorded = store.record_landing(landed.id, "a" * 40)
    rerun = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")
    again = store.start_run(
        repository, 12, kind="merge", base_branch="spec-10", parent_run_id=rerun.id
    )
    store.record_landing(again.id, "b" * 40)
    elsewhere = store.start_run(repository, 30, kind="spec", issue_branch="spec-30")
    store.record_landing(
        store.start_run(
            repository, 31, kind="merge", base_branch="spec-30", parent_run_id=elsewhere.id
        ).id,
        "c" * 40,
    )

    found = store.landed_tickets(repository, "spec-10")

    assert recorded.landed
    assert recorded.landed_sha == "a" * 40
    assert recorded.landed_at is not None
    assert recorded.landed_at.tzinfo is not None
    assert {number: run.id for number, run in found.items()} == {11: landed.id, 12: again.id}
    assert store.get_run(failed.id).cause == "the CI-fix budget is spent"  # type: ignore[union-attr]
    assert not store.get_run(failed.id).landed  # type: ignore[union-attr]
    assert store.spec_run_of(again.id) == store.get_run(rerun.id)
    assert store.spec_run_of(spec.id) is None


def test_only_a_ticket_run_lands_and_a_landing_never_moves(store: Store) -> None:
    """A Run with no Spec run cannot land; the same landing recorded twice is harmless, another
    commit for it is refused and the first kept."""
    repository = store.ensure_repository("octo", "widgets")
    plain = store.start_run(repository, 7)
    spec = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")
    ticket = store.start_run(
        repository, 11, kind="merge", base_branch="spec-10", parent_run_id=spec.id
    )
    store.record_landing(ticket.id, "a" * 40)

    with pytest.raises(StoreError, match="no Ticket Run"):
        store.record_landing(plain.id, "a" * 40)
    with pytest.raises(StoreError, match="already landed"):
        store.record_landing(ticket.id, "b" * 40)
    with pytest.raises(StoreError, match="no run"):
        store.record_landing(10_000, "a" * 40)
    assert store.record_landing(ticket.id, "a" * 40).landed_sha == "a" * 40
    assert store.get_run(ticket.id).landed_sha == "a" * 40  # type: ignore[union-attr]


def test_the_spec_migration_goes_down_and_up_again_keeping_the_runs(database_url: str) -> None:
    """0011 adds the parent and landing to a database holding Runs, and can be taken back."""
    from alembic import command

    from thirdshift.store.engine import alembic_config, make_engine

    store = Store.open(database_url)
    run = store.start_run(store.ensure_repository("octo", "widgets"), 1, issue_branch="issue-1")
    store.close()
    engine = make_engine(database_url)
    try:
        command.downgrade(alembic_config(engine), "0010")
        columns = {column["name"] for column in sa.inspect(engine).get_columns("runs")}
        command.upgrade(alembic_config(engine), "head")
    finally:
        engine.dispose()

    assert not {"parent_run_id", "landed_sha", "landed_at"} & columns
    reopened = Store.open(database_url)
    try:
        kept = reopened.get_run(run.id)
    finally:
        reopened.close()
    assert kept is not None
    assert kept.issue_branch == "issue-1"
    assert kept.parent_run_id is None


def test_unlanded_ticket_runs_are_those_that_may_have_merged_without_a_record(
    store: Store,
) -> None:
    """Succeeded, crashed or still running Ticket Runs of the Spec branch with a pull request
    and no landing: not a landed one, a failed one, one without a pull request, another
    branch's, or (asked ``besides`` a Spec run) that Spec run's own."""
    repository = store.ensure_repository("octo", "widgets")
    spec = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")

    def ticket(number: int, state: str, pull: int | None, branch: str = "spec-10") -> int:
        run = store.start_run(
            repository, number, kind="merge", base_branch=branch, parent_run_id=spec.id
        )
        store.update_run(run.id, state=state, pull_request_number=pull)
        return run.id

    succeeded = ticket(11, "succeeded", 31)
    crashed = ticket(12, "crashed", 32)
    ticket(13, "failed", 33)
    ticket(14, "crashed", None)
    ticket(15, "succeeded", 35, branch="spec-99")
    landed = ticket(16, "succeeded", 36)
    store.record_landing(landed, "b" * 40)
    running = ticket(17, "running", 37)
    later = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")
    own = store.start_run(
        repository, 18, kind="merge", base_branch="spec-10", parent_run_id=later.id
    )
    store.update_run(own.id, state="running", pull_request_number=38)

    found = store.unlanded_ticket_runs(repository, "spec-10")
    earlier = store.unlanded_ticket_runs(repository, "spec-10", besides=later.id)

    assert [run.id for run in found] == [succeeded, crashed, running, own.id]
    assert [run.id for run in earlier] == [succeeded, crashed, running]


def test_held_specs_are_the_specs_whose_newest_run_is_a_running_or_crashed_spec_run(
    store: Store,
) -> None:
    repository = store.ensure_repository("octo", "widgets")
    running = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")
    crashed = store.start_run(repository, 20, kind="spec", issue_branch="spec-20")
    store.update_run(crashed.id, state="crashed")
    ended = store.start_run(repository, 30, kind="spec", issue_branch="spec-30")
    store.finish_run(ended.id, RunState.FAILED, cause="Tickets not done: #31")
    superseded = store.start_run(repository, 40, kind="spec", issue_branch="spec-40")
    store.update_run(superseded.id, state="crashed")
    store.start_run(repository, 40)  # a plain Run of the issue since: no Spec run holds it
    store.start_run(repository, 50)  # a plain Run running

    assert [run.id for run in store.held_specs(repository)] == [running.id, crashed.id]


def test_a_spec_run_and_its_ticket_runs_share_one_cost_for_the_budget(store: Store) -> None:
    """Asked of the Spec run or of any of its Ticket Runs, the cost is the whole Spec run's;
    a plain Run's is its own."""
    repository = store.ensure_repository("octo", "widgets")
    spec = store.start_run(repository, 10, kind="spec", issue_branch="spec-10")
    tickets = [
        store.start_run(repository, n, kind="merge", base_branch="spec-10", parent_run_id=spec.id)
        for n in (11, 12)
    ]
    plain = store.start_run(repository, 13)
    for run, cost in ((spec, 0.5), (tickets[0], 1.0), (tickets[1], 2.0), (plain, 4.0)):
        session = store.start_session(
            run.id, "implement", harness="claude", log_path="x.jsonl", prompt="do it"
        )
        store.end_session(session.id, state="ended", usage=Usage(cost_usd=cost))

    assert [store.run_cost(r.id) for r in (spec, *tickets)] == [3.5, 3.5, 3.5]
    assert store.run_cost(plain.id) == 4.0
