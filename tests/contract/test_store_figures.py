"""The figures of `thirdshift report`, one body run on SQLite and on PostgreSQL: Runs, sessions
and their usage made through the store's own API, each figure the store adds up compared with
the same figure computed here, in Python, from the records the store gives back."""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from thirdshift.clock import ManualClock
from thirdshift.figures import FAILED_STATES, Period, PeriodFigures, Spread
from thirdshift.records import Run, SessionRecord, Usage
from thirdshift.run_states import RunKind, RunState
from thirdshift.store import Store

START = datetime(2026, 11, 1, tzinfo=UTC)
SINCE = START + timedelta(days=1)
HARNESSES = ["claude", "codex", None]
CAUSES = ["CI-fix budget spent", "interrupted", "the Lease was lost", None]
KINDS = [RunKind.DELIVERY, RunKind.DELIVERY, RunKind.MERGE, RunKind.SPEC, RunKind.ARCHITECT]
STATES = [RunState.SUCCEEDED] * 4 + [
    RunState.FAILED,
    RunState.FAILED,
    RunState.REFUSED,
    RunState.CRASHED,
    RunState.INTERRUPTED,
    RunState.RUNNING,
]
SESSION_KINDS = ["implement", "repair-1", "repair-1-resume", "review-1", "repair-2", "spec-review"]
REPAIR = re.compile(r"(repair|review)-\d+")

Key = tuple[str, str | None]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(database_url: str, clock: ManualClock) -> Iterator[Store]:
    opened = Store.open(database_url, clock=clock)
    yield opened
    opened.close()


def fill(store: Store, clock: ManualClock, runs: int, *, seed: int = 35) -> None:
    """Runs of every kind, state and Harness over two repositories (the first day's before the
    period), each with up to five sessions of mixed kinds, Harnesses and costs (some unpriced,
    some still running), durations to the millisecond, and a Ready label time on most."""
    chance = random.Random(seed)
    repositories = [
        store.ensure_repository("acme", "widgets"),
        store.ensure_repository("acme", "gears"),
    ]
    for index in range(runs):
        clock.advance(chance.uniform(0, 2 * 86400 / runs) if index else 0)
        if index == runs // 5:
            clock.advance(max(0.0, (SINCE - clock.now()).total_seconds()))  # the period begins
        kind = chance.choice(KINDS)
        labelled = clock.now() - timedelta(seconds=chance.uniform(1, 7200))
        run = store.start_run(
            chance.choice(repositories),
            None if kind == RunKind.ARCHITECT else 1 + index,
            kind=kind,
            harness=chance.choice(HARNESSES),
            ready_labelled_at=labelled if chance.random() < 0.7 else None,
        )
        for _ in range(chance.randint(0, 5)):
            session = store.start_session(
                run.id,
                chance.choice(SESSION_KINDS),
                harness=chance.choice(["claude", "codex"]),
                log_path=f"/logs/{run.id}.jsonl",
                prompt="p",
            )
            clock.advance(round(chance.uniform(1, 900), 3))
            if chance.random() < 0.9:
                priced = chance.random() < 0.8
                store.end_session(
                    session.id,
                    state=chance.choice(["ended", "failed"]),
                    usage=Usage(cost_usd=round(chance.uniform(0, 2), 4) if priced else None),
                )
        state = chance.choice(STATES)
        if state == RunState.RUNNING:
            continue
        published = "7 8" if kind == RunKind.ARCHITECT and chance.random() < 0.5 else None
        store.finish_run(
            run.id,
            state,
            cause=None if state == RunState.SUCCEEDED else chance.choice(CAUSES),
            pull_request_number=chance.choice([None, chance.randint(1, 40)]),
            published=published,
        )


@dataclass
class Recorded:
    """The records of the period's Runs and their sessions, as the store's API gives them."""

    runs: list[Run]
    sessions: dict[int, list[SessionRecord]]


def recorded(store: Store, period: Period) -> Recorded:
    runs = [
        run
        for run in store.list_runs(limit=100_000, repository=period.repository)
        if run.started_at >= period.since
    ]
    return Recorded(runs, {run.id: store.run_sessions(run.id) for run in runs})


