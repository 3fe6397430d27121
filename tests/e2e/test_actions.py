"""`thirdshift run --event` as a GitHub Actions runner runs it: the "Run thirdshift" step of the
workflow `thirdshift actions init` writes, taken from the parsed file and run with bash, with
the runner's environment, against the stand-in, real git and the real claude CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.actions_tools import dispatched, labelled
from tests.support.app_keys import key_pair
from tests.support.run_world import (
    CALC_BROKEN,
    CALC_FIXED,
    NAME,
    OWNER,
    TEST_CALC,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from thirdshift.actions.workflow import WorkflowChoices, workflow_text
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.sandbox.github.limits import Faults
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
# Without an App the workflow's own token acts. It is an integration's, as on GitHub: GET /user
# refuses it, and it is no collaborator; the workflow tells thirdshift its login.
WORKFLOW_BOT = "github-actions[bot]"
WORKFLOW_TOKEN = "ghs_sandboxWorkflowToken0123456789abcdefg"
REPAIRED = CALC_FIXED + "\n\ndef twice(a: int) -> int:\n    return add(a, a)\n"
FIX = [
    {"tool_calls": [bash(write_file_command("calc.py", CALC_FIXED), "fix")]},
    {"tool_calls": [bash("git add calc.py && git commit -qm 'Make add() add'", "commit")]},
    {
        "tool_calls": [
            bash(pull_request_file("Make add() add", "It added wrong.\n\nCloses #1"), "pr")
        ]
    },
    {"text": "Fixed."},
]


def run_job() -> tuple[dict[str, Any], dict[str, Any]]:
    """The workflow's job environment and its "Run thirdshift" step, as parsed from the file
    actions init writes."""
    job = yaml.safe_load(workflow_text(WorkflowChoices(install="thirdshift")))["jobs"]["run"]
    [step] = [s for s in job["steps"] if s.get("name") == "Run thirdshift"]
    return dict(job.get("env", {})), dict(step)


@dataclass(frozen=True)
class AppSecrets:
    """A GitHub App's repository secrets, as the workflow reads them."""

    app_id: int
    private_key: str


def on_runner(
    world: RunWorld,
    payload: dict[str, Any],
    job: str,
    *,
    app: AppSecrets | None = None,
    **extra: str,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run the step with bash as a runner would: the job's and the step's env (their
    expressions given the values GitHub would), the runner's GITHUB_* variables, the event
    file; with ``app``, the repository has a GitHub App's secrets."""
    process, runner_dir = start_on_runner(world, payload, job, app=app, **extra)
    stdout, stderr = process.communicate(timeout=240)
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return done, runner_dir


def start_on_runner(
    world: RunWorld,
    payload: dict[str, Any],
    job: str,
    *,
    app: AppSecrets | None = None,
    **extra: str,
) -> tuple[subprocess.Popen[str], Path]:
    runner_dir = world.tmp / job
    runner_dir.mkdir()
    event = runner_dir / "event.json"
    event.write_text(json.dumps(payload))
    job_env, step = run_job()
    world.client.add_user(WORKFLOW_BOT, WORKFLOW_TOKEN, {f"{OWNER}/{NAME}": "write"})
    # What each expression of the file comes to on GitHub, given the repository's secrets.
    resolved = {
        "THIRDSHIFT_GITHUB_APP_ID": str(app.app_id) if app else "",
        "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY": app.private_key if app else "",
        "GITHUB_TOKEN": WORKFLOW_TOKEN,
        "THIRDSHIFT_GITHUB_LOGIN": "" if app else WORKFLOW_BOT,
        "ANTHROPIC_API_KEY": world.env()["ANTHROPIC_API_KEY"],
        "THIRDSHIFT_HOME": str(runner_dir / "thirdshift"),
        "THIRDSHIFT_DATABASE_URL": "",  # the secret is not set: SQLite, dying with the job
    }
    env = {
        key: resolved[key] if "${{" in str(value) else str(value)
        for key, value in {**job_env, **step["env"]}.items()
    }
    base = {k: v for k, v in world.env().items() if k != "THIRDSHIFT_GITHUB_API_URL"}
    base.update(env)
    base.update(
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_EVENT_NAME": "workflow_dispatch" if "inputs" in payload else "issues",
            "GITHUB_API_URL": world.api_url,
            "GITHUB_SERVER_URL": world.stand_in.web_url,
            "GITHUB_REPOSITORY": f"{OWNER}/{NAME}",
            "GITHUB_RUN_ID": "4242",
            "GITHUB_STEP_SUMMARY": str(runner_dir / "summary.md"),
            "GITHUB_OUTPUT": str(runner_dir / "output"),
            "RUNNER_TEMP": str(runner_dir),
        }
    )
    base.update(extra)
    process = subprocess.Popen(
        ["bash", "-e", "-c", step["run"]],
        env=base,
        cwd=world.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,  # a tree of its own, as a runner's step has
    )
    world.processes.append(process)
    return process, runner_dir


