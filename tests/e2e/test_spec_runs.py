"""Spec runs end to end: `thirdshift run <Spec URL>` as a subprocess against the GitHub
stand-in, each Ticket and the Spec review a session of the real claude CLI on the scripted
model server."""

from __future__ import annotations

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
    write_file_command,
)
from thirdshift.sessions.preamble import count_tokens

pytestmark = pytest.mark.real_cli

GREEN = {"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC}
SPEC_BRIEF = "Three notes files: a and b first, then c, which needs both."
REVIEW_MARKER = "the Spec review of issue #1"


def ticket_session(name: str, *, needs: tuple[str, ...] = ()) -> dict[str, Any]:
    """A Ticket's session: checks the files it needs are there (a missing one fails the
    commit, and with it the Ticket), writes its own, commits, writes its pull request."""
    check = " && ".join(f"test -f {n}.txt" for n in needs) or "true"
    write = write_file_command(f"{name}.txt", name + "\n")
    return {
        "name": f"ticket-{name}",
        "marker": f"Write the notes file {name}.txt",
        "turns": [
            {
                "tool_calls": [
                    bash(
                        f"{check} && {write} && "
                        f"git add {name}.txt && git commit -qm 'Add {name}.txt'",
                        "write and commit",
                    )
                ]
            },
            {"tool_calls": [bash(pull_request_file(f"Add {name}.txt", f"Adds {name}.txt."))]},
            {"text": f"Added {name}.txt and wrote the pull request."},
        ],
    }


def review_session() -> dict[str, Any]:
    return {
        "name": "spec-review",
        "marker": REVIEW_MARKER,
        "turns": [
            {
                "tool_calls": [
                    bash(
                        "test -f a.txt && test -f b.txt && test -f c.txt && "
                        + pull_request_file("Notes a, b and c", "The three notes files.")
                    )
                ]
            },
            {"text": "Reviewed the Spec branch; nothing to fix."},
        ],
    }


def ticket(world: RunWorld, name: str) -> tuple[int, int]:
    """A Ticket of the Spec (issue 1): its number and its id."""
    made = world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues",
        {"title": f"Notes file {name}", "body": f"Write the notes file {name}.txt."},
    )
    world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues/1/sub_issues",
        {"sub_issue_id": int(made["id"])},
    )
    return int(made["number"]), int(made["id"])


def test_tickets_a_and_b_land_then_c_sees_both_and_the_spec_pr_is_ready(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """A and B run at once; C (blocked by both) starts from a Spec branch holding both and its
    prompt carries the brief and what A and B did; each Ticket is one merged pull request into
    the Spec branch, closed; the Spec PR into main is open, ready and names A, B and C."""
    world = start_world(
        tmp_path,
        [
            ticket_session("a"),
            ticket_session("b"),
            ticket_session("c", needs=("a", "b")),
            review_session(),
        ],
        files=GREEN,
        issue_title="Notes files",
        issue_body=SPEC_BRIEF,
    )
    worlds.append(world)
    a, _ = ticket(world, "a")
    b, _ = ticket(world, "b")
    c, _ = ticket(world, "c")
    for blocker in (a, b):
        blocker_id = int(world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{blocker}")["id"])
        world.rest(
            "POST",
            f"/repos/{OWNER}/{NAME}/issues/{c}/dependencies/blocked_by",
            {"issue_id": blocker_id},
        )

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
