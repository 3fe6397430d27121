"""Branches cannot be moved from another Run: with the real claude CLI in the real Agent
sandbox, the agent of one issue's Run moves the branch another issue's Failed run kept in the
shared managed clone, and the next Run on that issue does not push it (adr/0027)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

ONE = "The first issue: calc.add(2, 3) returns -1"
TWO = "The second issue: calc.add is wrong as well"

# From the agent's own Worktree, with nothing but git: a commit made in a private index on top
# of issue-2 (whose Worktree the agent cannot even see), and issue-2 moved to it.
PLANT = (
    "export GIT_INDEX_FILE=/tmp/planted-index"
    " && git read-tree refs/heads/issue-2"
    " && echo planted > /tmp/planted.txt"
    " && blob=$(git hash-object -w /tmp/planted.txt)"
    " && git update-index --add --cacheinfo 100644,$blob,planted.txt"
    " && tree=$(git write-tree)"
    " && commit=$(git commit-tree $tree -p refs/heads/issue-2 -m 'Planted by issue 1')"
    " && git update-ref refs/heads/issue-2 $commit"
    " && unset GIT_INDEX_FILE"
)


def fix_and_describe(title: str) -> list[dict[str, object]]:
    return [
        {
            "tool_calls": [
                bash(
                    write_file_command("calc.py", CALC_FIXED)
                    + " && git commit -qam 'Make add() add'"
                    + " && "
                    + pull_request_file(title, "add() adds."),
                    "fix",
                )
            ]
        },
        {"text": "Done."},
    ]


def test_a_branch_another_runs_agent_moved_is_not_pushed_by_the_next_run(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Issue 2's Run fails to push and keeps its Worktree; issue 1's agent commits on top of
    issue-2 in the shared clone and moves it there; the next Run on issue 2 says it does not
    adopt that head, keeps it aside, starts from origin and opens its pull request without it."""
    sessions: list[dict[str, object]] = [
        {
            "name": "two-fails",
            "marker": TWO,
            "turns": [
                {
                    "tool_calls": [
                        bash(
                            write_file_command("calc.py", CALC_FIXED)
                            + " && git commit -qam 'Make add() add'"
                            + " && python3 -c 'import time; time.sleep(4)'",
                            "fix and wait",
                        )
                    ]
                },
                {"text": "Done."},
            ],
        },
        {
            "name": "one-plants",
            "marker": ONE,
            "turns": [
                {"tool_calls": [bash(PLANT, "move another issue's branch")]},
                *fix_and_describe("Make add() add"),
            ],
        },
        {"name": "two-again", "marker": TWO, "turns": fix_and_describe("Fix add() again")},
    ]
    world = start_world(tmp_path, sessions, issue_body=ONE)
    worlds.append(world)
    second = world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues",
        {"title": "add() is wrong", "body": TWO, "labels": ["ready-for-agent"]},
    )
    two_url = f"{world.stand_in.web_url}/{OWNER}/{NAME}/issues/{second['number']}"
    assert second["number"] == 2

    process = world.start_thirdshift("run", two_url)
    world.wait_for_process("time.sleep(4)")
    world.client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "read"})
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    kept = world.home / "worktrees" / f"{OWNER}-{NAME}-issue-2"
    assert kept.is_dir()
    world.client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "admin"})

    one = world.thirdshift("run", world.issue_url)
    assert one.returncode == 0, one.stderr
    clone = world.home / "repos" / OWNER / NAME
    planted = world.git("rev-parse", "refs/heads/issue-2", cwd=clone)
    assert world.git("log", "-1", "--format=%s", planted, cwd=clone) == "Planted by issue 1"

    again = world.thirdshift("run", two_url)

    assert again.returncode == 0, again.stderr
    inspect = world.clone()
    pushed = world.git("log", "--format=%s", "origin/issue-2", cwd=inspect).splitlines()
    assert "Planted by issue 1" not in pushed
    assert world.git("ls-tree", "--name-only", "origin/issue-2", cwd=inspect).split() == [
        "README.md",
        "calc.py",
        "test_calc.py",
    ]
    aside = f"refs/thirdshift/unadopted/issue-2-{planted[:12]}"
    assert (
        f"not adopting issue-2 in the worktree {kept}: its head {planted[:7]} is not one "
        "thirdshift recorded for #2"
    ) in again.stderr, again.stderr
    # Moved under its Worktree, the branch's new file reads as deleted there: that uncommitted
    # change goes aside on top of the planted head.
    assert (
        f"kept it aside with the Worktree's uncommitted work as {aside}, and starting from origin"
    ) in again.stderr
    assert "pushing it to issue-2" not in again.stderr
    assert world.git("rev-parse", f"{aside}^", cwd=clone) == planted
    [pull] = [p for p in world.pulls() if p["head"]["ref"] == "issue-2"]
    assert pull["title"] == "Fix add() again"
