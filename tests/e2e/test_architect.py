"""Architect runs end to end: `thirdshift architect` (and `thirdshift daemon --once` for the plan it
hands over) on the GitHub stand-in, real git and the real claude CLI with scripted turns. The
architect session writes its result file with a Bash tool call; thirdshift publishes the plan."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    TEST_CALC,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    stop_world,
    write_file_command,
)
from thirdshift.runs.rules.plans import ARCHITECT_RESULT_FILE

pytestmark = pytest.mark.real_cli

REPO = f"{OWNER}/{NAME}"
PLAN = "architect-plan"
TRIAGE = "needs-triage"
READY = "ready-for-agent"
LEASE_SECONDS = 6
ANSWERS = ("text", "tool_calls", "final", "error", "hang")
GREEN = {"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC}


def ticket(title: str, marker: str, blocked_by: list[int]) -> dict[str, Any]:
    return {
        "title": title,
        "why": f"Why: {title}.",
        "what_to_build": f"Build it. {marker}",
        "acceptance": [f"{title} is tested"],
        "decisions": ["No new dependency."],
        "blocked_by": blocked_by,
    }


TWO_TICKETS = {
    "outcome": "plan",
    "spec": {
        "title": "One arithmetic module",
        "why": "The helpers drift apart.",
        "what_to_build": "Fold them into calc.py.",
        "decisions": ["calc.py stays the only module."],
    },
    "tickets": [
        ticket("Add a notes file", "ARCHITECT-E2E-TICKET-ONE", []),
        ticket("Add a changes file", "ARCHITECT-E2E-TICKET-TWO", [1]),
    ],
}


def architect_session(name: str, marker: str, result: dict[str, Any] | str) -> dict[str, Any]:
    """An architect session (found by ``marker`` in its prompt) that writes ``result`` (a text
    as it is) as its result file at the Worktree's top, then ends its turn."""
    text = result if isinstance(result, str) else json.dumps(result)
    return {
        "name": name,
        "marker": marker,
        "turns": [
            {"tool_calls": [bash(write_file_command(ARCHITECT_RESULT_FILE, text), "result")]},
            {"text": "Wrote the result file."},
        ],
    }


def focus(word: str) -> str:
    """The architect prompt's line for ``--focus word``: it tells one session from another."""
    return f"focus on: {word}"


def no_ready_issue(world: RunWorld) -> None:
    """The world's issue #1 stays, open, without the Ready label: a Ready issue goes first."""
    world.rest("DELETE", f"/repos/{REPO}/issues/{world.issue_number}/labels/{READY}")


def labels(issue: dict[str, Any]) -> set[str]:
    return {label["name"] for label in issue["labels"]}


def issue(world: RunWorld, number: int) -> Any:
    return world.rest("GET", f"/repos/{REPO}/issues/{number}")


def every_issue(world: RunWorld) -> list[Any]:
    found = world.rest("GET", f"/repos/{REPO}/issues?state=all&per_page=100")
    return sorted((i for i in found if "pull_request" not in i), key=lambda i: i["number"])


def plan_numbers(world: RunWorld) -> list[int]:
    return [i["number"] for i in every_issue(world) if PLAN in labels(i)]


def sub_issues(world: RunWorld, number: int) -> list[int]:
    return [i["number"] for i in world.rest("GET", f"/repos/{REPO}/issues/{number}/sub_issues")]


def blocked_by(world: RunWorld, number: int) -> list[int]:
    found = world.rest("GET", f"/repos/{REPO}/issues/{number}/dependencies/blocked_by")
    return [i["number"] for i in found]


def runs(world: RunWorld) -> list[Any]:
    done = world.thirdshift("runs", "--json")
    assert done.returncode == 0, done.stderr
    return sorted(
        (json.loads(line) for line in done.stdout.splitlines() if line.strip()),
        key=lambda run: run["id"],
    )


def progress(stderr: str) -> list[str]:
    """The progress lines without their time stamps."""
    return [line.split("] ", 1)[-1] for line in stderr.strip().splitlines()]