def outcome_of(run: Run) -> str:
    if run.state != RunState.SUCCEEDED:
        return run.state
    if run.kind == RunKind.MERGE:
        return "merged"
    if run.kind == RunKind.ARCHITECT:
        return "published" if run.published else "covered"
    return "ready"


def key(run: Run) -> Key:
    return run.repository.full_name, run.harness


def nearest_rank(values: list[float], percent: int) -> float | None:
    if not values:
        return None
    return sorted(values)[math.ceil(len(values) * percent / 100) - 1]


def spread(values: list[float], unknown: int = 0) -> tuple[int, float | None, float | None, int]:
    return len(values), nearest_rank(values, 50), nearest_rank(values, 90), unknown


def as_spreads(found: tuple[Spread, ...]) -> dict[Key, tuple[int, float | None, float | None, int]]:
    return {
        (s.repository, s.harness): (s.known, s.median_seconds, s.p90_seconds, s.unknown)
        for s in found
    }


def approx_spreads(expected: dict[Key, tuple[int, float | None, float | None, int]]) -> object:
    return {
        group: (known, pytest.approx(median, abs=0.002), pytest.approx(p90, abs=0.002), unknown)
        for group, (known, median, p90, unknown) in expected.items()
    }


def check_figures(figures: PeriodFigures, records: Recorded) -> None:
    """Every figure of ``figures`` equals the one computed here from ``records``."""
    runs, sessions = records.runs, records.sessions
    assert runs, "the period holds Runs"

    outcomes: Counter[tuple[str, str | None, str]] = Counter()
    pulls: dict[tuple[str, str | None, str], set[int]] = defaultdict(set)
    for run in runs:
        group = (*key(run), outcome_of(run))
        outcomes[group] += 1
        if run.pull_request_number is not None:
            pulls[group].add(run.pull_request_number)
    assert {
        (o.repository, o.harness, o.outcome): (o.runs, o.pull_requests) for o in figures.outcomes
    } == {group: (count, len(pulls[group])) for group, count in outcomes.items()}

    causes = Counter((*key(run), run.cause) for run in runs if run.state in FAILED_STATES)
    found_causes = [((c.repository, c.harness, c.cause), c.runs) for c in figures.causes]
    assert dict(found_causes) == dict(causes)
    assert [count for _, count in found_causes] == sorted(causes.values(), reverse=True)

    spend: dict[Key, list[float]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0.0, 0])
    for run in runs:
        figures_of = spend[key(run)]
        repairs = sum(1 for s in sessions[run.id] if REPAIR.fullmatch(s.kind))
        figures_of[0] += 1
        figures_of[1] += len(sessions[run.id])
        figures_of[2] += repairs
        figures_of[3] += repairs > 0
        figures_of[4] = max(figures_of[4], repairs)
        figures_of[5] += sum(s.usage.cost_usd or 0.0 for s in sessions[run.id])
        figures_of[6] += sum(1 for s in sessions[run.id] if s.usage.cost_usd is None)
    assert {
        (s.repository, s.harness): [
            s.runs, s.sessions, s.repairs, s.repaired_runs, s.most_repairs,
            pytest.approx(s.cost_usd), s.unpriced_sessions,
        ]
        for s in figures.spend
    } == spend  # fmt: skip

    times: dict[Key, list[float]] = defaultdict(list)
    for run in runs:
        for session in sessions[run.id]:
            if session.ended_at is not None:
                took = (session.ended_at - session.started_at).total_seconds()
                times[(run.repository.full_name, session.harness)].append(took)
    assert as_spreads(figures.session_times) == approx_spreads(
        {group: spread(values) for group, values in times.items()}
    )

    ready: dict[Key, list[float]] = defaultdict(list)
    unknown: Counter[Key] = Counter()
    for run in runs:
        if outcome_of(run) != "ready":
            continue
        if run.ready_labelled_at is None:
            unknown[key(run)] += 1
            ready[key(run)] += []
        else:
            assert run.ended_at is not None
            ready[key(run)].append((run.ended_at - run.ready_labelled_at).total_seconds())
    assert as_spreads(figures.label_to_ready) == approx_spreads(
        {group: spread(values, unknown[group]) for group, values in ready.items()}
    )