# Fix add() and commit, then hang (for a cancel); a later Run gets the rest: the PR and an end.
HANG = [
    {"tool_calls": [bash(write_file_command("calc.py", CALC_FIXED), "fix")]},
    {"tool_calls": [bash("git add calc.py && git commit -qm 'Make add() add'", "commit")]},
    {"hang": True},
    {"tool_calls": [bash(pull_request_file("Make add() add", "Closes #1"), "pr")]},
    {"text": "Finished what the earlier Run started."},
]


def until_the_session_hangs(world: RunWorld) -> None:
    deadline = time.monotonic() + 120
    while not any(r.get("turn") == 2 for r in world.model.requests()):
        assert time.monotonic() < deadline, "the session never reached its hang"
        time.sleep(0.2)


def an_app(world: RunWorld) -> AppSecrets:
    """A GitHub App installed on the repository: its pushes start CI, as a workflow's own
    GITHUB_TOKEN's do not."""
    private, public = key_pair()
    return AppSecrets(world.client.add_app("night-shift", public, [f"{OWNER}/{NAME}"]), private)


def cancel_as_github(job: subprocess.Popen[str]) -> None:
    """Cancel the step as the runner does: SIGINT to the step's own process, SIGTERM 7.5 s
    later, and 2.5 s after that a kill of its whole process tree."""
    os.kill(job.pid, signal.SIGINT)
    try:
        job.wait(timeout=7.5)
    except subprocess.TimeoutExpired:
        os.kill(job.pid, signal.SIGTERM)
        try:
            job.wait(timeout=2.5)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)


def event(world: RunWorld, **changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "label": "ready-for-agent",
        "sender": "maintainer",
        "owner": OWNER,
        "name": NAME,
        "number": world.issue_number,
        "web_url": world.stand_in.web_url,
    }
    return labelled(**{**fields, **changes})


def labels(world: RunWorld) -> list[str]:
    return sorted(label["name"] for label in world.issue()["labels"])


