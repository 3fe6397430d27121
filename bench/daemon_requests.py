"""What the daemon costs GitHub: requests and rate-limit points per poll cycle, per CI watch,
and the time from a label to its pickup.

Run from the repository root:
``.venv/bin/python bench/daemon_requests.py [--repos 50] [--owners 1]``.

It starts the GitHub stand-in (which answers conditional requests as GitHub does: a 304 costs no
rate-limit point) with ``--repos`` repositories spread over ``--owners`` organisations, one in
five holding an issue that is Ready but blocked (so, listed repository by repository, its
labeller, permission and blockers are asked every cycle), and measures with the real adapter
and the daemon's real polls:

- with each owner's listing (adr/0048) and with each repository listed on its own: a first
  cycle, a second cycle with nothing changed (the goals: zero points; with the owners' listing,
  at most two requests an owner), and a cycle after one label changed;
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

from thirdshift.clock import ManualClock, SystemClock
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
from thirdshift.daemon.listing import OwnerListings
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
    parser.add_argument("--owners", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        with GitHubStandIn(tmp / "github") as stand_in:
            measure(stand_in, tmp, args.repos, max(1, args.owners))


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


def measure(stand_in: GitHubStandIn, tmp: Path, count: int, owner_count: int) -> None:
    api = stand_in.api_url
    client = SandboxClient(api)
    owners = [OWNER] if owner_count == 1 else [f"{OWNER}-{i}" for i in range(owner_count)]
    repos = [(owners[i % owner_count], f"repo-{i:03d}") for i in range(count)]
    client.add_user("maintainer", TOKEN, {f"{o}/{n}": "admin" for o, n in repos})
    source = tmp / "source"
    source.mkdir()
    (source / "README.md").write_text("# bench\n")
    for index, (owner, name) in enumerate(repos):
        client.add_repo(owner, name, source, {})
        if (index // owner_count) % 5 == 0:  # one in five of each owner's
            blocker = rest(api, "POST", f"/repos/{owner}/{name}/issues", {"title": "Groundwork"})
            blocked = rest(
                api,
                "POST",
                f"/repos/{owner}/{name}/issues",
                {"title": "Build on it", "labels": ["ready-for-agent"]},
            )
            rest(
                api,
                "POST",
                f"/repos/{owner}/{name}/issues/{blocked['number']}/dependencies/blocked_by",
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
    hooks = PollHooks(
        running_here=lambda _n: False,
        stop_here=lambda _n, _why: None,
        kept_worktree=lambda _b: False,
    )

    def polls_of(listings: OwnerListings | None) -> list[RepositoryPoll]:
        parts = PollParts(
            store=store, rules=rules, activity=activity, clock=clock, listings=listings
        )
        return [RepositoryPoll(owner, name, github, parts, hooks) for owner, name in repos]

    def cycle(polls: list[RepositoryPoll], label: str) -> None:
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
            f"{label:<44} {sent:>5} requests  {not_modified:>5} answered 304  "
            f"{points_used(api) - before_points:>5} points  {elapsed:6.2f} s"
        )

    print(
        f"poll cycles over {count} repositories of {owner_count} owners "
        f"({(count + 4) // 5} with a blocked Ready issue)"
    )
    # An answer serves the rest of its cycle (the daemon keeps it 0.9 of a poll interval): the
    # listing's clock moves a whole interval between two cycles here, however long each takes.
    cycles = ManualClock()
    listed = OwnerListings(github, owners, max_age=54.0, clock=cycles, activity=activity)
    first_owner, first_name = repos[0]
    for listings, how in ((listed, "owners' listing"), (None, "each repository")):
        polls = polls_of(listings)
        cycle(polls, f"{how}: first cycle")
        cycles.advance(60)
        cycle(polls, f"{how}: second cycle, nothing changed")
        label = "wontfix" if listings is not None else "duplicate"
        rest(
            api,
            "POST",
            f"/repos/{first_owner}/{first_name}/issues/2/labels",
            {"labels": [label]},
        )
        cycles.advance(60)
        cycle(polls, f"{how}: after one label on one issue")

    # A CI watch: one head's check runs and statuses, polled as a Run's watch polls them.
    sha = rest(api, "GET", f"/repos/{first_owner}/{first_name}/git/ref/heads/main")["object"]["sha"]
    for polls_count in (10, 100):
        before_points = points_used(api)
        before = github.request_counts()
        for _ in range(polls_count):
            github.check_runs(first_owner, first_name, sha)
            github.commit_statuses(first_owner, first_name, sha)
        after = github.request_counts()
        print(
            f"CI watch, {polls_count:>3} polls of one head      {after.sent - before.sent:>5} "
            f"requests  {after.not_modified - before.not_modified:>5} answered 304  "
            f"{points_used(api) - before_points:>5} points"
        )

    # Label to pickup, with the scheduler, on one repository.
    daemon.watch(polls_of(None)[2])
    runner = threading.Thread(target=daemon.serve, daemon=True)
    runner.start()
    time.sleep(3)  # a few idle polls first
    labelled = time.monotonic()
    rest(
        api,
        "POST",
        f"/repos/{repos[2][0]}/{repos[2][1]}/issues",
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
