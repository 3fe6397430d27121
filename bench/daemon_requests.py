"""What the daemon costs GitHub: requests and rate-limit points per poll cycle, per CI watch,
and the time from a label to its pickup.

Run from the repository root: ``.venv/bin/python bench/daemon_requests.py [--repos 50]``.

It starts the GitHub stand-in (which answers conditional requests as GitHub does: a 304 costs no
rate-limit point) with ``--repos`` repositories, one in five holding an issue that is Ready but
blocked (so its labeller, permission and blockers are asked every cycle), and measures with the
real adapter and the daemon's real polls:

- a first cycle, a second cycle with nothing changed (the goal: zero points), and a cycle after
  one label changed;
- a CI watch of one head polled 10 and 100 times (the goal: points flat in the length of CI);
- label to pickup: a scheduled daemon (poll every 2 s, up to 0.5 s jitter) with a stand-in Run.

Points are read from the stand-in's own rate-limit window. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from thirdshift.clock import SystemClock
from thirdshift.daemon import (
    ActivityLog,
    Daemon,
    DaemonParts,
    Limits,
    PollHooks,
    PollParts,
    ReadyRules,
    RepositoryPoll,
    RunWatch,
)
from thirdshift.github import GitHub
from thirdshift.run_states import RunEnd
from thirdshift.runs import RunOutcome, RunRequest
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.scrub import Scrubber
from thirdshift.store import Store

TOKEN = "bench_maintainer_token_0123456789"
OWNER = "bench"


def rest(api: str, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(
        api + path,
        data=data,
        method=method,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def points_used(api: str) -> int:
    """The core rate-limit points spent so far (asking costs none)."""
    return int(rest(api, "GET", "/rate_limit")["resources"]["core"]["used"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repos", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        with GitHubStandIn(tmp / "github") as stand_in:
            measure(stand_in, tmp, args.repos)


class _FirstPickup:
    """The bench daemon's ``RunStarter``: no Run at all; the first pickup is noted (when) and
    stops the daemon."""

    def __init__(self, picked: list[float], stop: threading.Event) -> None:
        self._picked, self._stop = picked, stop

    def pickup(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        self._picked.append(time.monotonic())
        self._stop.set()
        return RunOutcome(RunEnd.READY, 0)

    def rescue(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        return self.pickup(request, watch)

    def architect(self, owner: str, name: str, watch: RunWatch) -> RunOutcome:
        raise AssertionError("the bench keeps no Architect schedule")


def measure(stand_in: GitHubStandIn, tmp: Path, count: int) -> None:
    api = stand_in.api_url
    client = SandboxClient(api)
    names = [f"repo-{i:02d}" for i in range(count)]
    client.add_user("maintainer", TOKEN, {f"{OWNER}/{n}": "admin" for n in names})
    source = tmp / "source"
    source.mkdir()
    (source / "README.md").write_text("# bench\n")
    for index, name in enumerate(names):
        client.add_repo(OWNER, name, source, {})
        if index % 5 == 0:
            blocker = rest(api, "POST", f"/repos/{OWNER}/{name}/issues", {"title": "Groundwork"})
            blocked = rest(
                api,
                "POST",
                f"/repos/{OWNER}/{name}/issues",
                {"title": "Build on it", "labels": ["ready-for-agent"]},
            )
            rest(
                api,
                "POST",
                f"/repos/{OWNER}/{name}/issues/{blocked['number']}/dependencies/blocked_by",
                {"issue_id": blocker["id"]},
            )

    stop = threading.Event()
    clock = SystemClock(stop)
    scrub = Scrubber([TOKEN])
    github = GitHub(api, TOKEN, scrub=scrub, clock=clock)
    store = Store.open(f"sqlite:///{tmp / 'bench.db'}")
    activity = ActivityLog(
        store,
        daemon="bench",
        directory=tmp / "activity",
        clock=clock,
        scrub=scrub,
        progress=lambda _line: None,
    )
    rules = ReadyRules.of(
        ready_label="ready-for-agent",
        in_progress_label="in-progress",
        excluded_labels=["needs-triage"],
        settle_seconds=0,
    )
    picked: list[float] = []

    starter = _FirstPickup(picked, stop)
    daemon = Daemon(
        DaemonParts(starter, store, activity, clock, lambda _line: None, "bench"),
        Limits(2, 1, poll_seconds=2, poll_jitter_seconds=0.5, reap_seconds=60, stop_seconds=10),
        stop,
    )
    parts = PollParts(store=store, rules=rules, activity=activity, clock=clock)
    hooks = PollHooks(
        running_here=lambda _n: False,
        stop_here=lambda _n, _why: None,
        kept_worktree=lambda _b: False,
    )
    polls = [RepositoryPoll(OWNER, name, github, parts, hooks) for name in names]

    def cycle(label: str) -> None:
        before_points = points_used(api)
        before = github.request_counts()
        started = time.monotonic()
        for poll in polls:
            poll()
        elapsed = time.monotonic() - started
        after = github.request_counts()
        sent = after.sent - before.sent
        not_modified = after.not_modified - before.not_modified
        print(
            f"{label:<34} {sent:>5} requests  {not_modified:>5} answered 304  "
            f"{points_used(api) - before_points:>5} points  {elapsed:6.2f} s"
        )

    print(f"poll cycles over {count} repositories ({(count + 4) // 5} with a blocked Ready issue)")
    cycle("first cycle")
    cycle("second cycle, nothing changed")
    rest(api, "POST", f"/repos/{OWNER}/{names[0]}/issues/2/labels", {"labels": ["wontfix"]})
    cycle("after one label on one issue")

    # A CI watch: one head's check runs and statuses, polled as a Run's watch polls them.
    sha = rest(api, "GET", f"/repos/{OWNER}/{names[0]}/git/ref/heads/main")["object"]["sha"]
    for polls_count in (10, 100):
        before_points = points_used(api)
        before = github.request_counts()
        for _ in range(polls_count):
            github.check_runs(OWNER, names[0], sha)
            github.commit_statuses(OWNER, names[0], sha)
        after = github.request_counts()
        print(
            f"CI watch, {polls_count:>3} polls of one head      {after.sent - before.sent:>5} "
            f"requests  {after.not_modified - before.not_modified:>5} answered 304  "
            f"{points_used(api) - before_points:>5} points"
        )

    # Label to pickup, with the scheduler, on one repository.
    daemon.watch(polls[2])
    runner = threading.Thread(target=daemon.serve, daemon=True)
    runner.start()
    time.sleep(3)  # a few idle polls first
    labelled = time.monotonic()
    rest(
        api,
        "POST",
        f"/repos/{OWNER}/{names[2]}/issues",
        {"title": "Now", "labels": ["ready-for-agent"]},
    )
    runner.join(timeout=30)
    if picked:
        print(
            f"label to pickup (poll every 2 s + up to 0.5 s jitter): {picked[0] - labelled:.2f} s"
        )
    store.close()


if __name__ == "__main__":
    main()
