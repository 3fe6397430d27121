"""The Rescue race (issue 30) end to end: `thirdshift daemon` killed with SIGKILL right after a
Ticket's Self-merge into the Spec branch, then a second daemon, again and again. The GitHub
stand-in kills the daemon from inside its answer to the merge (the merge is made, the daemon
never hears of it), so every loop dies at the same point; the Ticket's Lease is left to run
out with the Spec's, renewed to about the Spec's, or renewed past it, in turn, which covers
each order the race can take. PostgreSQL, real git and the real claude CLI with scripted
turns; ``THIRDSHIFT_TEST_RESCUE_LOOPS`` sets the number of loops (the issue's acceptance is 20)."""

from __future__ import annotations

import os
import re
import signal
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon import OWNER, DaemonWorld, stop
from tests.support.real_cli import cli_path
from tests.support.run_world import TOKEN, bash, pull_request_file
from thirdshift.errors import StoreError
from thirdshift.records import Run
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.sandbox.github.limits import Exchange
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

LOOPS = int(os.environ.get("THIRDSHIFT_TEST_RESCUE_LOOPS", "3"))
LOOP_SECONDS = 120  # a loop takes about 20 s here; pytest's bound grows with the loops
# Short, for a quick Rescue; long enough that a renewal a loaded machine delays a few seconds
# does not lose it.
LEASE_SECONDS = 8
TICKET = 2  # each loop's Spec is #1, its one Ticket #2
MERGE = re.compile(rf"/repos/{OWNER}/(race-\d+)/pulls/\d+/merge$")


def repo_of(loop: int) -> str:
    return f"race-{loop}"


def ticket_marker(loop: int) -> str:
    return f"RESCUE-RACE-TICKET-{loop}"


def review_marker(loop: int) -> str:
    return f"RESCUE-RACE-SPEC-{loop}"


def sessions() -> list[dict[str, Any]]:
    """Each loop's Ticket session (a commit, then its pull request) and its Spec review."""
    found: list[dict[str, Any]] = []
    for loop in range(LOOPS):
        commit = bash(
            f"echo {loop} > ticket.txt && git add ticket.txt && git commit -qm 'The Ticket'",
            "commit",
        )
        pr = bash(pull_request_file("The Ticket", "Adds ticket.txt."), "pr")
        review = bash(pull_request_file("The Spec", "The Spec, reviewed."), "pr")
        found += [
            {
                "name": f"ticket-{loop}",
                "marker": ticket_marker(loop),
                "turns": [{"tool_calls": [commit]}, {"tool_calls": [pr]}, {"text": "In."}],
            },
            {
                "name": f"review-{loop}",
                "marker": review_marker(loop),
                "turns": [{"tool_calls": [review]}, {"text": "Reviewed; nothing to fix."}],
            },
        ]
    return found


class KillAtMerge:
    """The stand-in's hook: SIGKILL to the armed daemon as soon as GitHub has merged a pull
    request of its repository, before the answer leaves (the daemon never hears of it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.armed: tuple[str, int] | None = None  # (repository, daemon pid)
        self.killed = threading.Event()

    def arm(self, repo: str, pid: int) -> None:
        with self.lock:
            self.armed = (repo, pid)
            self.killed.clear()

    def __call__(self, exchange: Exchange) -> None:
        found = MERGE.search(exchange.path)
        if exchange.method != "PUT" or exchange.status != 200 or found is None:
            return
        with self.lock:
            if self.armed is None or self.armed[0] != found.group(1):
                return
            _, pid = self.armed
            self.armed = None
        os.kill(pid, signal.SIGKILL)  # only the daemon this test started, by its pid
        self.killed.set()


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GitHubStandIn, ScriptedModelServer, KillAtMerge]]:
    """The stand-in with a repository per loop and the kill hook, and the model server with
    every loop's sessions."""
    cli_path("claude")
    tmp = tmp_path_factory.mktemp("rescue-race")
    kill = KillAtMerge()
    stand_in = GitHubStandIn(tmp / "github", on_exchange=kill)
    stand_in.start()
    model = ScriptedModelServer(
        ModelScript.from_dict({"sessions": sessions()}), tmp / "model.jsonl"
    )
    model.start()
    try:
        client = SandboxClient(stand_in.api_url)
        repos = {f"{OWNER}/{repo_of(loop)}": "admin" for loop in range(LOOPS)}
        client.add_user("maintainer", TOKEN, repos)
        for loop in range(LOOPS):
            source = tmp / f"source-{loop}"
            source.mkdir()
            (source / "README.md").write_text(f"# {repo_of(loop)}\n")
            client.add_repo(OWNER, repo_of(loop), source, {})
        yield stand_in, model, kill
    finally:
        model.stop()
        stand_in.stop()


def ready_spec(world: DaemonWorld, loop: int) -> None:
    """The loop's repository gets a Ready Spec (#1) with one Ticket (#2)."""
    repo = repo_of(loop)
    spec = world.rest(
        "POST",
        f"/repos/{OWNER}/{repo}/issues",
        {"title": "One ticket", "body": f"The ticket, then the Spec PR. {review_marker(loop)}"},
    )
    ticket = world.rest(
        "POST",
        f"/repos/{OWNER}/{repo}/issues",
        {"title": "The Ticket", "body": f"Add ticket.txt. {ticket_marker(loop)}"},
    )
    assert (int(spec["number"]), int(ticket["number"])) == (1, TICKET)
    world.rest(
        "POST", f"/repos/{OWNER}/{repo}/issues/1/sub_issues", {"sub_issue_id": int(ticket["id"])}
    )
    world.rest("POST", f"/repos/{OWNER}/{repo}/issues/1/labels", {"labels": ["ready-for-agent"]})


