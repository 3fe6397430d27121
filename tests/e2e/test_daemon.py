"""`thirdshift daemon` end to end: the command (two of them at once), the GitHub stand-in with
three repositories, real git, the real claude CLI with scripted turns, and PostgreSQL shared by
the daemons."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.app_keys import key_pair
from tests.support.real_cli import BIN_DIR, cli_path
from tests.support.run_world import TOKEN, bash, pull_request_file
from tests.support.warm_start import Started, start_thirdshift
from thirdshift.errors import StoreError
from thirdshift.run_states import RunState
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.sandbox.github.limits import Faults
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer, claude_env
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

OWNER = "acme"
REPOS = ("alpha", "beta", "gamma")


def marker(repo: str, number: int) -> str:
    return f"DAEMON-TASK-{repo}-{number}"


def work_turns(repo: str, number: int, *, hang: bool = False) -> list[dict[str, Any]]:
    """Write a file and commit it (again if a crash lost it), then the Pull request file. With
    ``hang``, the session hangs after the commit, for a kill."""
    name = f"done-{number}.txt"
    commit = bash(
        f"echo {marker(repo, number)} > {name} && git add {name} && "
        f"(git diff --cached --quiet || git commit -qm 'Do task {number}')",
        "commit",
    )
    pr = bash(pull_request_file(f"Do task {number}", f"Does it.\n\nCloses #{number}"), "pr")
    turns: list[dict[str, Any]] = [{"tool_calls": [commit]}]
    if hang:
        turns.append({"hang": True})
        turns.append({"tool_calls": [commit]})
    turns += [{"tool_calls": [pr]}, {"text": f"Task {number} is done."}]
    return turns


@dataclass
class DaemonWorld:
    tmp: Path
    stand_in: GitHubStandIn
    model: ScriptedModelServer
    database_url: str
    processes: list[Started] = field(default_factory=list)
    issues: dict[str, list[int]] = field(default_factory=dict)
    agent_env: dict[str, str] = field(default_factory=dict)
    """Variables for the agent CLIs besides the scripted model server's (their retries)."""
    started: int = 0
    """Daemons started so far: each writes its stderr to a file of its own. (Named after
    ``processes`` it was reused once a test removed a killed daemon from it, and a process the
    killed daemon left behind wrote over the next daemon's lines.)"""

    def env(self, home: str, **settings: str) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("THIRDSHIFT_", "ANTHROPIC", "CLAUDE", "CODEX", "OPENAI"))
        }
        agent_home = self.tmp / f"agent-{home}"
        agent_home.mkdir(exist_ok=True)
        base.update(claude_env(self.model.url, agent_home))
        base.update(self.agent_env)
        base["PATH"] = (
            f"{BIN_DIR}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{base['PATH']}"
        )
        base.update(
            {
                "THIRDSHIFT_HOME": str(self.tmp / home),
                "THIRDSHIFT_GITHUB_API_URL": self.stand_in.api_url,
                "GITHUB_TOKEN": TOKEN,
                "THIRDSHIFT_DATABASE_URL": self.database_url,
                "THIRDSHIFT_REPOSITORIES": '["' + '","'.join(f"{OWNER}/{r}" for r in REPOS) + '"]',
                "THIRDSHIFT_CI_GRACE_SECONDS": "1",
                "THIRDSHIFT_CI_POLL_SECONDS": "0.2",
                "THIRDSHIFT_SESSION_POST_RESULT_SECONDS": "5",
                "THIRDSHIFT_SESSION_STOP_GRACE_SECONDS": "3",
                "THIRDSHIFT_POLL_SECONDS": "1",
                "THIRDSHIFT_POLL_JITTER_SECONDS": "0.5",
                "THIRDSHIFT_SETTLE_SECONDS": "0",
                "THIRDSHIFT_MAX_RUNS": "2",
                "THIRDSHIFT_MAX_RUNS_PER_REPOSITORY": "1",
                "THIRDSHIFT_DAEMON_NAME": home,
                "THIRDSHIFT_SALVAGE_WAIT_SECONDS": "20",
                "THIRDSHIFT_MIN_FREE_DISK_MB": "0",
            }
        )
        base.update({f"THIRDSHIFT_{k.upper()}": v for k, v in settings.items()})
        return base

    def daemon(self, home: str, *args: str, **settings: str) -> Started:
        # stderr goes to a file: a pipe nobody reads until the end could fill and stall the
        # daemon, and a test that times out can still show what each daemon said.
        log = self.tmp / f"{home}-{self.started}.stderr"
        self.started += 1
        with log.open("w") as sink:
            process = start_thirdshift(
                ["daemon", *args],
                env=self.env(home, **settings),
                cwd=self.tmp,
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        _STDERR[process.pid] = log
        self.processes.append(process)
        return process

    def status(self, home: str, *args: str) -> str:
        """``thirdshift status`` as a person on that home runs it: its stdout."""
        process = start_thirdshift(["status", *args], env=self.env(home), cwd=self.tmp)
        try:
            stdout, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        assert process.returncode == 0, stderr
        return stdout

    def rest(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        import json
        import urllib.request

        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            self.stand_in.api_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def ready_issue(self, repo: str, title: str) -> int:
        number = len(self.issues.setdefault(repo, [])) + 1
        body = f"Do the task. {marker(repo, number)}"
        issue = self.rest(
            "POST",
            f"/repos/{OWNER}/{repo}/issues",
            {"title": title, "body": body, "labels": ["ready-for-agent"]},
        )
        assert int(issue["number"]) == number
        self.issues[repo].append(number)
        return number

    def issue_url(self, repo: str, number: int) -> str:
        return f"{self.stand_in.web_url}/{OWNER}/{repo}/issues/{number}"

    def ready_pulls(self, repo: str) -> list[Any]:
        pulls = self.rest("GET", f"/repos/{OWNER}/{repo}/pulls?state=all&per_page=100")
        return [p for p in pulls if not p["draft"]]

    def comments(self, repo: str, number: int) -> list[str]:
        found = self.rest("GET", f"/repos/{OWNER}/{repo}/issues/{number}/comments")
        return [str(c["body"]) for c in found]

    def succeeded(self) -> int:
        """Runs recorded succeeded (a ready pull request alone is not the end: CI is watched
        after it is marked ready)."""
        store = Store.open(self.database_url, migrate=False)
        try:
            return len(store.list_runs(limit=500, state=RunState.SUCCEEDED))
        except StoreError:  # the daemons have not made the tables yet
            return 0
        finally:
            store.close()

    def wait_until(self, done: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            for process in self.processes:
                if process.poll() is not None and process.returncode != 0:
                    raise AssertionError(
                        f"a daemon exited {process.returncode}:\n{stderr_of(process)[-4000:]}"
                    )
            time.sleep(0.5)
        said = "".join(
            f"\n--- {_STDERR[p.pid].name} ---\n{stderr_of(p)[-3000:]}"
            for p in self.processes
            if p.pid in _STDERR
        )
        raise AssertionError(f"{what} did not happen within {timeout}s{said}")


@pytest.fixture
def make_world(tmp_path: Path, postgres_url: str) -> Iterator[Any]:
    made: list[DaemonWorld] = []

    def make(sessions: list[dict[str, Any]]) -> DaemonWorld:
        cli_path("claude")
        stand_in = GitHubStandIn(tmp_path / "github")
        stand_in.start()
        model = ScriptedModelServer(
            ModelScript.from_dict({"sessions": sessions}), tmp_path / "model.jsonl"
        )
        model.start()
        client = SandboxClient(stand_in.api_url)
        client.add_user("maintainer", TOKEN, {f"{OWNER}/{r}": "admin" for r in REPOS})
        for repo in REPOS:
            source = tmp_path / f"source-{repo}"
            source.mkdir()
            (source / "README.md").write_text(f"# {repo}\n")
            client.add_repo(OWNER, repo, source, {})
        world = DaemonWorld(tmp_path, stand_in, model, postgres_url)
        made.append(world)
        return world

    yield make
    for world in made:
        for process in world.processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
        world.model.stop()
        world.stand_in.stop()


_STDERR: dict[int, Path] = {}


def stderr_of(process: Started) -> str:
    """What the process wrote to stderr so far: its file (a daemon's), else its pipe once it
    ended."""
    log = _STDERR.get(process.pid)
    if log is not None:
        return log.read_text(errors="replace")
    _, err = process.communicate()
    return str(err or "")


def stop(process: Started, timeout: float = 120) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=timeout)
    return process.returncode, stderr_of(process) if process.pid in _STDERR else str(err)


def test_two_daemons_on_one_database_run_each_of_twelve_issues_exactly_once(
    make_world: Any,
) -> None:
    """Twelve Ready issues across three repositories, two daemons with their own homes on one
    PostgreSQL, and a GitHub that answers 10% of requests with a 5xx, loses the answer of 10%
    of the writes it made, and rate-limits everyone for a while: every issue still gets exactly
    one ready pull request and one claim comment, both daemons work, and each stops on SIGTERM
    with exit 0."""
    counts = {"alpha": 4, "beta": 4, "gamma": 4}
    sessions = [
        {"name": f"{repo}-{n}", "marker": marker(repo, n), "turns": work_turns(repo, n)}
        for repo, count in counts.items()
        for n in range(1, count + 1)
    ]
    world = make_world(sessions)
    for repo, count in counts.items():
        for n in range(1, count + 1):
            world.ready_issue(repo, f"Task {n} of {repo}")

    # The second daemon acts as a GitHub App whose installation tokens last 6 s here (an hour
    # on GitHub): it renews them all along, through the faults and the rate limit.
    private, public = key_pair()
    app_id = world.stand_in.add_app(
        "night-shift", public, [f"{OWNER}/{r}" for r in REPOS], token_seconds=6
    )
    world.stand_in.set_faults(
        Faults(error_rate=0.1, statuses=(500, 502, 503), lost_answers=0.1, rng=random.Random(7))
    )
    first = world.daemon("home-a")
    second = world.daemon("home-b", github_app_id=str(app_id), github_app_private_key=private)
    world.wait_until(lambda: world.succeeded() >= 4, timeout=300, what="four Runs succeeding")
    world.stand_in.limit_for(3)
    world.wait_until(lambda: world.succeeded() == 12, timeout=600, what="twelve Runs succeeding")
    status_a, err_a = stop(first)
    status_b, err_b = stop(second)
    assert (status_a, status_b) == (0, 0), err_a[-3000:] + err_b[-3000:]
    world.stand_in.set_faults(Faults())
    assert "GitHub answered 50" in err_a + err_b  # the faults did happen
    assert "rate limit" in err_a + err_b

    authors: set[str] = set()
    for repo in REPOS:
        pulls = world.ready_pulls(repo)
        assert sorted(p["head"]["ref"] for p in pulls) == sorted(
            f"issue-{n}" for n in world.issues[repo]
        )
        authors |= {p["user"]["login"] for p in pulls}
        for number in world.issues[repo]:
            assert len([c for c in world.comments(repo, number) if CLAIM_MARKER in c]) == 1
            assert len(world.comments(repo, number)) == 1
    store = Store.open(world.database_url)
    try:
        runs = store.list_runs(limit=200)
        activity = store.activity(limit=1000)
    finally:
        store.close()
    assert len(runs) == 12
    assert all(run.state == "succeeded" for run in runs)
    assert len({(run.repository.name, run.issue_number) for run in runs}) == 12
    assert {a.daemon for a in activity if a.kind == "pickup"} == {"home-a", "home-b"}
    assert "daemon stopping" in err_a
    assert "daemon stopping" in err_b
    assert authors == {"maintainer", "night-shift[bot]"}
    minted = [e for e in world.stand_in.requests if str(e["path"]).endswith("/access_tokens")]
    assert len(minted) > 2
    assert "PRIVATE KEY" not in err_b


@pytest.mark.parametrize("restart", ["same home", "fresh home"])
def test_a_daemon_killed_mid_session_is_continued_after_a_restart(
    make_world: Any, restart: str
) -> None:
    """kill -9 while the session works (its commit not pushed). Restarted on the same home, the
    daemon records the crash and rescues the issue with the next fencing token; the kept
    Worktree's commit was made after the last head thirdshift recorded, so it is kept aside,
    never pushed, and the Rescue's session commits again (adr/0027). A daemon with a fresh
    home on the same database cannot see that Worktree and nothing reached origin: it gives the
    issue back to Ready and runs it again. Either way: one ready pull request, one claim
    comment, and the Activity log says what happened."""
    sessions = [
        {
            "name": "alpha-1",
            "marker": marker("alpha", 1),
            "turns": work_turns("alpha", 1, hang=True),
        }
    ]
    world = make_world(sessions)
    world.ready_issue("alpha", "Task 1")
    settings = {"lease_seconds": "4", "repositories": f'["{OWNER}/alpha"]'}

    first = world.daemon("home", **settings)
    world.wait_until(
        lambda: any(
            r.get("session") == "alpha-1" and r.get("turn") == 1 for r in world.model.requests()
        ),
        timeout=120,
        what="the session reaching its hang",
    )
    # What a person asks while it works: the daemon, its poll, its Run, the Lease. The daemon
    # publishes its state every few seconds (PUBLISH_SECONDS): the Run's id, known once it is
    # recorded, shows by the next one.
    world.wait_until(
        lambda: "  running: acme/alpha#1 (Run 1, for " in world.status("home"),
        timeout=30,
        what="thirdshift status showing Run 1 running",
    )
    shown = world.status("home")
    assert re.search(rf"^daemon home \(pid {first.pid}\): running since ", shown, re.M), shown
    assert "  acme/alpha: last poll " in shown
    assert "  running: acme/alpha#1 (Run 1, for " in shown
    assert re.search(
        r"^  acme/alpha#1: daemon home:\S*, Run 1, until .* \(fencing token 1\)$", shown, re.M
    ), shown
    assert "Runs running:\n  Run 1 on acme/alpha#1, for " in shown
    state = json.loads(world.status("home", "--json"))
    [daemon] = state["daemons"]
    assert (daemon["live"], daemon["running"][0]["run_id"]) == (True, 1)
    assert daemon["rate_limit_remaining"] > 0
    [held] = state["leases"]
    assert (held["type"], held["repository"], held["run_id"]) == ("lease", "acme/alpha", 1)
    [run] = state["running"]
    assert (run["type"], run["id"], run["state"]) == ("run", 1, "running")
    first.send_signal(signal.SIGKILL)
    first.communicate()
    world.processes.remove(first)
    assert "daemon home: not running (last seen " in world.status("home")

    home = "home" if restart == "same home" else "home-2"
    second = world.daemon(home, **settings)
    world.wait_until(lambda: world.succeeded() == 1, timeout=240, what="the continuation")
    status, err = stop(second)
    assert status == 0, err[-3000:]

    [pull] = world.ready_pulls("alpha")
    assert pull["head"]["ref"] == "issue-1"
    comments = world.comments("alpha", 1)
    assert len(comments) == 1
    assert CLAIM_MARKER in comments[0]
    store = Store.open(world.database_url)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.id)
        lease = store.lease_of(runs[0].repository, 1)
        kinds = [a.kind for a in store.activity()]
    finally:
        store.close()
    assert [run.state for run in runs] == ["crashed", "succeeded"]
    assert lease is None
    log = (world.tmp / home / "activity" / "acme-alpha.log").read_text()
    assert "Run 1 ended by a crash" in log
    if restart == "same home":
        assert "as a Rescue of Run 1, which crashed" in comments[0]
        assert "not adopting issue-1 in the worktree " in err
        assert "rescue #1" in log
        assert "rescue" in kinds
    else:
        assert "Run 2 (daemon home-2)" in comments[0]
        assert "crashed before anything reached origin" in log
        assert "rescue" not in kinds


def test_sigterm_during_three_sessions_with_a_failing_github_saves_every_run_and_exits_0(
    make_world: Any,
) -> None:
    """SIGTERM while three sessions work, GitHub answering 20% of requests with a 502: every
    Run is still saved whole as a Failed run (its commit pushed with the failure commit, the
    Failed-run comment besides the claim's, the record), every Lease released, and the daemon
    exits 0 within its documented bound."""
    sessions = [
        {"name": repo, "marker": marker(repo, 1), "turns": work_turns(repo, 1, hang=True)}
        for repo in REPOS
    ]
    world = make_world(sessions)
    for repo in REPOS:
        world.ready_issue(repo, "Task 1")
    daemon = world.daemon("home", max_runs="3")

    def hanging() -> bool:
        sessions_hanging = {r.get("session") for r in world.model.requests() if r.get("turn") == 1}
        return sessions_hanging >= set(REPOS)

    world.wait_until(hanging, timeout=180, what="three sessions reaching their hang")
    world.stand_in.set_faults(Faults(error_rate=0.2, statuses=(502,), rng=random.Random(3)))
    started = time.monotonic()
    status, err = stop(daemon)
    elapsed = time.monotonic() - started
    world.stand_in.set_faults(Faults())

    assert status == 0, err[-3000:]
    assert elapsed < 20 + 2 * 3 + 60  # salvage wait + two stop graces + margin (README)
    assert "GitHub answered 502" in err
    store = Store.open(world.database_url)
    try:
        runs = store.list_runs()
        leases = [store.lease_of(run.repository, 1) for run in runs]
    finally:
        store.close()
    assert sorted(run.repository.name for run in runs) == sorted(REPOS)
    assert all((run.state, run.cause) == ("failed", "interrupted") for run in runs)
    assert leases == [None, None, None]
    for repo in REPOS:
        ref = world.rest("GET", f"/repos/{OWNER}/{repo}/git/ref/heads/issue-1")
        assert ref["ref"] == "refs/heads/issue-1"  # the work and its failure commit
        comments = world.comments(repo, 1)
        assert len(comments) == 2
        assert CLAIM_MARKER in comments[0]
        assert "thirdshift could not finish this issue" in comments[1]
        assert "**Cause:** interrupted" in comments[1]


def test_a_run_refused_by_a_rate_limited_provider_pauses_the_daemon_s_pickups_until_it_is_up(
    make_world: Any,
) -> None:
    """The real claude CLI of issue 1's Run meets 429s past its retries, no fallback Harness:
    the Run ends giving the issue back, the outage reaches the daemon's pauses through the
    daemon's own wiring (no pause fed in by hand), and the polls meanwhile pass issue 2 over
    naming the pause's end; no Run starts before it, and both issues are taken after it.
    (claude with an API key announces no reset: the pause is provider_pause_seconds.)"""
    refused = [{"error": "rate_limit"}, {"error": "rate_limit"}]
    sessions = [
        {
            "name": "alpha-1",
            "marker": marker("alpha", 1),
            "turns": [*refused, *work_turns("alpha", 1)],
        },
        {"name": "alpha-2", "marker": marker("alpha", 2), "turns": work_turns("alpha", 2)},
    ]
    world = make_world(sessions)
    # claude retries a 429 with backoff; once is enough here.
    world.agent_env["CLAUDE_CODE_MAX_RETRIES"] = "1"
    world.ready_issue("alpha", "Task 1")
    settings = {"repositories": f'["{OWNER}/alpha"]', "provider_pause_seconds": "8"}
    daemon = world.daemon("home", **settings)

    def failed_runs() -> list[Any]:
        store = Store.open(world.database_url, migrate=False)
        try:
            return store.list_runs(state=RunState.FAILED)
        except StoreError:
            return []
        finally:
            store.close()

    world.wait_until(failed_runs, timeout=120, what="issue 1's Run failing on the 429s")
    world.ready_issue("alpha", "Task 2")
    world.wait_until(lambda: world.succeeded() == 2, timeout=240, what="both issues succeeding")
    status, err = stop(daemon)
    assert status == 0, err[-3000:]

    store = Store.open(world.database_url)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.id)
        passed_over = [
            a for a in store.activity(limit=1000) if a.kind == "pass-over" and a.issue_number == 2
        ]
    finally:
        store.close()
    assert [(run.issue_number, run.state) for run in runs] == [
        (1, "failed"),
        (1, "succeeded"),
        (2, "succeeded"),
    ]
    assert "429" in str(runs[0].cause)
    [first, *_] = passed_over
    found = re.search(
        r"claude's provider is rate-limited \(429\); pickups wait until (\S+ \S+Z) "
        r"\(no fallback Harness\)",
        first.message,
    )
    assert found, first.message
    until = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=UTC)
    assert first.created_at < until
    assert all(run.started_at >= until for run in runs[1:])  # nothing taken while paused
    assert len(world.ready_pulls("alpha")) == 2


