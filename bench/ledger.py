"""How long the usage ledger's sums take, on SQLite and on PostgreSQL.

Run from the repository root: ``.venv/bin/python bench/ledger.py [--sessions 10000]``.

It fills a fresh database with ``--sessions`` sessions (two per Run) over 30 days and five
repositories, each with a ledger line, then times:

- **budget check**: what every session start and end does with a budget set: the Run's cost and
  its repository's cost today (``Store.run_cost`` and ``Store.repository_cost``); a daemon's poll
  does the second;
- **usage by day / by run**: ``thirdshift usage`` over the last 30 days.

PostgreSQL is the test server (``TEST_POSTGRES_URL``, default the local one with trust auth), in
a schema of its own, dropped afterwards. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bench_databases import on_each_database

from thirdshift.clock import ManualClock
from thirdshift.records import Usage
from thirdshift.store import Store

START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 30
REPOSITORIES = 5


def fill(store: Store, clock: ManualClock, sessions: int) -> list[int]:
    """Two sessions per Run, the Runs spread evenly over ``DAYS``; returns the Run ids."""
    repositories = [store.ensure_repository("bench", f"widgets-{n}") for n in range(REPOSITORIES)]
    runs = sessions // 2
    step = DAYS * 86400 / max(runs, 1)
    ids: list[int] = []
    for index in range(runs):
        run = store.start_run(repositories[index % REPOSITORIES], 1 + index)
        for kind, harness in (("implement", "claude"), ("repair-1", "codex")):
            row = store.start_session(
                run.id, kind, harness=harness, log_path=f"/logs/{run.id}-{kind}", prompt="p"
            )
            clock.advance(step / 4)
            store.end_session(
                row.id,
                state="ended",
                usage=Usage(
                    turns=12,
                    input_tokens=240_000,
                    cached_input_tokens=180_000,
                    cache_write_tokens=9_000,
                    output_tokens=4_000,
                    cost_usd=0.42 if harness == "claude" else None,
                    cost_source="reported" if harness == "claude" else None,
                    model="claude-opus-5-5" if harness == "claude" else "gpt-5.5",
                    cli_version="2.1.328" if harness == "claude" else None,
                ),
            )
            clock.advance(step / 4)
        ids.append(run.id)
    return ids


def timed(action: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` runs of ``action``, in milliseconds."""
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(name: str, url: str, sessions: int) -> None:
    clock = ManualClock(START)
    store = Store.open(url, clock=clock)
    try:
        start = time.perf_counter()
        ids = fill(store, clock, sessions)
        filled = time.perf_counter() - start
        today = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
        since = today - timedelta(days=DAYS - 1)

        def budget_check() -> None:
            store.run_cost(ids[-1])
            store.repository_cost("bench", "widgets-0", today, today + timedelta(days=1))

        figures = [
            ("budget check", timed(budget_check, 50)),
            ("usage by day", timed(lambda: store.usage_ledger("day", since=since), 5)),
            ("usage by run", timed(lambda: store.usage_ledger("run", since=since), 5)),
        ]
        for label, median in figures:
            print(f"{name:10} {label:13} {median:9.2f} ms (median; filling took {filled:.0f} s)")
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    print(f"{args.sessions:,} sessions over {DAYS} days and {REPOSITORIES} repositories")
    on_each_database(lambda name, url: measure(name, url, args.sessions))


if __name__ == "__main__":
    main()
