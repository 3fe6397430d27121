"""A daemon's memory and open descriptors over a long life: RSS and descriptors after 20, 50, 100
and 200 Runs, ``--at-once`` Runs side by side (``max_runs``).

Run from the repository root: ``.venv/bin/python bench/daemon_life.py [--runs 200] [--at-once 10]``.

One daemon in this process (the real ``Daemon``, its Activity log and SQLite store), with a
GitHub stand-in. Each Run does what a Run holds of the daemon's process, scripted around real
parts: its GitHub adapter made and closed as the composition root does (one request to the
stand-in), its Run recorded and ended in the store, one scripted agent process started, followed
and swept by the process supervisor. Figures, not assertions;
``tests/orchestration/test_daemon_life.py`` holds the bound.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import cast

from thirdshift.bootstrap.credentials import GitHubAccess
from thirdshift.clock import SystemClock
from thirdshift.daemon import (
    ActivityLog,
    Daemon,
    DaemonParts,
    Limits,
    Pickup,
    RepositoryPoll,
    RunWatch,
)
from thirdshift.harnesses.process import run_supervised
from thirdshift.records import Repository, Watchdogs
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs import RunOutcome, RunRequest
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.scrub import Scrubber
from thirdshift.settings import load_settings
from thirdshift.store import Store

TOKEN = "bench_maintainer_token_0123456789"
OWNER, NAME = "bench", "life"


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


class Proposing:
    """The poll of the bench's repository: it proposes what the cycle sets."""

    def __init__(self, store: Store) -> None:
        self.owner, self.name, self._store = OWNER, NAME, store
        self.numbers: list[int] = []

    @property
    def full_name(self) -> str:
        return f"{OWNER}/{NAME}"

    def repository(self) -> Repository:
        return self._store.ensure_repository(OWNER, NAME)

    def reap(self) -> None:
        pass

    def settles_in(self, _now: float) -> float | None:
        return None

    def __call__(self, *, fresh: bool = False) -> list[Pickup]:
        return [Pickup(number) for number in self.numbers]


class Starter:
    def __init__(self, store: Store, api_url: str, tmp: Path) -> None:
        self._store, self._tmp = store, tmp
        self._settings = load_settings(
            {
                "THIRDSHIFT_HOME": str(tmp / "home"),
                "THIRDSHIFT_GITHUB_API_URL": api_url,
                "GITHUB_TOKEN": TOKEN,
            }
        )

    def pickup(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        run = self._store.start_run(
            self._store.ensure_repository(OWNER, NAME), request.issue.number
        )
        watch.on_recorded(run.id)
        access = GitHubAccess(
            self._settings, SystemClock(watch.interrupt), Scrubber([TOKEN]), watch.progress
        )
        with access.run_adapter(access.credentials(OWNER, NAME)) as github:
            github.issue(OWNER, NAME, 1)
        run_supervised(
            ["sh", "-c", 'echo \'{"type": "result"}\''],
            cwd=self._tmp,
            env={"PATH": os.environ["PATH"]},
            on_line=lambda _line: None,
            result_seen=lambda: False,
            watchdogs=Watchdogs(idle_seconds=30, wall_seconds=60, post_result_seconds=5),
            stop_signals=(signal.SIGTERM,),
            grace_seconds=1,
            interrupt=watch.interrupt,
        )
        self._store.finish_run(run.id, RunState.SUCCEEDED)
        return RunOutcome(RunEnd.READY, run.id)

    def rescue(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        return self.pickup(request, watch)

    def architect(self, owner: str, name: str, watch: RunWatch) -> RunOutcome:
        raise AssertionError("the bench keeps no Architect schedule")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--at-once", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        with GitHubStandIn(tmp / "github") as stand_in:
            measure(stand_in, tmp, args.runs, args.at_once)


def measure(stand_in: GitHubStandIn, tmp: Path, runs: int, at_once: int) -> None:
    client = SandboxClient(stand_in.api_url)
    source = tmp / "source"
    source.mkdir()
    (source / "README.md").write_text("# life\n")
    client.add_repo(OWNER, NAME, source, {})
    client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "admin"})
    request = urllib.request.Request(
        f"{stand_in.api_url}/repos/{OWNER}/{NAME}/issues",
        data=json.dumps({"title": "Read by every Run"}).encode(),
        method="POST",
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=30).close()

    stop = threading.Event()
    clock = SystemClock(stop)
    store = Store.open(f"sqlite:///{tmp / 'life.db'}")
    activity = ActivityLog(
        store,
        daemon="bench",
        directory=tmp / "activity",
        clock=clock,
        scrub=Scrubber([TOKEN]),
        progress=lambda _line: None,
    )
    daemon = Daemon(
        DaemonParts(Starter(store, stand_in.api_url, tmp), store, activity, clock, print, "b"),
        Limits(
            at_once,
            at_once,
            poll_seconds=60,
            poll_jitter_seconds=0,
            reap_seconds=60,
            stop_seconds=10,
        ),
        stop,
    )
    poll = Proposing(store)
    daemon.watch(cast(RepositoryPoll, poll))  # a poll as the daemon asks it
    print(f"{runs} Runs through one daemon, {at_once} at once")
    print(f"{'after':>6} {'RSS MiB':>8} {'descriptors':>12} {'seconds':>8}")
    started, done = time.monotonic(), 0
    for mark in (20, 50, 100, 200, 500, 1000):
        if mark > runs:
            break
        poll.numbers = list(range(done + 1, mark + 1))
        daemon.once()
        done = mark
        elapsed = time.monotonic() - started
        print(f"{mark:>6} {resident_mib():>8.1f} {descriptors():>12} {elapsed:>8.1f}")
    store.close()


if __name__ == "__main__":
    main()
