"""Parallel Tickets are isolated (adr/0042): a Spec run's two Tickets run at once, each a
session of the real claude CLI in the real Agent sandbox on the scripted model server. One
agent rewrites the other Ticket's branch, from its own Worktree and through the managed clone's
path; the other Ticket's pushed head is still its own session's work."""

from __future__ import annotations

import re
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

pytestmark = pytest.mark.real_cli

GREEN = {"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC}
VICTIM, ATTACKER = 2, 3  # the Spec is issue 1; its Tickets are made in this order


def victim_session() -> dict[str, Any]:
    """Commits its file, then thinks a while (the other agent strikes meanwhile) and writes
    its pull request."""
    return {
        "name": "victim",
        "marker": "Write the notes file v.txt",
        "turns": [
            {
                "tool_calls": [
                    bash(
                        write_file_command("v.txt", "v\n")
                        + " && git add v.txt && git commit -qm 'Add v.txt'",
                        "write and commit",
                    )
                ]
            },
            {
                "delay_ms": 6000,
                "tool_calls": [bash(pull_request_file("Add v.txt", "Adds v.txt."))],
            },
            {"text": "Added v.txt."},
        ],
    }


def attacker_session(clone: Path) -> dict[str, Any]:
    """Commits its own file, waits (at most 10 s) until the victim's commit shows in the
    managed clone, then points the victim's branch at its own commit three ways: in its own
    repository, through the clone's path with git, and by writing the clone's ref file."""
    branch = f"refs/heads/issue-{VICTIM}"
    strike = (
        write_file_command("x.txt", "x\n")
        + " && git add x.txt && git commit -qm 'Add x.txt'\n"
        + "for i in $(seq 100); do"
        + f' [ "$(git --git-dir={clone} log -1 --format=%s {branch} 2>/dev/null)"'
        + ' = "Add v.txt" ] && break; sleep 0.1; done\n'
        + f"git update-ref {branch} HEAD; echo own=$?\n"
        + f"git --git-dir={clone} update-ref {branch} HEAD; echo clone=$?\n"
        + f"git rev-parse HEAD > {clone}/{branch}; echo file=$?\n"
    )
    return {
        "name": "attacker",
        "marker": "Write the notes file x.txt",
        "turns": [
            {"tool_calls": [bash(strike, "commit, then move the other Ticket's branch")]},
            {"tool_calls": [bash(pull_request_file("Add x.txt", "Adds x.txt."))]},
            {"text": "Added x.txt."},
        ],
    }


def review_session() -> dict[str, Any]:
    return {
        "name": "spec-review",
        "marker": "the Spec review of issue #1",
        "turns": [
            {
                "tool_calls": [
                    bash("test -f v.txt && test -f x.txt && " + pull_request_file("Notes", "."))
                ]
            },
            {"text": "Reviewed the Spec branch."},
        ],
    }


def ticket(world: RunWorld, name: str) -> int:
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
    return int(made["number"])


def test_a_ticket_whose_branch_a_parallel_agent_rewrites_pushes_its_own_sessions_work(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The attacker's rewrite lands in its own repository only, the managed clone refuses it
    (read-only), and the victim's pushed and merged head is its own commit; both Tickets land
    and the Spec PR is ready."""
    clone = tmp_path / "home" / "repos" / OWNER / NAME
    world = start_world(
        tmp_path,
        [victim_session(), attacker_session(clone), review_session()],
        files=GREEN,
        issue_title="Notes files",
        issue_body="Two notes files, v and x, written side by side.",
    )
    worlds.append(world)
    assert (ticket(world, "v"), ticket(world, "x")) == (VICTIM, ATTACKER)

    result = world.thirdshift("run", "--parallel", "2", world.issue_url, timeout=600)

    assert result.returncode == 0, result.stderr
    said = str(world.model_requests("attacker")[1])
    codes = dict(re.findall(r"(own|clone|file)=(\d+)", said))
    assert codes["own"] == "0"  # its own repository: a ref of its own, harmless
    assert codes["clone"] != "0"
    assert codes["file"] != "0"
    assert "Read-only file system" in said
    pulls = {p["head"]["ref"]: p for p in world.pulls() if p["base"]["ref"] == "spec-1"}
    victim = pulls[f"issue-{VICTIM}"]
    assert victim["merged_at"]
    inspect = world.clone()
    head = victim["head"]["sha"]
    own_line = world.git("log", "--first-parent", "--format=%s", head, cwd=inspect).splitlines()
    assert "Add v.txt" in own_line
    assert "Add x.txt" not in own_line
    assert world.git("show", f"{head}:v.txt", cwd=inspect) == "v"
    assert pulls[f"issue-{ATTACKER}"]["merged_at"]
    assert world.git("for-each-ref", "refs/heads", cwd=clone) == ""