def test_a_maintainer_s_label_gives_a_ready_pull_request_a_job_summary_and_outputs(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """With a GitHub App whose installation tokens last 4 s here (an hour on GitHub): the Run
    outlives many of them, and acts as the App's bot throughout."""
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": FIX}])
    worlds.append(world)
    private, public = key_pair()
    app_id = world.client.add_app("night-shift", public, [f"{OWNER}/{NAME}"], token_seconds=4)

    payload = event(world)
    payload["repository"]["private"] = True  # its Session logs are kept as an artifact

    done, runner = on_runner(world, payload, "job-1", app=AppSecrets(app_id, private))

    assert done.returncode == 0, done.stderr
    [pull] = world.pulls()
    assert pull["draft"] is False
    assert pull["user"]["login"] == "night-shift[bot]"
    acted = {str(e["login"]) for e in world.stand_in.requests if e["status"] < 400}
    assert acted <= {"night-shift[bot]", f"app:{app_id}", "None", "maintainer"}, acted
    minted = [e for e in world.stand_in.requests if str(e["path"]).endswith("/access_tokens")]
    assert len(minted) >= 3, "the Run outlived its first installation tokens"
    assert not [e for e in world.stand_in.requests if e["status"] == 401]
    assert "PRIVATE KEY" not in done.stderr + (runner / "summary.md").read_text()
    assert done.stdout == pull["html_url"] + "\n"
    assert f"::group::thirdshift: a Run on {OWNER}/{NAME}#1" in done.stderr
    assert "::endgroup::" in done.stderr
    summary = (runner / "summary.md").read_text()
    assert f"| Pull request | {pull['html_url']} |" in summary
    assert "| State | succeeded |" in summary
    assert f"| Checks | green on {pull['head']['sha'][:7]} |" in summary
    assert "| Sessions | `implement (claude, ended)` |" in summary
    assert re.search(r"\| Cost \| \$\d+\.\d{4} \|", summary), summary
    assert "| Last Session log | `" in summary
    assert (
        "| Session logs | artifact `thirdshift-session-logs-4242-1` on [the run's page]("
        f"{world.stand_in.web_url}/{OWNER}/{NAME}/actions/runs/4242) |"
    ) in summary
    outputs = (runner / "output").read_text().splitlines()
    assert f"pull-request-url={pull['html_url']}" in outputs
    assert "state=succeeded" in outputs
    [claim] = world.comments()
    assert CLAIM_MARKER in claim["body"]
    assert "GitHub Actions, labelled by maintainer" in claim["body"]

    # The same event again (the workflow run re-run, say): the issue is worked on, so nothing.
    again, _ = on_runner(world, event(world), "job-2")
    assert again.returncode == 0, again.stderr
    assert f"nothing to run: {OWNER}/{NAME}#1 is already being worked on" in again.stderr
    assert "::error" not in again.stderr  # a green job carries no error annotation
    assert len(world.pulls()) == 1
    assert len(world.comments()) == 1


@pytest.mark.postgres
def test_two_runs_on_one_issue_sharing_a_database_run_it_once(
    tmp_path: Path, worlds: list[RunWorld], postgres_url: str
) -> None:
    """The same event delivered to two runners at once (two workflows, say), both on one
    PostgreSQL: one Run takes the issue to a pull request, the other ends with one line."""
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": FIX}])
    worlds.append(world)
    app = an_app(world)
    first, _ = start_on_runner(
        world, event(world), "job-a", app=app, THIRDSHIFT_DATABASE_URL=postgres_url
    )
    second, _ = start_on_runner(
        world, event(world), "job-b", app=app, THIRDSHIFT_DATABASE_URL=postgres_url
    )
    outcomes = [process.communicate(timeout=240) for process in (first, second)]

    assert (first.returncode, second.returncode) == (0, 0), outcomes
    stderrs = [stderr for _, stderr in outcomes]
    [lost] = [e for e in stderrs if "nothing to run: acme/calculator#1 is already" in e]
    assert "is claimed by GitHub Actions" in lost  # the shared Lease stopped it, not GitHub
    assert len(world.pulls()) == 1
    assert len(world.comments()) == 1
    store = Store.open(postgres_url, migrate=False)
    try:
        assert [run.state for run in store.list_runs()] == ["succeeded"]
    finally:
        store.close()


def test_two_runs_on_one_issue_sharing_no_database_run_it_once(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The same event delivered to two runners at once, each with the SQLite database that
    dies with its job: both hold a Lease of their own, and the Claim on GitHub decides (of
    two removals of the Ready label GitHub answers one). One Run takes the issue to a pull
    request, the other ends with one line having changed nothing."""
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": FIX}])
    worlds.append(world)
    app = an_app(world)
    first, first_dir = start_on_runner(world, event(world), "job-a", app=app)
    second, second_dir = start_on_runner(world, event(world), "job-b", app=app)
    outcomes = [process.communicate(timeout=240) for process in (first, second)]

    assert (first.returncode, second.returncode) == (0, 0), outcomes
    stderrs = [stderr for _, stderr in outcomes]
    [lost] = [e for e in stderrs if "nothing to run: acme/calculator#1 is already" in e]
    assert (
        "was claimed on GitHub by another Run first" in lost
        or "is no longer open with ready-for-agent" in lost
    ), lost
    assert len(world.pulls()) == 1
    assert len(world.comments()) == 1
    assert labels(world) == ["in-progress"]
    [summary] = [
        (d / "summary.md").read_text()
        for d in (first_dir, second_dir)
        if (d / "summary.md").exists()
    ]
    assert "| Checks | green on " in summary  # the App's pushes start CI


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"sender": "reader"}, "reader added ready-for-agent with read permission"),
        ({"label": "bug"}, "the label added is 'bug', not 'ready-for-agent'"),
        ({"action": "unlabeled"}, "the event's action is 'unlabeled'"),
        ({"pull_request": True}, "#1 is a pull request, not an issue"),
    ],
)
def test_events_that_ask_for_no_run_end_with_one_line_and_change_nothing(
    tmp_path: Path, worlds: list[RunWorld], changes: dict[str, Any], why: str
) -> None:
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": FIX}])
    worlds.append(world)
    world.client.add_user("reader", "reader_token_0123456789abcdef", {f"{OWNER}/{NAME}": "read"})

    done, _ = on_runner(world, event(world, **changes), "job")

    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "nothing to run: " in lines[0]
    assert why in lines[0]
    assert labels(world) == ["ready-for-agent"]
    assert world.comments() == []
    assert world.pulls() == []
    assert world.model.requests() == []


def test_a_failed_run_shows_as_an_error_on_the_job_page_and_its_comment_links_the_job(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    nothing = [{"text": "I could not."}]
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": nothing}])
    worlds.append(world)

    done, runner = on_runner(world, event(world), "job")

    assert done.returncode == 1
    assert "::error title=thirdshift could not finish acme/calculator#1::" in done.stderr
    assert "made no commits" in done.stderr
    summary = (runner / "summary.md").read_text()
    assert "| State | failed |" in summary
    assert "| Checks | see the cause |" in summary
    assert "| Cause | `" in summary
    assert "made no commits" in summary
    assert "| Sessions | `implement (claude, ended)` |" in summary
    # A public repository (GitHub's example event): its Session logs are no artifact.
    assert (
        "| Session logs | not uploaded: anyone may download a public repository's artifacts |"
    ) in summary
    assert "artifact `thirdshift-session-logs" not in summary
    assert "state=failed" in (runner / "output").read_text()
    failure = [c["body"] for c in world.comments() if CLAIM_MARKER not in c["body"]]
    assert len(failure) == 1
    assert f"**Job:** {world.stand_in.web_url}/{OWNER}/{NAME}/actions/runs/4242" in failure[0]


def test_a_cancelled_job_saves_the_work_inside_github_s_cancellation_window(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """GitHub cancels a job with SIGINT, SIGTERM 7.5 s later and a kill 2.5 s after that: with
    the workflow's settings the Run pushes its work, comments and records it before the kill,
    and a Run started by hand afterwards (on a fresh runner) continues it to a pull request."""
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": HANG}])
    worlds.append(world)
    app = an_app(world)
    job, _ = start_on_runner(world, event(world), "job", app=app, GITHUB_RUN_ID="77")
    until_the_session_hangs(world)

    cancel_as_github(job)
    _, stderr = job.communicate()

    assert job.returncode == 1, stderr  # ended by itself, before any kill
    assert "the Run failed: interrupted" in stderr
    inspect = world.clone()
    world.git("checkout", "-q", "origin/issue-1", cwd=inspect)
    assert (inspect / "calc.py").read_text() == CALC_FIXED
    failure = [c["body"] for c in world.comments() if CLAIM_MARKER not in c["body"]]
    assert len(failure) == 1
    assert "**Cause:** interrupted" in failure[0]
    assert f"/{OWNER}/{NAME}/actions/runs/77" in failure[0]

    by_hand = dispatched(issue="1", sender="maintainer", owner=OWNER, name=NAME)
    again, _ = on_runner(world, by_hand, "job-2", app=app)

    assert again.returncode == 0, again.stderr
    assert "continuing issue-1" in again.stderr
    [pull] = world.pulls()
    assert pull["draft"] is False
    claim = [c["body"] for c in world.comments() if CLAIM_MARKER in c["body"]]
    assert len(claim) == 1
    assert "GitHub Actions, started by maintainer" in claim[0]
    [continuation] = [r for r in world.model.requests() if r.get("turn") == 3]
    assert "The earlier Run ran elsewhere and left no record here" in json.dumps(
        continuation["body"]
    )


def test_a_job_killed_before_its_salvage_ends_leaves_what_reached_origin_to_the_next_run(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """GitHub is slow to answer (4 s a request) when the job is cancelled: the Run pushes its
    commit at once, but SIGTERM finds it still waiting on GitHub and the kill 2.5 s later cuts
    its comment short. Nothing that reached origin is lost: a Run started by hand on a fresh
    runner says it continues the branch and takes it to a ready pull request."""
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": HANG}])
    worlds.append(world)
    app = an_app(world)
    job, _ = start_on_runner(world, event(world), "job", app=app)
    until_the_session_hangs(world)
    world.stand_in.set_faults(Faults(delay_ms=4000))

    cancel_as_github(job)
    _, stderr = job.communicate()

    assert job.returncode == -signal.SIGKILL, stderr  # the salvage did not finish in time
    world.stand_in.set_faults(Faults())
    inspect = world.clone()
    world.git("checkout", "-q", "origin/issue-1", cwd=inspect)
    assert (inspect / "calc.py").read_text() == CALC_FIXED
    assert [c for c in world.comments() if CLAIM_MARKER not in c["body"]] == []

    by_hand = dispatched(issue="1", sender="maintainer", owner=OWNER, name=NAME)
    again, _ = on_runner(world, by_hand, "job-2", app=app)

    assert again.returncode == 0, again.stderr
    assert "continuing issue-1, which an earlier Run left on origin" in again.stderr
    [pull] = world.pulls()
    assert pull["draft"] is False


def test_a_job_cancelled_during_a_repair_leaves_a_draft_that_the_next_run_finishes(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The pull request is open and CI red; GitHub cancels the job while the Repair works:
    within the window the fix is pushed and the pull request turned back to a draft; a Run
    started by hand afterwards, on a fresh runner, marks it ready once CI is green. It acts as
    a GitHub App: pushes made with the workflow's own token would start no CI to be red."""
    breaks = write_file_command("calc.py", CALC_BROKEN) + " && git commit -qam 'Rework add()'"
    implement = [
        {"tool_calls": [bash(breaks, "rework")]},
        {"tool_calls": [bash(pull_request_file("Fix add()", "Closes #1"), "pr")]},
        {"text": "Done."},
    ]
    repair = [
        {"tool_calls": [bash(write_file_command("calc.py", REPAIRED), "fix")]},
        {"tool_calls": [bash("git commit -qam 'Make add() add again'", "commit")]},
        {"hang": True},
    ]
    world = start_world(
        tmp_path,
        [
            {"name": "implement", "marker": MARKER, "turns": implement},
            {"name": "repair", "marker": "CI is red on", "turns": repair},
        ],
        files={"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC},
    )
    worlds.append(world)
    app = an_app(world)
    job, _ = start_on_runner(world, event(world), "job-1", app=app)
    deadline = time.monotonic() + 180
    while not world.model_requests("repair") or not any(
        r.get("turn") == 2 for r in world.model_requests("repair")
    ):
        assert time.monotonic() < deadline, "the Repair never reached its hang"
        assert job.poll() is None, job.communicate()[1]
        time.sleep(0.2)

    cancel_as_github(job)
    _, stderr = job.communicate()

    assert job.returncode == 1, stderr
    [pull] = world.pulls()
    assert pull["draft"] is True
    inspect = world.clone()
    world.git("checkout", "-q", "origin/issue-1", cwd=inspect)
    assert (inspect / "calc.py").read_text() == REPAIRED

    again, _ = on_runner(
        world,
        dispatched(issue="1", sender="maintainer", owner=OWNER, name=NAME),
        "job-2",
        app=app,
    )

    assert again.returncode == 0, again.stderr
    [pull] = world.pulls()
    assert pull["draft"] is False
    assert again.stdout == pull["html_url"] + "\n"


def test_without_a_github_app_a_run_never_marks_a_pull_request_ready_on_ci_that_never_ran(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The workflow's own GITHUB_TOKEN pushes, and GitHub starts no CI for that: no check can
    appear, so the Run does not count CI as absent. It fails naming the fix (a GitHub App),
    the pull request stays a draft with the work on it, and the job page shows the error."""
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": FIX}])
    worlds.append(world)

    done, runner = on_runner(world, event(world), "job")

    assert done.returncode == 1, done.stderr
    assert "pushes made with a workflow's own GITHUB_TOKEN start no workflow" in done.stderr
    assert "::error title=thirdshift could not finish acme/calculator#1::no CI checks" in (
        done.stderr
    )
    [pull] = world.pulls()
    assert pull["draft"] is True
    assert world.check_runs(pull["head"]["sha"]) == []
    assert "| State | failed |" in (runner / "summary.md").read_text()
