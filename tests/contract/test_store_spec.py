"""The store's Spec run records (migration 0011), one body run on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from thirdshift.errors import StoreError
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
    store.finish_run(failed.id, "failed", cause="the CI-fix budget is spent")
    store.finish_run(landed.id, "merged")
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
