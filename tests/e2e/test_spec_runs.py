"""Spec runs end to end: `thirdshift run <Spec URL>` as a subprocess against the GitHub
stand-in, each Ticket and the Spec review a session of the real claude CLI on the scripted
model server."""

from __future__ import annotations

import time
from collections.abc import Iterator
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
from thirdshift.sessions.preamble import count_tokens

pytestmark = pytest.mark.real_cli

GREEN = {"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC}
SPEC_BRIEF = "Three notes files: a and b first, then c, which needs both."


def ticket_session(name: str, *, needs: tuple[str, ...] = (), delay_ms: int = 0) -> dict[str, Any]:
    """A Ticket's session: checks the files it needs are there (a missing one fails the
    commit, and with it the Ticket), writes its own, commits, writes its pull request.
    ``delay_ms``: the model takes that long over the first turn (a Ticket still running)."""
    check = " && ".join(f"test -f {n}.txt" for n in needs) or "true"
    write = write_file_command(f"{name}.txt", name + "\n")
    return {
        "name": f"ticket-{name}",
        "marker": f"Write the notes file {name}.txt",
        "turns": [
            {
                "delay_ms": delay_ms,
                "tool_calls": [
                    bash(
                        f"{check} && {write} && "
                        f"git add {name}.txt && git commit -qm 'Add {name}.txt'",
                        "write and commit",
                    )
                ],
            },
            {"tool_calls": [bash(pull_request_file(f"Add {name}.txt", f"Adds {name}.txt."))]},
            {"text": f"Added {name}.txt and wrote the pull request."},
        ],
    }


def review_session(spec: int, names: str) -> dict[str, Any]:
    """The Spec review of Spec ``spec``: checks every Ticket's file is on the Spec branch and
    writes the Spec PR's text."""
    check = " && ".join(f"test -f {n}.txt" for n in names)
    return {
        "name": f"spec-review-{spec}",
        "marker": f"the Spec review of issue #{spec}",
        "turns": [
            {"tool_calls": [bash(f"{check} && " + pull_request_file("Notes", "The notes."))]},
            {"text": "Reviewed the Spec branch; nothing to fix."},
        ],
    }


def failing_session(name: str) -> dict[str, Any]:
    """A Ticket's session that gives up without a commit: its Run fails."""
    return {
        "name": f"ticket-{name}-fails",
        "marker": f"Write the notes file {name}.txt",
        "turns": [{"text": "I could not do this."}],
    }


def ticket(world: RunWorld, name: str, spec: int = 1) -> tuple[int, int]:
    """A Ticket of the Spec: its number and its id."""
    made = world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues",
        {"title": f"Notes file {name}", "body": f"Write the notes file {name}.txt."},
    )
    world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues/{spec}/sub_issues",
        {"sub_issue_id": int(made["id"])},
    )
    return int(made["number"]), int(made["id"])


def block(world: RunWorld, blocked: int, blocker: int) -> None:
    blocker_id = int(world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{blocker}")["id"])
    world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues/{blocked}/dependencies/blocked_by",
        {"issue_id": blocker_id},
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunWorld]:
    """One stand-in, model server and home for the file: Spec 1 (issue 1) and its Tickets
    a, b, c; the second Spec's Tickets d (failing once), e and f (blocked by d); the third's x,
    y and z."""
    made = start_world(
        tmp_path_factory.mktemp("spec-runs"),
        [
            ticket_session("a"),
            ticket_session("b"),
            ticket_session("c", needs=("a", "b")),
            review_session(1, "abc"),
            failing_session("d"),
            ticket_session("d"),
            ticket_session("e"),
            ticket_session("f", needs=("d",)),
            ticket_session("x", delay_ms=4000),
            ticket_session("y", needs=("z",)),
            ticket_session("z"),
        ],
        files=GREEN,
        issue_title="Notes files",
        issue_body=SPEC_BRIEF,
    )
    try:
        yield made
    finally:
        stop_world(made)


