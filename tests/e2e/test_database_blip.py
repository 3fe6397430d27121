"""A database blip across a session's end (adr/0028), end to end: `thirdshift daemon` on a
PostgreSQL database of the test's own, the real claude CLI on the stand-in, and the database
refusing every connection for 20 s (``TEST_DATABASE_BLIP_SECONDS``) from the middle of the
session's last tool call until after the session has ended."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import POSTGRES_URL
from tests.e2e.test_status_page import free_port
from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from tests.support.warm_start import Started
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

BLIP_SECONDS = float(os.environ.get("TEST_DATABASE_BLIP_SECONDS", "20"))


def _admin() -> sa.Engine:
    url = "postgresql+psycopg://" + POSTGRES_URL.split("://", 1)[1]
    return sa.create_engine(url, isolation_level="AUTOCOMMIT")


@pytest.fixture
def own_database() -> Iterator[tuple[str, Callable[[bool], None]]]:
    """A database of the test's own on the test server (never another), its URL and a switch:
    ``allow(False)`` refuses new connections and ends the open ones, ``allow(True)`` lets them
    in again. Dropped afterwards."""
    name = f"blip_{uuid.uuid4().hex[:12]}"
    admin = _admin()
    try:
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc.orig})")

    def allow(on: bool) -> None:
        with admin.connect() as connection:
            connection.execute(
                sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if on else "false"}')
            )
            if not on:
                connection.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :name AND pid <> pg_backend_pid()"
                    ),
                    {"name": name},
                )

    url = sa.make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    try:
        yield url, allow
    finally:
        allow(False)
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


def _session() -> dict[str, object]:
    """Fix, commit and write the Pull request file in one tool call that then sleeps: the blip
    starts during that sleep, so the tool's result, the final text and the session's end all
    arrive while the database refuses."""
    work = (
        write_file_command("calc.py", CALC_FIXED)
        + " && git add calc.py && git commit -qm 'Make add() add' && "
        + pull_request_file("Make add() add", "add() subtracted.\n\nCloses #1")
        + " && sleep 4"
    )
    return {
        "name": "implement",
        "marker": "calc.add(2, 3) returns -1",
        "turns": [{"tool_calls": [bash(work, "fix")]}, {"text": "Fixed add()."}],
    }


def _reading(process: Started) -> list[str]:
    """The daemon's stderr, read as it comes (a pipe left unread would stall it)."""
    lines: list[str] = []
    assert process.stderr is not None
    stream = process.stderr
    threading.Thread(target=lambda: lines.extend(stream), daemon=True).start()
    return lines


PAGE_TOKEN = "blip-page-token-of-the-test-0123456789"


def _page_status(port: int) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"Bearer {PAGE_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        found: dict[str, object] = json.loads(answer.read())
        return found


def _wait(what: str, done: Callable[[], bool], timeout: float, said: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout}s\n{''.join(said)[-4000:]}")


def test_a_database_blip_across_a_session_s_end_loses_nothing_and_pays_nothing_twice(
    tmp_path: Path,
    worlds: list[RunWorld],
    own_database: tuple[str, Callable[[bool], None]],
) -> None:
    """The Run ends with its pull request, its one session recorded once with every event,
    the model asked once per turn, no Rescue; the daemon keeps polling, its status page says
    the database is unreachable meanwhile, and it stops cleanly."""
    url, allow = own_database
    world = start_world(tmp_path, [_session()])
    worlds.append(world)
    world.settings.update(
        {
            "THIRDSHIFT_DATABASE_URL": url,
            "THIRDSHIFT_POLL_SECONDS": "1",
            "THIRDSHIFT_POLL_JITTER_SECONDS": "0",
            "THIRDSHIFT_SETTLE_SECONDS": "0",
            "THIRDSHIFT_SALVAGE_WAIT_SECONDS": str(BLIP_SECONDS + 40),
            "THIRDSHIFT_MIN_FREE_DISK_MB": "0",
        }
    )
    page_port = free_port()
    world.settings["THIRDSHIFT_HTTP_TOKEN"] = PAGE_TOKEN
    daemon = world.start_thirdshift(
        "daemon", "--repo", f"{OWNER}/{NAME}", "--http", f"127.0.0.1:{page_port}"
    )
    said = _reading(daemon)

    _wait("the session's first turn", lambda: bool(world.model_requests("implement")), 120, said)
    time.sleep(1.5)  # into the tool call's sleep
    allow(False)
    blip_began = time.monotonic()
    try:
        time.sleep(min(3.0, BLIP_SECONDS / 2))
        # The status page shows the daemon's own state and says the database is away.
        status = _page_status(page_port)
        time.sleep(max(0.0, BLIP_SECONDS - (time.monotonic() - blip_began)))
    finally:
        allow(True)
    assert str(status["database_error"]).startswith("database unreachable: "), status
    _wait("the pull request", lambda: bool(world.pulls()), 120, said)

    store = Store.open(url)
    try:

        def succeeded() -> bool:
            runs = store.list_runs()
            return bool(runs) and runs[0].state == "succeeded"

        _wait("the Run's success recorded", succeeded, 60, said)
        time.sleep(2)  # a poll or two after the Run's end
        assert daemon.poll() is None, "".join(said)
        [run] = store.list_runs()
        [session] = store.run_sessions(run.id)
        assert session.state == "ended"
        assert session.usage.turns == 2  # the ledger counted the turn once
        events = store.session_events(session.id)
        assert [event.seq for event in events] == list(range(1, len(events) + 1))
        assert [event.kind for event in events][-1] == "result"
        assert any(event.kind == "tool_result" for event in events)
        repository = store.ensure_repository(OWNER, NAME)
        assert store.lease_of(repository, world.issue_number) is None
    finally:
        store.close()
    assert len(world.model_requests("implement")) == 2  # one request per turn: nothing twice
    [pull] = world.pulls()
    assert pull["head"]["ref"] == "issue-1"
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0, "".join(said)
    output = "".join(said)
    assert "could not record Session events" in output
    assert "Traceback" not in output