def test_the_report_s_figures_are_those_the_records_add_up_to(
    store: Store, clock: ManualClock
) -> None:
    """Runs by outcome with their pull requests, Failed runs by cause, sessions, Repairs and
    cost per Run, and the nearest-rank median and p90 of session times and label-to-ready
    times, per repository and Harness; Runs started before the period are left out."""
    fill(store, clock, 60)
    period = Period(SINCE)

    figures = store.period_figures(period)

    check_figures(figures, recorded(store, period))
    before = [run for run in store.list_runs(limit=1000) if run.started_at < SINCE]
    assert before, "some Runs started before the period"


def test_one_repository_s_figures_are_only_its_own_whatever_the_case_it_is_named_in(
    store: Store, clock: ManualClock
) -> None:
    fill(store, clock, 40, seed=7)
    period = Period(SINCE, "ACME/Gears")

    figures = store.period_figures(period)

    check_figures(figures, recorded(store, period))
    assert {o.repository for o in figures.outcomes} == {"acme/gears"}


def test_a_ready_run_without_its_label_time_is_unknown_and_left_out_of_label_to_ready(
    store: Store, clock: ManualClock
) -> None:
    """Three ready Runs labelled 60, 120 and 600 s before they ended and one without a label
    time: the median is the second of three, the p90 the third, one unknown; a failed Run with
    a label time counts in neither."""
    repository = store.ensure_repository("acme", "widgets")
    for waited in (600, 60, None, 120):
        labelled = None if waited is None else clock.now() - timedelta(seconds=waited)
        run = store.start_run(repository, 1, harness="claude", ready_labelled_at=labelled)
        store.finish_run(run.id, RunState.SUCCEEDED, pull_request_number=2)
    failed = store.start_run(repository, 3, harness="claude", ready_labelled_at=clock.now())
    clock.advance(5000)
    store.finish_run(failed.id, RunState.FAILED, cause="CI-fix budget spent")

    [found] = store.label_to_ready(Period(START))

    assert (found.known, found.median_seconds, found.p90_seconds, found.unknown) == (
        3,
        120.0,
        600.0,
        1,
    )
    [spend] = store.run_spend(Period(START))
    assert (spend.runs, spend.sessions, spend.cost_usd, spend.unpriced_sessions) == (5, 0, 0, 0)


def test_nothing_in_the_period_gives_no_rows(store: Store, clock: ManualClock) -> None:
    store.start_run(store.ensure_repository("acme", "widgets"), 1, harness="claude")
    figures = store.period_figures(Period(START + timedelta(seconds=1)))
    assert figures == PeriodFigures(Period(START + timedelta(seconds=1)), (), (), (), (), ())


def test_the_label_time_migration_goes_down_and_up_again_keeping_the_runs(
    database_url: str,
) -> None:
    """0012 adds the Ready label's time to a database holding Runs, and can be taken back."""
    from alembic import command

    from thirdshift.store.engine import alembic_config, make_engine

    store = Store.open(database_url)
    labelled = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    run = store.start_run(store.ensure_repository("octo", "widgets"), 1, ready_labelled_at=labelled)
    assert store.get_run(run.id).ready_labelled_at == labelled  # type: ignore[union-attr]
    store.close()
    engine = make_engine(database_url)
    try:
        command.downgrade(alembic_config(engine), "0011")
        columns = {column["name"] for column in sa.inspect(engine).get_columns("runs")}
        command.upgrade(alembic_config(engine), "head")
    finally:
        engine.dispose()

    assert "ready_labelled_at" not in columns
    reopened = Store.open(database_url)
    try:
        kept = reopened.get_run(run.id)
    finally:
        reopened.close()
    assert kept is not None
    assert kept.ready_labelled_at is None  # dropped with its column, as a pre-0012 Run's