def test_tickets_a_and_b_land_then_c_sees_both_and_the_spec_pr_is_ready(
    world: RunWorld,
) -> None:
    """A and B run at once; C (blocked by both) starts from a Spec branch holding both and its
    prompt carries the brief and what A and B did; each Ticket is one merged pull request into
    the Spec branch, closed; the Spec PR into main is open, ready and names A, B and C."""
    a, _ = ticket(world, "a")
    b, _ = ticket(world, "b")
    c, _ = ticket(world, "c")
    block(world, c, a)
    block(world, c, b)

    result = world.thirdshift("run", "--parallel", "2", world.issue_url, timeout=600)

    assert result.returncode == 0, result.stderr
    pulls = world.pulls()
    [spec_pull] = [p for p in pulls if p["base"]["ref"] == "main"]
    assert result.stdout == spec_pull["html_url"] + "\n"
    assert (spec_pull["state"], spec_pull["draft"], spec_pull["head"]["ref"]) == (
        "open",
        False,
        "spec-1",
    )
    for number in (a, b, c):
        assert f"#{number}" in spec_pull["body"]
        issue = world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{number}")
        assert issue["state"] == "closed"
    ticket_pulls = [p for p in pulls if p["base"]["ref"] == "spec-1"]
    assert sorted(p["head"]["ref"] for p in ticket_pulls) == [f"issue-{n}" for n in (a, b, c)]
    assert all(p["merged_at"] for p in ticket_pulls)
    lines = [line.split("] ", 1)[-1] for line in result.stderr.splitlines()]  # no timestamps
    started = [line for line in lines if line.startswith("starting Ticket #")]
    assert started[:2] == [f"starting Ticket #{a} into spec-1", f"starting Ticket #{b} into spec-1"]
    [c_request] = world.model_requests("ticket-c")[:1]
    prompt = str(c_request)
    assert SPEC_BRIEF in prompt
    assert "Added a.txt" in prompt
    assert "Added b.txt" in prompt
    preamble = prompt.split("You are working unattended", 1)[0]
    assert count_tokens(preamble) <= 2000


def test_a_failed_ticket_holds_its_dependent_and_a_rerun_lands_the_rest(world: RunWorld) -> None:
    """D fails: F (blocked by D) never starts, E lands, exit 1 with the Tickets not done on
    stderr; run again, D and then F land and E is not run again."""
    spec = int(
        world.rest(
            "POST",
            f"/repos/{OWNER}/{NAME}/issues",
            {"title": "More notes", "body": "Notes d, e and f."},
        )["number"]
    )
    d, _ = ticket(world, "d", spec)
    e, _ = ticket(world, "e", spec)
    f, _ = ticket(world, "f", spec)
    block(world, f, d)
    spec_url = world.issue_url.rsplit("/", 1)[0] + f"/{spec}"

    first = world.thirdshift("run", "--parallel", "2", spec_url, timeout=600)

    assert first.returncode == 1, first.stderr
    assert f"Tickets not done: #{d}, #{f}" in first.stderr
    assert first.stdout == ""
    issue_e = world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{e}")
    assert issue_e["state"] == "closed"
    assert not [p for p in world.pulls() if p["head"]["ref"] == f"issue-{f}"]
    e_sessions = len(world.model_requests("ticket-e"))

    again = world.thirdshift("run", spec_url, timeout=600)

    assert again.returncode == 0, again.stderr
    assert len(world.model_requests("ticket-e")) == e_sessions  # E was not run again
    for number in (d, f):
        assert world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{number}")["state"] == "closed"
    [spec_pull] = [p for p in world.pulls() if p["head"]["ref"] == f"spec-{spec}"]
    assert again.stdout == spec_pull["html_url"] + "\n"
    assert (spec_pull["state"], spec_pull["draft"]) == ("open", False)


def test_a_blocker_a_person_adds_mid_run_holds_the_waiting_ticket(world: RunWorld) -> None:
    """One Ticket at a time: while X runs, a person makes Y blocked by Z. Y, the lower number,
    would have gone next; it waits for Z to land and then sees Z's change."""
    spec = int(
        world.rest(
            "POST",
            f"/repos/{OWNER}/{NAME}/issues",
            {"title": "Notes x, y, z", "body": "Notes x, y and z."},
        )["number"]
    )
    x, _ = ticket(world, "x", spec)
    y, _ = ticket(world, "y", spec)
    z, _ = ticket(world, "z", spec)
    spec_url = world.issue_url.rsplit("/", 1)[0] + f"/{spec}"
    process = world.start_thirdshift("run", "--parallel", "1", spec_url)
    deadline = time.monotonic() + 120
    while not world.model_requests("ticket-x"):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "Ticket X never started"
        time.sleep(0.2)

    block(world, y, z)  # X's first turn is still with the model

    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    lines = [line.split("] ", 1)[-1] for line in stderr.splitlines()]
    started = [line for line in lines if line.startswith("starting Ticket #")]
    assert started == [
        f"starting Ticket #{x} into spec-{spec}",
        f"starting Ticket #{z} into spec-{spec}",
        f"starting Ticket #{y} into spec-{spec}",
    ]
    [spec_pull] = [p for p in world.pulls() if p["head"]["ref"] == f"spec-{spec}"]
    assert stdout == spec_pull["html_url"] + "\n"