def runs_in(world: DaemonWorld, repo: str) -> list[Run]:
    store = Store.open(world.database_url, migrate=False)
    try:
        runs = store.list_runs(limit=1000, repository=f"{OWNER}/{repo}")
    except StoreError:  # the daemon has not made the tables yet
        return []
    finally:
        store.close()
    return sorted(runs, key=lambda run: run.id)


def renew_ticket_lease(world: DaemonWorld, repo: str, seconds: int) -> None:
    """As if the dead Ticket Run had renewed its Lease at the moment of the kill, for
    ``seconds``: a Lease the Rescue may find still live, or see run out while it works."""
    if seconds == 0:
        return
    store = Store.open(world.database_url, migrate=False)
    try:
        repository = store.ensure_repository(OWNER, repo)
        [lease] = [le for le in store.live_leases(repository) if le.issue_number == TICKET]
        assert store.renew_lease(lease, timedelta(seconds=seconds)) is not None
    finally:
        store.close()


def check_landed_once_and_ready(world: DaemonWorld, repo: str, rescue_err: str) -> None:
    """The Ticket: one Ticket Run, crashed and recorded landed (by the Rescue), one merged pull
    request into the Spec branch, closed, its session opened once; the Spec: a crashed Spec
    run, then one that succeeded with the Spec PR open and ready."""
    runs = runs_in(world, repo)
    spec_runs = [(r.kind, r.state) for r in runs if r.issue_number == 1]
    assert spec_runs == [("spec", "crashed"), ("spec", "succeeded")]
    [ticket_run] = [r for r in runs if r.issue_number == TICKET]
    assert (ticket_run.kind, ticket_run.state, ticket_run.landed) == ("merge", "crashed", True)
    said = f"Ticket #{TICKET} landed in spec-1 before Run {ticket_run.id} could record it"
    assert said in rescue_err
    pulls = world.rest("GET", f"/repos/{OWNER}/{repo}/pulls?state=all&per_page=100")
    tickets = [
        (p["base"]["ref"], bool(p["merged_at"])) for p in pulls if p["base"]["ref"] != "main"
    ]
    assert tickets == [("spec-1", True)]
    [spec_pull] = [p for p in pulls if p["base"]["ref"] == "main"]
    assert (spec_pull["head"]["ref"], spec_pull["state"], spec_pull["draft"]) == (
        "spec-1",
        "open",
        False,
    )
    assert world.rest("GET", f"/repos/{OWNER}/{repo}/issues/{TICKET}")["state"] == "closed"


@pytest.mark.timeout(60 + LOOP_SECONDS * LOOPS)
def test_a_daemon_killed_right_after_a_tickets_merge_records_it_landed_every_time(
    servers: tuple[GitHubStandIn, ScriptedModelServer, KillAtMerge],
    tmp_path: Path,
    postgres_url: str,
) -> None:
    """kill -9 of the daemon the moment GitHub merges the Ticket's pull request into the Spec
    branch, in a loop: the next daemon's Rescue records the Ticket landed every time (never
    running it again, whichever of the two Leases runs out first) and the Spec run ends with
    its Spec PR ready."""
    stand_in, model, kill = servers
    world = DaemonWorld(tmp_path, stand_in, model, postgres_url)
    try:
        for loop in range(LOOPS):
            repo, home = repo_of(loop), f"home-{loop}"
            ready_spec(world, loop)
            settings = {
                "repositories": f'["{OWNER}/{repo}"]',
                "lease_seconds": str(LEASE_SECONDS),
            }
            first = world.daemon(home, **settings)
            kill.arm(repo, first.pid)
            world.wait_until(kill.killed.is_set, timeout=180, what=f"loop {loop}'s merge")
            # None, about the Spec's, past the Spec's: each order of the two Leases in turn.
            renew_ticket_lease(world, repo, LEASE_SECONDS * (loop % 3))
            first.communicate()
            world.processes.remove(first)

            second = world.daemon(home, **settings)

            def rescue_ended(repo: str = repo) -> bool:
                """The Rescue's Spec run ended (however), and no Ticket Run says running."""
                runs = runs_in(world, repo)
                specs = [r.state for r in runs if r.kind == "spec"]
                return (
                    len(specs) == 2
                    and specs[1] != "running"
                    and "running" not in {r.state for r in runs if r.issue_number == TICKET}
                )

            world.wait_until(rescue_ended, timeout=LOOP_SECONDS, what=f"loop {loop}'s Rescue")
            status, err = stop(second)
            world.processes.remove(second)
            assert status == 0, err[-3000:]
            check_landed_once_and_ready(world, repo, err)
            openings = [
                r
                for r in model.requests()
                if r.get("session") == f"ticket-{loop}" and r.get("turn") == 0
            ]
            assert len(openings) == 1, f"loop {loop}: the Ticket's session ran again"
    finally:
        for process in world.processes:  # a failed loop leaves its daemon: stop it by its pid
            if process.poll() is None:
                process.kill()
                process.communicate()
