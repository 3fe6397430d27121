"""How long ``thirdshift report``'s queries take, on SQLite and on PostgreSQL.

Run from the repository root: ``.venv/bin/python bench/report_queries.py [--runs 10000]``.

It fills a fresh database with ``--runs`` Runs over 30 days, five repositories and three
Harnesses, of every kind and state, each with one to four sessions (implement, Repairs, a
Resume now and then; their usage ledger lines, one in ten unpriced) and, for four in five, the
time their Ready label was added. The rows are written in bulk with the store's own tables (the
store's API writes one Run at a time, which would take minutes and measure nothing of the
report). Then it times each of the report's five queries and the whole report (the queries, the
rows put together and the text table), the median of ``--repeat`` runs each.

PostgreSQL is the test server (``TEST_POSTGRES_URL``, default the local one with trust auth), in
a schema of its own, dropped afterwards. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from bench_databases import on_each_database

from thirdshift.figures import Period
from thirdshift.report.period import period_report
from thirdshift.report.tables import report_lines
from thirdshift.store import Store
from thirdshift.store.tables import RepositoryRow, RunRow, SessionRow

START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 30
REPOSITORIES = 5
HARNESSES = ("claude", "codex", "opencode")
KINDS = ("run",) * 6 + ("merge",) * 2 + ("spec", "architect")
STATES = ("succeeded",) * 6 + ("failed", "failed", "refused", "crashed", "interrupted")
CAUSES = (
    "CI-fix budget spent: 3 Repairs and the checks still fail",
    "interrupted (SIGTERM)",
    "the implement session ended without a commit",
    "a provider outage on every Harness",
    "its Lease ran out while it was recorded running",
)


def fill(store: Store, runs: int) -> None:
    """``runs`` Runs and their sessions, written in bulk in one transaction."""
    chance = random.Random(35)  # noqa: S311 - reproducible Runs, not a secret
    step = DAYS * 86400 / runs
    repositories = [
        {"id": n + 1, "owner": "bench", "name": f"widgets-{n}", "created_at": START}
        for n in range(REPOSITORIES)
    ]
    run_rows: list[dict[str, Any]] = []
    session_rows: list[dict[str, Any]] = []
    for index in range(runs):
        started = START + timedelta(seconds=index * step)
        state, kind = chance.choice(STATES), chance.choice(KINDS)
        moment = started
        kinds = ["implement"] + [f"repair-{i}" for i in range(1, chance.randint(1, 4))]
        for number, session_kind in enumerate(kinds):
            if chance.random() < 0.1:
                session_kind += "-resume"
            took = timedelta(seconds=chance.uniform(30, 1800))
            priced = chance.random() < 0.9
            session_rows.append(
                {
                    "id": len(session_rows) + 1,
                    "run_id": index + 1,
                    "kind": session_kind,
                    "harness": chance.choice(HARNESSES) if number else "claude",
                    "log_path": f"/logs/{index}-{number}.jsonl",
                    "state": "ended",
                    "prompt": "p",
                    "started_at": moment,
                    "ended_at": moment + took,
                    "turns": 12,
                    "input_tokens": 240_000,
                    "output_tokens": 4_000,
                    "cost_usd": round(chance.uniform(0.05, 2.0), 4) if priced else None,
                    "cost_source": "reported" if priced else None,
                }
            )
            moment += took
        labelled = started - timedelta(seconds=chance.uniform(10, 86400))
        run_rows.append(
            {
                "id": index + 1,
                "repository_id": 1 + index % REPOSITORIES,
                "issue_number": 0 if kind == "architect" else 1 + index,
                "kind": kind,
                "state": state,
                "harness": chance.choice(HARNESSES),
                "pull_request_number": None if kind == "architect" else 10_000 + index,
                "cause": None if state == "succeeded" else chance.choice(CAUSES),
                "published": "7 8" if kind == "architect" and chance.random() < 0.5 else None,
                "started_at": started,
                "ended_at": moment,
                "ready_labelled_at": labelled if chance.random() < 0.8 else None,
            }
        )
    with store._engine.begin() as connection:  # the bench's own bulk write, not an API
        connection.execute(sa.insert(RepositoryRow.__table__), repositories)  # type: ignore[attr-defined]
        connection.execute(sa.insert(RunRow.__table__), run_rows)  # type: ignore[attr-defined]
        connection.execute(sa.insert(SessionRow.__table__), session_rows)  # type: ignore[attr-defined]


def timed(action: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` runs of ``action``, in milliseconds."""
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(name: str, url: str, runs: int, repeat: int) -> None:
    store = Store.open(url)
    try:
        start = time.perf_counter()
        fill(store, runs)
        filled = time.perf_counter() - start
        period = Period(START)
        until = START + timedelta(days=DAYS)

        def whole() -> None:
            report_lines(period_report(store.period_figures(period), until))

        figures = [
            ("Runs by outcome", timed(lambda: store.outcome_counts(period), repeat)),
            ("Failed runs by cause", timed(lambda: store.failure_causes(period), repeat)),
            ("Repairs and cost per Run", timed(lambda: store.run_spend(period), repeat)),
            ("session time", timed(lambda: store.session_times(period), repeat)),
            ("label to ready", timed(lambda: store.label_to_ready(period), repeat)),
            ("the whole report", timed(whole, repeat)),
        ]
        for label, median in figures:
            print(f"{name:10} {label:25} {median:8.1f} ms (median; filling took {filled:.1f} s)")
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.runs:,} Runs over {DAYS} days, {REPOSITORIES} repositories, 3 Harnesses")
    on_each_database(lambda name, url: measure(name, url, args.runs, args.repeat))


if __name__ == "__main__":
    main()