def model_turns(world: RunWorld) -> int:
    """The model requests any session made so far (a session makes at least one)."""
    return len([r for r in world.model.requests() if r.get("kind") in ANSWERS])


def issue_posts(world: RunWorld) -> int:
    """Issues opened on the stand-in so far (each a POST answered 201)."""
    return len(
        [
            r
            for r in world.stand_in.requests
            if r["method"] == "POST"
            and str(r["path"]).endswith(f"/repos/{REPO}/issues")
            and r["status"] == 201
        ]
    )


def assert_a_spec_with_two_tickets(world: RunWorld, spec: int, first: int, second: int) -> None:
    assert issue(world, spec)["title"] == "One arithmetic module"
    assert sub_issues(world, spec) == [first, second]
    assert blocked_by(world, second) == [first]
    assert blocked_by(world, first) == []
    assert f"Blocked by: #{first}." in issue(world, second)["body"]


def test_a_plan_is_published_once_then_skipped_covered_and_an_invalid_result_fails_cleanly(
    tmp_path: Path,
) -> None:
    """One world, four Architect runs: a two-Ticket plan becomes a Spec with two sub-issues,
    the second blocked by the first, all for triage; the next run is skipped while that plan is
    open; once it is closed, a covered outcome publishes nothing; an invalid result file fails
    the run naming the parse error and its Session log, with nothing published."""
    world = start_world(
        tmp_path,
        [
            architect_session("plan", focus("ARCHITECT-E2E-PLAN"), TWO_TICKETS),
            architect_session("skipped", focus("ARCHITECT-E2E-SKIPPED"), TWO_TICKETS),
            architect_session(
                "covered", focus("ARCHITECT-E2E-COVERED"), {"outcome": "covered", "issue": 1}
            ),
            architect_session("invalid", focus("ARCHITECT-E2E-INVALID"), '{"outcome": "plan", '),
        ],
    )
    try:
        world.settings["THIRDSHIFT_ARCHITECT_PLANS_PER_WEEK"] = "10"  # the open plan gates
        no_ready_issue(world)

        done = world.thirdshift("architect", REPO, "--focus", "ARCHITECT-E2E-PLAN")

        assert done.returncode == 0, done.stderr
        spec, first, second = plan_numbers(world)
        assert done.stdout == issue(world, spec)["html_url"] + "\n"
        assert_a_spec_with_two_tickets(world, spec, first, second)
        for number in (spec, first, second):
            assert labels(issue(world, number)) == {PLAN, TRIAGE}
        assert progress(done.stderr)[-1].startswith(f"published the Architect plan: Spec #{spec} ")
        [run] = runs(world)
        assert (run["kind"], run["state"], run["issue_number"]) == ("architect", "succeeded", 0)
        assert run["issue"] == f"{REPO} (Architect run)"
        assert run["published"] == [spec, first, second]
        assert Path(run["last_session_log"]).exists()
        asked = model_turns(world)

        again = world.thirdshift("architect", REPO, "--focus", "ARCHITECT-E2E-SKIPPED")

        assert again.returncode == 0, again.stderr
        assert progress(again.stderr) == [
            f'skipped: Architect plan #{spec} "One arithmetic module" (with #{first}, #{second}) '
            f"is still open on {REPO}: one plan at a time; close it or finish it first"
        ]
        assert again.stdout == issue(world, spec)["html_url"] + "\n"
        assert model_turns(world) == asked  # no session
        assert world.model_requests("skipped") == []
        assert len(runs(world)) == 1  # a skip records no Run
        assert plan_numbers(world) == [spec, first, second]

        for number in (spec, first, second):  # the maintainer closes the plan
            world.rest("PATCH", f"/repos/{REPO}/issues/{number}", {"state": "closed"})
        issues_before = len(every_issue(world))

        covered = world.thirdshift("architect", REPO, "--focus", "ARCHITECT-E2E-COVERED")

        assert covered.returncode == 0, covered.stderr
        assert world.model_requests("covered") != []
        assert covered.stdout == issue(world, 1)["html_url"] + "\n"
        assert "covered by #1" in progress(covered.stderr)[-1]
        assert len(every_issue(world)) == issues_before
        latest = runs(world)[-1]
        assert (latest["state"], latest["published"]) == ("succeeded", [])

        invalid = world.thirdshift("architect", REPO, "--focus", "ARCHITECT-E2E-INVALID")

        assert invalid.returncode == 1, invalid.stderr
        assert world.model_requests("invalid") != []
        lines = progress(invalid.stderr)
        assert any(f"{ARCHITECT_RESULT_FILE} is not JSON" in line for line in lines), lines
        assert "nothing was published" in lines
        assert lines[-1].startswith("session log: ")
        assert Path(lines[-1].removeprefix("session log: ")).exists()
        assert invalid.stdout == ""
        assert len(every_issue(world)) == issues_before
        failed = runs(world)[-1]
        assert failed["state"] == "failed"
        assert failed["published"] == []
        assert f"{ARCHITECT_RESULT_FILE} is not JSON" in failed["cause"]
        assert failed["last_session_log"] == lines[-1].removeprefix("session log: ")
    finally:
        stop_world(world)


