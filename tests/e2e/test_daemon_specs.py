"""`thirdshift daemon` and Spec runs end to end: the daemon command (killed with SIGKILL, or two
of them), PostgreSQL shared by them, the GitHub stand-in, real git and the real claude CLI with
scripted turns. The stand-in and the model server are the file's; each test has a repository,
homes and a database schema of its own."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon import OWNER, DaemonWorld, stop
from tests.support.real_cli import cli_path
from tests.support.run_world import TOKEN, bash, pull_request_file
from thirdshift.errors import StoreError
from thirdshift.records import Run
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

REPOSITORIES = ("killed", "shared")


def ticket_marker(repo: str, number: int) -> str:
    return f"SPEC-TICKET-{repo}-{number}"


def review_marker(repo: str) -> str:
    return f"SPEC-BRIEF-{repo}"


def ticket_turns(repo: str, number: int, *, hang: bool) -> list[dict[str, Any]]:
    """Commit the Ticket's file (again, when a crash kept the first commit aside), then its
    pull request. With ``hang`` the model hangs after the first commit, for a kill."""
    name = f"ticket-{number}.txt"
    commit = bash(
        f"echo {number} > {name} && git add {name} && "
        f"(git diff --cached --quiet || git commit -qm 'Ticket {number}')",
        "commit",
    )
    pr = bash(pull_request_file(f"Ticket {number}", f"Adds {name}."), "pr")
    turns: list[dict[str, Any]] = [{"tool_calls": [commit]}]
    if hang:
        turns += [{"hang": True}, {"tool_calls": [commit]}]
    return [*turns, {"tool_calls": [pr]}, {"text": f"Ticket {number} is in."}]


def sessions() -> list[dict[str, Any]]:
    """Each repository's two Tickets (#2, #3; hanging in ``killed``) and its Spec review."""
    found: list[dict[str, Any]] = []
    for repo in REPOSITORIES:
        for number in (2, 3):
            found.append(
                {
                    "name": f"{repo}-{number}",
                    "marker": ticket_marker(repo, number),
                    "turns": ticket_turns(repo, number, hang=repo == "killed"),
                }
            )
        review = bash(pull_request_file("Both Tickets", "The Spec, reviewed."), "pr")
        found.append(
            {
                "name": f"{repo}-review",
                "marker": review_marker(repo),
                "turns": [{"tool_calls": [review]}, {"text": "Reviewed; nothing to fix."}],
            }
        )
    return found


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GitHubStandIn, Any]]:
    """The stand-in with a repository per test, each holding a Ready Spec (#1) with two
    Tickets (#2, #3), and the model server with every test's sessions."""
    cli_path("claude")
    tmp = tmp_path_factory.mktemp("daemon-specs")
    stand_in = GitHubStandIn(tmp / "github")
    stand_in.start()
    model = ScriptedModelServer(
        ModelScript.from_dict({"sessions": sessions()}), tmp / "model.jsonl"
    )
    model.start()
    try:
        client = SandboxClient(stand_in.api_url)
        client.add_user("maintainer", TOKEN, {f"{OWNER}/{r}": "admin" for r in REPOSITORIES})
        for repo in REPOSITORIES:
            source = tmp / f"source-{repo}"
            source.mkdir()
            (source / "README.md").write_text(f"# {repo}\n")
            client.add_repo(OWNER, repo, source, {})
        yield stand_in, model
    finally:
        model.stop()
        stand_in.stop()


def spec_world(servers: Any, tmp_path: Path, postgres_url: str, repo: str) -> DaemonWorld:
    """A world on the file's servers, with the repository's Ready Spec and its Tickets."""
    stand_in, model = servers
    world = DaemonWorld(tmp_path, stand_in, model, postgres_url)
    spec = world.rest(
        "POST",
        f"/repos/{OWNER}/{repo}/issues",
        {
            "title": "Two tickets",
            "body": f"Both tickets, then one pull request. {review_marker(repo)}",
        },
    )
    for number in (2, 3):
        made = world.rest(
            "POST",
            f"/repos/{OWNER}/{repo}/issues",
            {"title": f"Ticket {number}", "body": f"Add it. {ticket_marker(repo, number)}"},
        )
        assert int(made["number"]) == number
        world.rest(
            "POST",
            f"/repos/{OWNER}/{repo}/issues/1/sub_issues",
            {"sub_issue_id": int(made["id"])},
        )
    assert int(spec["number"]) == 1
    world.rest("POST", f"/repos/{OWNER}/{repo}/issues/1/labels", {"labels": ["ready-for-agent"]})
    return world


def runs_of(world: DaemonWorld) -> list[Run]:
    store = Store.open(world.database_url, migrate=False)
    try:
        return sorted(store.list_runs(limit=100), key=lambda run: run.id)
    except StoreError:  # the daemon has not made the tables yet
        return []
    finally:
        store.close()


def spec_succeeded(world: DaemonWorld) -> bool:
    return any(run.kind == "spec" and run.state == "succeeded" for run in runs_of(world))


