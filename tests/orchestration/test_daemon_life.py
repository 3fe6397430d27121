"""A long daemon life holds (issue 32): 200 Runs through one daemon, ten at once, leave its memory
and its open descriptors where its first 20 Runs left them.

Each Run holds what a real one holds of the daemon's process: a thread, a GitHub adapter of its
own made as the composition root makes it, asking the stand-in over HTTP (its connection), the
store's pool (its Run recorded and ended), the Activity log, and one agent process started,
followed and swept by the process supervisor. Sessions are scripted (a shell prints a result
line). What a Delivery does on top (git, its steps) is measured whole by
``bench/daemon_life.py``."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import cast

from tests.orchestration.conftest import RunWorld, ScriptedStarter
from tests.orchestration.test_daemon import DaemonWorld, _ListedPoll
from tests.support.stand_in_scenario import NAME, OWNER, TOKENS, Sandbox
from thirdshift.bootstrap.credentials import GitHubAccess
from thirdshift.clock import SystemClock
from thirdshift.daemon import Pickup, RepositoryPoll, RunWatch
from thirdshift.harnesses.process import run_supervised
from thirdshift.records import Watchdogs
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs import RunOutcome, RunRequest
from thirdshift.scrub import Scrubber
from thirdshift.settings import load_settings
from thirdshift.store import Store

RUNS = 200
FIRST = 20
AT_ONCE = 10


def _resident_kib() -> int:
    """This process's resident memory now (not its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


# SQLAlchemy's pool for a SQLite file: five connections kept, ten more while Runs overlap. In
# WAL mode a connection holds the database and its -wal (and SQLite may hold a closed one's
# database file a while, for its locks); the -shm is one for all. Far under a leak of one a Run.
STORE_POOL_DESCRIPTORS = (5 + 10) * 3 + 1
_STORE_FILE = re.compile(r"thirdshift\.db(-wal|-shm|-journal)?$")


def _open_descriptors() -> tuple[int, int]:
    """The process's open descriptors: the store's SQLite files, and every other."""
    store = other = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed since the listing (the listing's own descriptor among them)
        if _STORE_FILE.search(target):
            store += 1
        else:
            other += 1
    return store, other


class Proposing(_ListedPoll):
    """A repository whose poll proposes ``numbers``, as the test sets them for each cycle."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, OWNER, NAME, [])
        self.numbers: list[int] = []

    def __call__(self, *, fresh: bool = False) -> list[Pickup]:
        return [Pickup(number) for number in self.numbers]


class LifeRun:
    """One Run's use of the daemon's process, scripted around real parts."""

    def __init__(self, world: RunWorld, sandbox: Sandbox, tmp: Path) -> None:
        self._world, self._tmp = world, tmp
        self._settings = load_settings(
            {
                "THIRDSHIFT_HOME": str(tmp / "home"),
                "THIRDSHIFT_GITHUB_API_URL": sandbox.stand_in.api_url,
                "GITHUB_TOKEN": TOKENS["wes"],
            }
        )
        self.lines = 0
        self._lock = threading.Lock()

    def __call__(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        store = self._world.store
        repository = store.ensure_repository(OWNER, NAME)
        run = store.start_run(repository, request.issue.number)
        watch.on_recorded(run.id)
        # As the composition root gives each Run its adapter (bootstrap.parts.run_parts).
        access = GitHubAccess(
            self._settings, SystemClock(watch.interrupt), Scrubber([TOKENS["wes"]]), watch.progress
        )
        with access.run_adapter(access.credentials(OWNER, NAME)) as github:
            github.issue(OWNER, NAME, 1)
        ending = run_supervised(
            ["sh", "-c", 'echo \'{"type": "result", "n": 1}\'; sleep 0.01'],
            cwd=self._tmp,
            env={"PATH": os.environ["PATH"]},
            on_line=self._seen,
            result_seen=lambda: False,
            watchdogs=Watchdogs(idle_seconds=30, wall_seconds=60, post_result_seconds=5),
            stop_signals=(signal.SIGTERM,),
            grace_seconds=1,
            interrupt=watch.interrupt,
        )
        assert ending.exit_status == 0, ending
        store.finish_run(run.id, RunState.SUCCEEDED)
        return RunOutcome(RunEnd.READY, run.id)

    def _seen(self, _line: bytes) -> None:
        with self._lock:
            self.lines += 1


def _settled_descriptors(bound: int, wait: float = 5.0) -> tuple[int, int]:
    """The descriptors open once those of the last Runs' ending threads are closed (on a busy
    machine a pipe or socket can outlive its Run by a moment): a leak stays, and is counted."""
    deadline = time.monotonic() + wait
    while (count := _open_descriptors())[1] > bound and time.monotonic() < deadline:
        time.sleep(0.05)
    return count


def test_two_hundred_runs_leave_memory_and_descriptors_where_the_first_twenty_left_them(
    world: RunWorld, sandbox: Sandbox, tmp_path: Path
) -> None:
    ada = sandbox.github("ada").get_repo(f"{OWNER}/{NAME}")
    ada.create_issue("The issue every Run reads")
    life = LifeRun(world, sandbox, tmp_path)
    dw = DaemonWorld(world)
    dw.daemon = dw.daemon_of(
        ScriptedStarter(life), max_runs=AT_ONCE, max_runs_per_repository=AT_ONCE
    )

    issues = Proposing(world.store)
    dw.daemon.watch(cast(RepositoryPoll, issues))

    def cycle(numbers: range) -> None:
        issues.numbers = list(numbers)  # what this cycle's poll proposes
        assert dw.daemon.once() == 0

    cycle(range(1, FIRST + 1))
    first = (_resident_kib(), _open_descriptors())
    cycle(range(FIRST + 1, RUNS + 1))
    # The store's pool may keep more connections than after the first twenty (a busy machine
    # makes more Runs overlap), up to its own bound; every other descriptor is where it was. A
    # leak of one descriptor a Run would be 180 more.
    allowed = first[1][1] + 2
    last = (_resident_kib(), _settled_descriptors(allowed))

    assert life.lines == RUNS
    assert len(world.store.list_runs(limit=RUNS + 10)) == RUNS
    assert last[0] <= first[0] * 1.10, (first, last)
    assert last[1][0] <= STORE_POOL_DESCRIPTORS, (first, last)
    assert last[1][1] <= allowed, (first, last)
