"""How long building a preamble from the database takes, on SQLite and on PostgreSQL.

Run from the repository root: ``.venv/bin/python bench/preambles.py [--runs 1000]``.

It fills a fresh database with ``--runs`` Runs over 200 issues of one repository, each Run with
two sessions (an implement and a repair) of 50 Session events: 100,000 events for 1,000 Runs. It
then times, over the 200 newest Runs:

- **follow-up**: what a Repair or a Continuation does before its session starts: read the
  issue's last five sessions across its Runs (``Store.issue_history``) and render the follow-up
  preamble;
- **resume**: what a fresh session standing in for a lost native Resume does: read one session's
  newest 50 steps and their count, and render the resume brief around a 30 KB prompt.

PostgreSQL is the test server (``TEST_POSTGRES_URL``, default the local one with trust auth), in
a schema of its own, dropped afterwards. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench_databases import on_each_database

from thirdshift.records import SessionEvent
from thirdshift.run_states import RunState
from thirdshift.sessions.preamble import EVENTS_IN_RESUME, follow_up_preamble, resume_brief
from thirdshift.store import Store

ISSUES = 200
PROMPT = "\n".join(f"Requirement {i}: the widget must " + "hold " * 12 for i in range(420))


def fill(store: Store, runs: int) -> list[int]:
    """``runs`` Runs of two sessions of 50 events each; returns the Run ids."""
    repository = store.ensure_repository("bench", "widgets")
    ids: list[int] = []
    for index in range(runs):
        run = store.start_run(repository, 1 + index % ISSUES)
        for kind in ("implement", "repair-1"):
            session = store.start_session(
                run.id,
                kind,
                harness="claude",
                log_path=f"/logs/{run.id}-{kind}.jsonl",
                prompt=PROMPT,
            )
            store.add_session_events(
                session.id,
                [
                    SessionEvent(
                        seq=seq,
                        kind="tool_call",
                        tool="Bash",
                        summary=f"$ pytest tests/test_{seq}.py -k case_{index}",
                    )
                    for seq in range(1, 51)
                ],
            )
            store.end_session(session.id, state="ended", final_message="Done.\n" * 40)
        store.finish_run(run.id, RunState.FAILED, cause="CI stayed red", head_sha="ab" * 20)
        ids.append(run.id)
    return ids


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return times


def measure(name: str, url: str, runs: int) -> None:
    store = Store.open(url)
    try:
        start = time.perf_counter()
        ids = fill(store, runs)
        filled = time.perf_counter() - start
        newest = [store.get_run(run_id) for run_id in ids[-200:]]
        records = [run for run in newest if run is not None]
        sessions = [store.run_sessions(run.id)[-1].id for run in records]

        def follow_up() -> None:
            for run in records:
                follow_up_preamble(store.issue_history(run, last_events=EVENTS_IN_RESUME))

        def resume() -> None:
            for session_id in sessions:
                steps = [e.summary for e in store.session_events(session_id, last=50)]
                count = store.session_event_count(session_id)
                resume_brief(PROMPT, steps, "Finish.", total_events=count)

        for label, action in (("follow-up", follow_up), ("resume", resume)):
            per_build = [t / len(records) for t in timed(action, 3)]
            print(
                f"{name:10} {label:9} {statistics.median(per_build):7.2f} ms per build "
                f"(median of 3 passes over {len(records)} Runs; filling took {filled:.0f} s)"
            )
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    print(f"{args.runs} Runs, {args.runs * 100:,} Session events")
    on_each_database(lambda name, url: measure(name, url, args.runs))


if __name__ == "__main__":
    main()