def test_a_run_killed_between_the_spec_and_its_tickets_is_completed_by_the_next_without_a_copy(
    tmp_path: Path,
) -> None:
    """The first Ticket's POST is held until the Architect run is SIGKILLed, then dropped: the
    Spec exists, its Tickets do not. Once the dead run's Lease expires, the next `thirdshift
    architect` completes the same plan (the same Spec, its two Tickets, no copy) without a
    session."""
    world = start_world(
        tmp_path, [architect_session("plan", focus("ARCHITECT-E2E-CRASH"), TWO_TICKETS)]
    )
    killed = threading.Event()
    try:
        world.settings["THIRDSHIFT_LEASE_SECONDS"] = str(LEASE_SECONDS)
        no_ready_issue(world)
        posts: list[str] = []
        held = threading.Event()

        def hold_the_first_ticket(method: str, path: str) -> None:
            if method == "POST" and path.endswith(f"/repos/{REPO}/issues"):
                posts.append(path)
                if len(posts) == 2:  # the Spec went through; this is its first Ticket
                    held.set()
                    killed.wait(120)
                    raise ConnectionAbortedError("the Architect run that asked was killed")

        world.stand_in.before_answer = hold_the_first_ticket
        process = world.start_thirdshift("architect", REPO, "--focus", "ARCHITECT-E2E-CRASH")
        while not held.wait(0.2):
            if process.poll() is not None:
                raise AssertionError(f"thirdshift ended first:\n{process.communicate()[1]}")
        process.send_signal(signal.SIGKILL)
        process.communicate()
        killed.set()
        world.stand_in.before_answer = None
        assert process.returncode == -signal.SIGKILL

        [spec] = plan_numbers(world)
        assert sub_issues(world, spec) == []
        [dead] = runs(world)
        assert dead["state"] == "running"  # as a killed process leaves it
        asked, posted = model_turns(world), issue_posts(world)
        time.sleep(LEASE_SECONDS + 1)  # the dead run's Lease, renewed no more, expires

        done = world.thirdshift("architect", REPO, "--focus", "ARCHITECT-E2E-CRASH")

        assert done.returncode == 0, done.stderr
        lines = progress(done.stderr)
        assert f"Architect run {dead['id']} crashed earlier" in lines
        assert any(
            f"completing what Architect run {dead['id']} began to publish (crashed)" in line
            for line in lines
        ), lines
        assert f"#{spec} (spec) was published already" in lines
        assert done.stdout == issue(world, spec)["html_url"] + "\n"
        numbers = plan_numbers(world)
        assert numbers[0] == spec
        assert len(numbers) == 3
        _, first, second = numbers
        assert_a_spec_with_two_tickets(world, spec, first, second)
        assert len(every_issue(world)) == 4  # issue #1 and the plan
        assert issue_posts(world) == posted + 2  # exactly the two Tickets
        assert model_turns(world) == asked  # no second review
        crashed, latest = runs(world)
        assert crashed["id"] == dead["id"]
        assert crashed["state"] == "crashed"
        assert latest["kind"] == "architect"
        assert latest["state"] == "succeeded"
        assert latest["published"] == [spec, first, second]
    finally:
        killed.set()  # a held request lets go, whatever failed
        stop_world(world)


