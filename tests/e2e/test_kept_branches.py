"""Branches cannot be moved from another Run: with the real claude CLI in the real Agent
sandbox, the agent of one issue's Run tries to move the branch another issue's Failed run kept,
through the managed clone (read-only to it, adr/0042) and in its own repository; the next Run on
that issue adopts its kept work as it was, and nothing planted reaches it (adr/0027)."""

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


def plant(clone: Path) -> str:
    """From the agent's own Worktree, with nothing but git: a commit made in a private index on
    top of issue-2 as the managed clone holds it (whose Worktree the agent cannot even see),
    and issue-2 moved to it, in the clone and in the agent's own repository."""
    return (
        "export GIT_INDEX_FILE=/tmp/planted-index"
        f" && git --git-dir={clone} read-tree refs/remotes/origin/main"
        " && echo planted > /tmp/planted.txt"
        " && blob=$(git hash-object -w /tmp/planted.txt)"
        " && git update-index --add --cacheinfo 100644,$blob,planted.txt"
        " && tree=$(git write-tree)"
        " && commit=$(git commit-tree $tree -p HEAD -m 'Planted by issue 1')"
        " && unset GIT_INDEX_FILE"
        f"; git --git-dir={clone} update-ref refs/heads/issue-2 $commit; echo clone=$?"
        "; git update-ref refs/heads/issue-2 $commit; echo own=$?"
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
    """Issue 2's Run fails to push and keeps its Worktree; issue 1's agent commits and tries to
    move issue-2 to it: the managed clone refuses (read-only), its own repository takes a ref
    of its own. The next Run on issue 2 adopts its kept work as it was and opens its pull
    request without the planted commit."""
    clone = tmp_path / "home" / "repos" / OWNER / NAME
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
                {"tool_calls": [bash(plant(clone), "move another issue's branch")]},
                *fix_and_describe("Make add() add"),
            ],
        },
        {
            "name": "two-again",
            "marker": TWO,
            "turns": [  # its earlier Run's fix is adopted: only the pull request is left
                {"tool_calls": [bash(pull_request_file("Fix add() again", "add() adds."))]},
                {"text": "Done."},
            ],
        },
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
    said = str(world.model_requests("one-plants")[1])
    assert "clone=0" not in said
    assert "own=0" in said
    assert world.git("for-each-ref", "refs/heads", cwd=clone) == ""

    again = world.thirdshift("run", two_url)

    assert again.returncode == 0, again.stderr
    inspect = world.clone()
    pushed = world.git("log", "--format=%s", "origin/issue-2", cwd=inspect).splitlines()
    assert "Planted by issue 1" not in pushed
    assert "Make add() add" in pushed
    assert f"the worktree {kept} from an earlier Run holds" in again.stderr, again.stderr
    assert "not adopting" not in again.stderr
    [pull] = [p for p in world.pulls() if p["head"]["ref"] == "issue-2"]
    assert pull["title"] == "Fix add() again"
