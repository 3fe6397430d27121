"""What the status page shows, built by its real source from a real store (SQLite and
PostgreSQL) and real Session logs: a Failed run's cause with its last condensed lines scrubbed,
the Runs in flight, the Leases, the cost today and the daemon's rate-limit budget."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.support.failed_run import CAUSE, COST_USD, plant_failed_run, session_log_lines
from thirdshift.daemon.state import DaemonProcess, DaemonState, HarnessHolds
from thirdshift.scrub import Scrubber
from thirdshift.store import Store
from thirdshift.web import StorePageSource, make_app
from thirdshift.web.page import LOG_BYTES, condensed_tail

SECRET = "ghp_" + "planted0secret0value0" * 2
SCRUBBED_TAIL = (
    "session started",
    "$ python3 -m unittest -v",
    "$ sed -i 's/a - b/a + b/' calc.py",
    '$ curl -H "Authorization: token [REDACTED]" https://ci.invalid/logs',
)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def daemon_state() -> DaemonState:
    now = datetime.now(UTC)
    return DaemonState(
        daemon=DaemonProcess("night-1", os.getpid(), now), updated_at=now, stopping=False,
        polls=(), running=(), holds=HarnessHolds(), rate_limit_remaining=4870,
    )  # fmt: skip


def source_of(store: Store) -> StorePageSource:
    return StorePageSource(store, daemon_state, Scrubber([SECRET]), fresh_seconds=0)


def test_a_failed_run_shows_its_cause_and_its_last_lines_scrubbed(
    store: Store, tmp_path: Path
) -> None:
    planted = plant_failed_run(store, "acme", "widgets", 9, tmp_path / "logs", SECRET)
    assert SECRET in planted.log_path.read_text()  # the log itself holds it

    page = source_of(store).page()

    [failure] = page.failures
    assert (failure.run_id, failure.cause, failure.session) == (planted.run.id, CAUSE, "repair-2")
    assert failure.last_lines == SCRUBBED_TAIL
    assert failure.cost_usd == pytest.approx(COST_USD)
    assert [run.run_id for run in page.recent] == [planted.run.id]
    assert page.recent[0].last_lines == ()  # an outcome line, no log to read
    shown = json.dumps(page.json())
    assert SECRET not in shown
    assert page.json()["failures"][0]["last_lines"] == list(SCRUBBED_TAIL)


def test_a_run_in_flight_shows_its_lease_its_lines_and_the_cost_today(
    store: Store, tmp_path: Path
) -> None:
    plant_failed_run(store, "acme", "widgets", 9, tmp_path / "logs", SECRET)
    repository = store.ensure_repository("acme", "widgets")
    lease = store.acquire_lease(repository, 11, "daemon night-1:host:1:ab", timedelta(minutes=5))
    assert lease is not None
    running = store.start_run_under(lease, repository, 11, harness="claude")
    assert running is not None
    log = tmp_path / "logs" / "acme-widgets-issue-11-implement.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in session_log_lines("x")[:3]))
    store.start_session(
        running.id, "implement", harness="claude", log_path=str(log), prompt="Fix it."
    )

    page = source_of(store).page()

    [in_flight] = page.in_flight
    assert (in_flight.run_id, in_flight.session) == (running.id, "implement")
    assert in_flight.last_lines == SCRUBBED_TAIL[:3]
    assert in_flight.cost_usd is None  # its session has no cost figure yet
    [held] = page.leases
    assert (held.repository, held.issue_number, held.run_id) == ("acme/widgets", 11, running.id)
    assert page.cost_today_usd == pytest.approx(COST_USD)
    assert page.unpriced_today == 1
    data = page.json()
    assert data["daemon"]["rate_limit_remaining"] == 4870
    assert data["leases"][0]["owner"] == "daemon night-1:host:1:ab"
    assert [run["id"] for run in data["in_flight"]] == [running.id]


def test_a_failure_older_than_a_day_is_an_outcome_not_a_failure_shown(
    store: Store, tmp_path: Path
) -> None:
    planted = plant_failed_run(store, "acme", "widgets", 9, tmp_path / "logs", SECRET)
    store.update_run(planted.run.id, ended_at=datetime.now(UTC) - timedelta(days=1, minutes=1))

    page = source_of(store).page()

    assert page.failures == ()
    assert [(run.run_id, run.state) for run in page.recent] == [(planted.run.id, "failed")]


def test_only_the_end_of_a_long_log_is_read_for_its_last_lines(tmp_path: Path) -> None:
    """A Session log grows to megabytes; the page reads its last ``LOG_BYTES`` only, so a line
    at its start is never condensed, and the last lines are still whole."""
    log = tmp_path / "long.jsonl"
    lines = session_log_lines(SECRET)
    first = json.dumps(lines[2])  # "$ sed ...": only ever at the start
    filler = json.dumps(lines[1])
    count = LOG_BYTES // len(filler) + 10
    log.write_text("\n".join([first, *[filler] * count, json.dumps(lines[3])]) + "\n")

    tail = condensed_tail(log, "claude", Scrubber([SECRET]), lines=10 * count)

    assert "$ sed -i 's/a - b/a + b/' calc.py" not in tail
    assert len(tail) < count
    assert tail[-2:] == ("$ python3 -m unittest -v", SCRUBBED_TAIL[-1])
    assert condensed_tail(tmp_path / "elsewhere.jsonl", "claude", Scrubber([SECRET])) == ()


def test_while_the_database_is_unreachable_the_page_shows_the_daemon_and_says_so_once() -> None:
    """A store whose server refuses connections: every request gets the daemon's own state and
    "database unreachable: ...", and stderr gets one line for the outage, not one per request;
    the application answers each route with the page, never a 500."""
    # Nothing listens on port 1 of loopback: connections are refused at once.
    down = Store.open("postgresql+psycopg://thirdshift@127.0.0.1:1/test", migrate=False)
    said: list[str] = []
    source = StorePageSource(
        down, daemon_state, Scrubber([SECRET]), fresh_seconds=0, warn=said.append
    )
    try:
        pages = [source.page() for _ in range(3)]
        app = make_app(source, token="t" * 32)
        client = TestClient(
            app, base_url="http://127.0.0.1:8765", headers={"Authorization": "Bearer " + "t" * 32}
        )
        answers = [client.get(path) for path in ("/", "/live", "/api/status")]
    finally:
        down.close()
    for page in pages:
        assert page.daemon is not None
        assert page.daemon.daemon.name == "night-1"
        assert page.database_error is not None
        assert page.database_error.startswith("database unreachable: ")
        assert (page.in_flight, page.failures, page.leases) == ((), (), ())
    assert said == [f"status page: {pages[0].database_error}"]
    assert [got.status_code for got in answers] == [200, 200, 200]
    assert "database unreachable: " in answers[1].text
    shown = answers[2].json()
    assert shown["daemon"]["daemon"] == "night-1"
    assert shown["database_error"].startswith("database unreachable: ")