def implement_turns(marker: str, number: int) -> list[dict[str, Any]]:
    name = f"done-{number}.txt"
    commit = bash(f"echo {marker} > {name} && git add {name} && git commit -qm 'Do #{number}'")
    pr = bash(pull_request_file(f"Do #{number}", f"Does it.\n\nCloses #{number}"), "pr")
    return [{"tool_calls": [commit]}, {"tool_calls": [pr]}, {"text": f"#{number} is done."}]


def test_a_handed_over_plan_runs_as_one_spec_run_by_the_daemon(tmp_path: Path) -> None:
    """architect_hand_over: the Spec is labelled Ready in place of needs-triage, its Tickets only
    lose needs-triage. One poll of the daemon runs the Spec as a Spec run: the first Ticket, then
    the second (blocked by it) once it landed, each merged into the Spec branch by its own pull
    request and closed by thirdshift, then the Spec review and one ready Spec PR into main."""
    # Issue #1 is the world's; the Spec is #2 and its Tickets #3 and #4.
    review = bash(pull_request_file("The plan", "Both Tickets, reviewed."), "pr")
    world = start_world(
        tmp_path,
        [
            architect_session("plan", "You are the Architect of", TWO_TICKETS),
            {
                "name": "first",
                "marker": "ARCHITECT-E2E-TICKET-ONE",
                "turns": implement_turns("ARCHITECT-E2E-TICKET-ONE", 3),
            },
            {
                "name": "second",
                "marker": "ARCHITECT-E2E-TICKET-TWO",
                "turns": implement_turns("ARCHITECT-E2E-TICKET-TWO", 4),
            },
            {
                "name": "review",
                "marker": "the Spec review of issue #2",
                "turns": [{"tool_calls": [review]}, {"text": "Reviewed."}],
            },
        ],
        files=GREEN,
    )
    try:
        world.settings.update(
            {
                "THIRDSHIFT_ARCHITECT_HAND_OVER": "true",
                "THIRDSHIFT_REPOSITORIES": f'["{REPO}"]',
                "THIRDSHIFT_SETTLE_SECONDS": "0",
            }
        )
        no_ready_issue(world)

        done = world.thirdshift("architect", REPO)

        assert done.returncode == 0, done.stderr
        spec, first, second = plan_numbers(world)
        assert (spec, first, second) == (2, 3, 4)
        assert_a_spec_with_two_tickets(world, spec, first, second)
        assert labels(issue(world, spec)) == {PLAN, READY}
        for number in (first, second):
            assert labels(issue(world, number)) == {PLAN}

        poll = world.thirdshift("daemon", "--once", timeout=600)

        assert poll.returncode == 0, poll.stderr
        said = progress(poll.stderr)
        assert f"{REPO}#{spec}: picked up; starting a Spec run" in said
        pulls = {p["head"]["ref"]: p for p in world.pulls()}
        assert set(pulls) == {f"issue-{first}", f"issue-{second}", f"spec-{spec}"}
        for number in (first, second):
            ticket = world.rest("GET", f"/repos/{REPO}/pulls/{pulls[f'issue-{number}']['number']}")
            assert (ticket["merged"], ticket["base"]["ref"]) == (True, f"spec-{spec}")
            assert issue(world, number)["state"] == "closed"
        spec_pull = pulls[f"spec-{spec}"]
        assert (spec_pull["state"], spec_pull["draft"], spec_pull["base"]["ref"]) == (
            "open",
            False,
            "main",
        )
        ran = runs(world)
        assert [(r["kind"], r["issue_number"], r["state"]) for r in ran] == [
            ("architect", 0, "succeeded"),
            ("spec", spec, "succeeded"),
            ("merge", first, "succeeded"),
            ("merge", second, "succeeded"),
        ]
        assert {r["parent_run_id"] for r in ran[2:]} == {ran[1]["id"]}
        assert issue(world, spec)["state"] == "open"  # until a person merges the Spec PR
    finally:
        stop_world(world)