@pytest.mark.parametrize("paused", ["daemon", "run"])
def test_a_run_paused_past_its_lease_changes_nothing_after_another_finished_the_issue(
    make_world: Any, paused: str
) -> None:
    """A (a daemon, or `thirdshift run`) is stopped with SIGSTOP mid-session and its Lease runs
    out; daemon B (another home, the same database) records A's Run as crashed, takes the issue
    with the next fencing token and ends with a ready pull request. After SIGCONT, A pushes,
    drafts, labels and posts nothing, and records that it lost the Lease."""
    sessions = [
        {
            "name": "alpha-1",
            "marker": marker("alpha", 1),
            "turns": work_turns("alpha", 1, hang=True),
        }
    ]
    world = make_world(sessions)
    world.ready_issue("alpha", "Task 1")
    only_alpha = {"repositories": f'["{OWNER}/alpha"]'}
    if paused == "daemon":
        a = world.daemon("home-a", lease_seconds="3", **only_alpha)
    else:
        a = start_thirdshift(
            ["run", world.issue_url("alpha", 1)],
            env=world.env("home-a", lease_seconds="3"),
            cwd=world.tmp,
        )
        world.processes.append(a)
    world.wait_until(
        lambda: any(
            r.get("session") == "alpha-1" and r.get("turn") == 1 for r in world.model.requests()
        ),
        timeout=120,
        what="A's session reaching its hang",
    )
    a.send_signal(signal.SIGSTOP)
    try:
        b = world.daemon("home-b", **only_alpha)
        world.wait_until(lambda: world.succeeded() == 1, timeout=240, what="B finishing")
        labels_before = [
            x["name"] for x in world.rest("GET", f"/repos/{OWNER}/alpha/issues/1")["labels"]
        ]
        head_before = world.rest("GET", f"/repos/{OWNER}/alpha/git/ref/heads/issue-1")["object"][
            "sha"
        ]
    finally:
        a.send_signal(signal.SIGCONT)

    def a_recorded_the_loss() -> bool:
        store = Store.open(world.database_url, migrate=False)
        try:
            first = store.get_run(1)
        finally:
            store.close()
        return first is not None and first.state == "failed"

    if paused == "daemon":
        world.wait_until(a_recorded_the_loss, timeout=120, what="A recording the lost Lease")
        status_a, err_a = stop(a)
    else:
        world.processes.remove(a)  # it ends by itself, exit 1
        _, err_a = a.communicate(timeout=120)
        status_a = 0 if a.returncode == 1 else a.returncode
    status_b, err_b = stop(b)
    assert (status_a, status_b) == (0, 0), err_a[-3000:] + err_b[-3000:]
    assert "lost the Lease on #1" in err_a

    store = Store.open(world.database_url)
    try:
        first, second = sorted(store.list_runs(), key=lambda run: run.id)
        lease = store.lease_of(first.repository, 1)
    finally:
        store.close()
    assert first.cause is not None
    assert first.cause.startswith("lost the Lease on #1")
    assert second.state == "succeeded"
    assert lease is None
    [pull] = world.rest("GET", f"/repos/{OWNER}/alpha/pulls?state=all")
    assert pull["draft"] is False
    assert pull["state"] == "open"
    assert (
        world.rest("GET", f"/repos/{OWNER}/alpha/git/ref/heads/issue-1")["object"]["sha"]
        == head_before
    )
    assert [
        x["name"] for x in world.rest("GET", f"/repos/{OWNER}/alpha/issues/1")["labels"]
    ] == labels_before
    comments = world.comments("alpha", 1)
    assert len(comments) == 1
    assert f"Run {second.id} (daemon home-b)" in comments[0]
