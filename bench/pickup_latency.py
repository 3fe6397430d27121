"""Label to pickup: how long a Ready label waits for the daemon, by poll and by webhook.

Run from the repository root: ``.venv/bin/python bench/pickup_latency.py [--samples 10]``.

It starts the GitHub stand-in with one repository and a scheduled daemon (the real polls, the
real GitHub adapter, a stand-in Run that only notes when it started) twice:

- by poll: ``--poll`` seconds between polls (default 10) and up to 1 s of jitter;
- by webhook: polls ten minutes apart; after each label, a delivery signed with the secret is
  POSTed to the daemon's real ``/webhook`` (the status page's server, its ``WebhookInbox``).

Each sample labels a new issue and times it to the pickup. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import socket
import statistics
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
    WatchTimes,
)
from thirdshift.github import GitHub
from thirdshift.run_states import RunEnd
from thirdshift.runs import RunOutcome, RunRequest
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.scrub import Scrubber
from thirdshift.store import Store
from thirdshift.web import StatusServer, WebhookDelivery, WebhookInbox, make_app

SECRET = "bench-webhook-secret-0123456789"
TOKEN = "bench_maintainer_token_0123456789"
OWNER = "bench"
NAME = "latency"


def rest(api: str, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
    """The stand-in's REST API as the maintainer (the bench's own writes: issues, labels)."""
    request = urllib.request.Request(
        api + path,
        data=json.dumps(payload).encode() if payload is not None else None,
        method=method,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


class _Picked:
    """The bench's ``RunStarter``: notes when each issue was picked up and takes its label
    off, so the next poll does not find it again."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.at: dict[int, float] = {}
        self.arrived = threading.Condition()

    def pickup(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        number = request.issue.number
        rest(self.api, "DELETE", f"/repos/{OWNER}/{NAME}/issues/{number}/labels/ready-for-agent")
        with self.arrived:
            self.at[number] = time.monotonic()
            self.arrived.notify_all()
        return RunOutcome(RunEnd.READY, 0)

    def rescue(self, request: RunRequest, watch: RunWatch) -> RunOutcome:
        raise AssertionError("the bench has no crashed Run")

    def architect(self, owner: str, name: str, watch: RunWatch) -> RunOutcome:
        raise AssertionError("the bench keeps no Architect schedule")

    def wait(self, number: int) -> float:
        with self.arrived:
            self.arrived.wait_for(lambda: number in self.at, timeout=900)
            return self.at[number]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def deliver(port: int, number: int, delivery: str) -> None:
    body = json.dumps(
        {
            "action": "labeled",
            "issue": {"number": number},
            "repository": {"full_name": f"{OWNER}/{NAME}"},
        }
    ).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/webhook",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": delivery,
            "X-Hub-Signature-256": signature,
        },
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


def run(stand_in: GitHubStandIn, tmp: Path, samples: int, poll: float, webhook: bool) -> None:
    api = stand_in.api_url
    stop = threading.Event()
    clock = SystemClock(stop)
    scrub = Scrubber([TOKEN, SECRET])
    github = GitHub(api, TOKEN, scrub=scrub, clock=clock)
    store = Store.open(f"sqlite:///{tmp / f'bench-{webhook}.db'}")
    activity = ActivityLog(
        store,
        daemon="bench",
        directory=tmp / "activity",
        clock=clock,
        scrub=scrub,
        progress=lambda _line: None,
    )
    picked = _Picked(api)
    interval = 600.0 if webhook else poll
    daemon = Daemon(
        DaemonParts(picked, store, activity, clock, lambda _line: None, "bench"),
        Limits(
            4,
            4,
            poll_seconds=interval,
            poll_jitter_seconds=0 if webhook else 1,
            reap_seconds=60,
            stop_seconds=10,
            watch_times=WatchTimes(poll_seconds_with_webhooks=600 if webhook else None),
        ),
        stop,
    )
    rules = ReadyRules.of(
        ready_label="ready-for-agent",
        in_progress_label="in-progress",
        excluded_labels=[],
        settle_seconds=0,
    )
    parts = PollParts(store=store, rules=rules, activity=activity, clock=clock)
    hooks = PollHooks(
        running_here=lambda _n: False,
        stop_here=lambda _n, _why: None,
        kept_worktree=lambda _b: False,
    )
    daemon.watch(RepositoryPoll(OWNER, NAME, github, parts, hooks))
    port = free_port()

    def wake(delivery: WebhookDelivery) -> None:
        daemon.wake(str(delivery.repository), delivery.what)

    inbox = WebhookInbox(SECRET, deliver=wake, refused=print)
    server = StatusServer(make_app(_NoPage(), token="t" * 32, inbox=inbox), "127.0.0.1", port)
    server.start()
    serving = threading.Thread(target=daemon.serve, daemon=True)
    serving.start()
    waits: list[float] = []
    try:
        time.sleep(1.5)  # the first poll
        for sample in range(samples):
            issue = rest(
                api,
                "POST",
                f"/repos/{OWNER}/{NAME}/issues",
                {"title": f"Sample {sample}", "labels": ["ready-for-agent"]},
            )
            labelled = time.monotonic()
            if webhook:
                deliver(port, int(issue["number"]), f"bench-{sample}")
            waits.append(picked.wait(int(issue["number"])) - labelled)
            time.sleep(0.2)
    finally:
        stop.set()
        serving.join(timeout=30)
        server.stop()
        store.close()
    how = "by webhook (polls 600 s apart)" if webhook else f"by poll every {poll:g} s + jitter"
    ordered = sorted(waits)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(
        f"label to pickup {how:<34} median {statistics.median(waits):6.2f} s  "
        f"p95 {p95:6.2f} s  ({samples} samples)"
    )


class _NoPage:
    def page(self) -> Any:
        raise AssertionError("the bench reads no page")

    def run_page(self, run_id: int) -> Any:
        raise AssertionError("the bench reads no Run page")

    def session_log(self, run_id: int, session_id: int) -> Any:
        raise AssertionError("the bench reads no Session log")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--poll", type=float, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        with GitHubStandIn(tmp / "github") as stand_in:
            client = SandboxClient(stand_in.api_url)
            client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "admin"})
            source = tmp / "source"
            source.mkdir()
            (source / "README.md").write_text("# bench\n")
            client.add_repo(OWNER, NAME, source, {})
            run(stand_in, tmp, args.samples, args.poll, webhook=False)
            run(stand_in, tmp, args.samples, args.poll, webhook=True)


if __name__ == "__main__":
    main()