def settings_for(repo: str) -> dict[str, str]:
    return {
        "repositories": f'["{OWNER}/{repo}"]',
        "spec_parallel": "2",
        "max_runs": "2",
        "lease_seconds": "4",
    }


def check_each_ticket_merged_once(world: DaemonWorld, repo: str) -> None:
    """Each Ticket: one pull request, merged into the Spec branch, and closed; the Spec PR
    open and ready into main, naming both."""
    pulls = world.rest("GET", f"/repos/{OWNER}/{repo}/pulls?state=all&per_page=100")
    tickets = sorted(
        (p["head"]["ref"], p["base"]["ref"], bool(p["merged_at"]))
        for p in pulls
        if p["base"]["ref"] != "main"
    )
    assert tickets == [("issue-2", "spec-1", True), ("issue-3", "spec-1", True)]
    [spec_pull] = [p for p in pulls if p["base"]["ref"] == "main"]
    assert (spec_pull["head"]["ref"], spec_pull["state"], spec_pull["draft"]) == (
        "spec-1",
        "open",
        False,
    )
    for number in (2, 3):
        assert f"#{number}" in spec_pull["body"]
        assert world.rest("GET", f"/repos/{OWNER}/{repo}/issues/{number}")["state"] == "closed"
    claims = [c for c in world.comments(repo, 1) if CLAIM_MARKER in c]
    assert len(claims) == 1


def test_a_daemon_killed_in_the_middle_of_two_tickets_is_rescued_and_loses_nothing(
    servers: Any, tmp_path: Path, postgres_url: str
) -> None:
    """kill -9 while both Tickets' sessions work: the restarted daemon's poll records the Spec
    run and both Ticket Runs as crashed, Rescues the Spec run, and Rescues each Ticket Run
    within it (never as a Run of its own). Each Ticket ends with exactly one merged pull
    request, and the Spec PR is ready."""
    world = spec_world(servers, tmp_path, postgres_url, "killed")
    settings = settings_for("killed")
    first = world.daemon("home", **settings)

    def both_hanging() -> bool:
        hung = {r.get("session") for r in world.model.requests() if r.get("turn") == 1}
        return {"killed-2", "killed-3"} <= hung

    world.wait_until(both_hanging, timeout=180, what="both Tickets' sessions reaching their hang")
    first.send_signal(signal.SIGKILL)
    first.communicate()
    world.processes.remove(first)

    second = world.daemon("home", **settings)
    world.wait_until(lambda: spec_succeeded(world), timeout=300, what="the rescued Spec run")
    status, err = stop(second)
    assert status == 0, err[-3000:]

    check_each_ticket_merged_once(world, "killed")
    runs = runs_of(world)
    by_issue = {n: [(r.kind, r.state) for r in runs if r.issue_number == n] for n in (1, 2, 3)}
    assert by_issue == {
        1: [("spec", "crashed"), ("spec", "succeeded")],
        2: [("merge", "crashed"), ("merge", "succeeded")],
        3: [("merge", "crashed"), ("merge", "succeeded")],
    }
    crashed_spec, rescue = (r for r in runs if r.issue_number == 1)
    assert [r.parent_run_id for r in runs if r.issue_number != 1] == [
        crashed_spec.id,
        crashed_spec.id,
        rescue.id,
        rescue.id,
    ]
    log = (world.tmp / "home" / "activity" / "acme-killed.log").read_text()
    assert f"Spec run {crashed_spec.id} crashed; starting a Rescue" in log
    for number in (2, 3):
        [crashed] = [r for r in runs if r.issue_number == number and r.state == "crashed"]
        assert f"rescuing Run {crashed.id}" in err, err


def test_two_daemons_on_one_database_make_one_spec_run_and_run_each_ticket_once(
    servers: Any, tmp_path: Path, postgres_url: str
) -> None:
    """Two daemons, their own homes, one PostgreSQL, a Ready Spec: one Spec run, each Ticket
    run once as its Ticket Run, one claim comment, and both daemons stop with exit 0."""
    world = spec_world(servers, tmp_path, postgres_url, "shared")
    settings = settings_for("shared")
    first = world.daemon("home-a", **settings)
    second = world.daemon("home-b", **settings)

    world.wait_until(lambda: spec_succeeded(world), timeout=300, what="the Spec run")
    status_a, err_a = stop(first)
    status_b, err_b = stop(second)
    assert (status_a, status_b) == (0, 0), err_a[-3000:] + err_b[-3000:]

    check_each_ticket_merged_once(world, "shared")
    runs = runs_of(world)
    [spec_run] = [r for r in runs if r.issue_number == 1]
    assert (spec_run.kind, spec_run.state) == ("spec", "succeeded")
    tickets = sorted(
        (r.issue_number, r.parent_run_id, r.state) for r in runs if r.issue_number != 1
    )
    assert tickets == [(2, spec_run.id, "succeeded"), (3, spec_run.id, "succeeded")]
    openings = [
        str(r.get("session"))
        for r in world.model.requests()
        if r.get("session") in ("shared-2", "shared-3") and r.get("turn") == 0
    ]
    assert sorted(openings) == ["shared-2", "shared-3"]  # each Ticket's session ran once
