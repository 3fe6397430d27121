"""The figures the status page's charts are drawn from, on SQLite and on PostgreSQL: per UTC
day, each added up by the database from Runs and sessions made through the store's own API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest

from thirdshift.clock import ManualClock
from thirdshift.records import Repository, Usage
from thirdshift.run_states import RunKind, RunState
from thirdshift.store import Store
from thirdshift.store.series import DayCost, DayOutcome, DaySpend, LabelToReady

DAY_1 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DAY_2 = DAY_1 + timedelta(days=1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(DAY_1)


@pytest.fixture
def store(database_url: str, clock: ManualClock) -> Iterator[Store]:
    opened = Store.open(database_url, clock=clock)
    yield opened
    opened.close()


def session(store: Store, clock: ManualClock, run_id: int, cost: float | None) -> None:
    started = store.start_session(run_id, "implement", harness="claude", log_path="l", prompt="p")
    clock.advance(600)
    store.end_session(started.id, state="ended", usage=Usage(cost_usd=cost))


def two_days(store: Store, clock: ManualClock) -> tuple[Repository, Repository]:
    """Day 1: widgets#1 made ready (PR 5; $1.50; labelled an hour before). Day 2: gears#2
    failed ($2.00 and an unpriced session); widgets PR 5 merged ($0.25; a label time, which a
    merge does not count in label-to-ready); widgets#3 made ready
    (PR 6) with no session and no label time; an Architect run published; one still running."""
    widgets = store.ensure_repository("acme", "widgets")
    gears = store.ensure_repository("acme", "gears")
    first = store.start_run(
        widgets, 1, kind=RunKind.DELIVERY, ready_labelled_at=DAY_1 - timedelta(hours=1)
    )
    session(store, clock, first.id, 1.0)
    session(store, clock, first.id, 0.5)
    store.finish_run(first.id, RunState.SUCCEEDED, pull_request_number=5)

    clock.advance((DAY_2 - clock.now()).total_seconds())
    failed = store.start_run(gears, 2, kind=RunKind.DELIVERY)
    session(store, clock, failed.id, 2.0)
    session(store, clock, failed.id, None)
    store.finish_run(failed.id, RunState.FAILED, cause="CI-fix budget spent")
    merge = store.start_run(
        widgets, 1, kind=RunKind.MERGE, ready_labelled_at=DAY_2 - timedelta(hours=5)
    )
    session(store, clock, merge.id, 0.25)
    store.finish_run(merge.id, RunState.SUCCEEDED, pull_request_number=5)
    third = store.start_run(widgets, 3, kind=RunKind.DELIVERY)
    store.finish_run(third.id, RunState.SUCCEEDED, pull_request_number=6)
    architect = store.start_run(widgets, None, kind=RunKind.ARCHITECT)
    store.finish_run(architect.id, RunState.SUCCEEDED, published="7 8")
    store.start_run(gears, 4, kind=RunKind.DELIVERY)
    return widgets, gears


def test_cost_per_day_is_added_up_per_repository_leaving_unpriced_sessions_out(
    store: Store, clock: ManualClock
) -> None:
    two_days(store, clock)
    assert sorted(store.day_costs(DAY_1 - timedelta(days=1)), key=str) == sorted(
        [
            DayCost(DAY_1.date(), "acme/widgets", 1.5),
            DayCost(DAY_2.date(), "acme/gears", 2.0),
            DayCost(DAY_2.date(), "acme/widgets", 0.25),
        ],
        key=str,
    )
    # Sessions started before ``since`` are left out.
    assert sorted(store.day_costs(DAY_2), key=str) == sorted(
        [DayCost(DAY_2.date(), "acme/gears", 2.0), DayCost(DAY_2.date(), "acme/widgets", 0.25)],
        key=str,
    )


def test_runs_are_counted_per_day_by_their_outcome_and_a_running_one_not_at_all(
    store: Store, clock: ManualClock
) -> None:
    two_days(store, clock)
    assert sorted(store.day_outcomes(DAY_1 - timedelta(days=1)), key=str) == sorted(
        [
            DayOutcome(DAY_1.date(), "ready", 1),
            DayOutcome(DAY_2.date(), "failed", 1),
            DayOutcome(DAY_2.date(), "merged", 1),
            DayOutcome(DAY_2.date(), "ready", 1),
            DayOutcome(DAY_2.date(), "published", 1),
        ],
        key=str,
    )


def test_label_to_ready_counts_only_runs_that_made_a_pull_request_ready_with_a_known_label(
    store: Store, clock: ManualClock
) -> None:
    two_days(store, clock)
    first = next(
        run
        for run in store.list_runs(limit=10)
        if run.issue_number == 1 and run.kind == RunKind.DELIVERY
    )
    assert first.ended_at is not None
    assert first.ready_labelled_at is not None
    expected = (first.ended_at - first.ready_labelled_at).total_seconds()
    assert store.labels_to_ready(DAY_1 - timedelta(days=1)) == (
        LabelToReady(first.ended_at, expected),
    )
    assert expected == 3600 + 1200


def test_each_day_s_cost_is_told_by_pull_request_with_whether_it_was_made_ready_or_merged(
    store: Store, clock: ManualClock
) -> None:
    widgets, _gears = two_days(store, clock)
    assert sorted(store.day_spend(DAY_1 - timedelta(days=1)), key=str) == sorted(
        [
            DaySpend(DAY_1.date(), (widgets.id, 5), 1.5),
            DaySpend(DAY_2.date(), None, 2.0),  # gears#2 failed: its cost, no pull request
            DaySpend(DAY_2.date(), (widgets.id, 5), 0.25),  # merged
            DaySpend(DAY_2.date(), (widgets.id, 6), 0.0),
            DaySpend(DAY_2.date(), None, 0.0),  # the Architect run
        ],
        key=str,
    )
    assert all(isinstance(row.day, date) for row in store.day_spend(DAY_2))
