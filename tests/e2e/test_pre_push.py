"""The pre-push check end to end: `thirdshift run` on the GitHub stand-in with the real claude
CLI, whose scripted agent adds a workflow or hides a secret in an octopus merge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

ISSUE_MARKER = "calc.add(2, 3) returns -1"
WORKFLOW = ".github/workflows/leak.yml"
PLANTED = "ghp_" + "0ct0pus" * 6  # token-shaped, as if the agent wrote a secret


def _implement(*commands: str) -> list[dict[str, Any]]:
    """The implement session: fix add(), run ``commands`` (each one turn), write the pull
    request file, and finish."""
    fix = write_file_command("calc.py", CALC_FIXED) + " && git commit -qam 'Make add() add'"
    turns: list[dict[str, Any]] = [{"tool_calls": [bash(fix, "fix")]}]
    turns += [{"tool_calls": [bash(command, "work")]} for command in commands]
    pr = pull_request_file("Make add() add", "add() subtracted.\n\nCloses #1")
    turns += [{"tool_calls": [bash(pr, "pr")]}, {"text": "Done."}]
    return [{"name": "implement", "marker": ISSUE_MARKER, "turns": turns}]


ADD_WORKFLOW = (
    "mkdir -p .github/workflows && "
    + write_file_command(WORKFLOW, "on: pull_request\njobs: {}\n")
    + " && git add .github && git commit -qm 'Add a workflow'"
)

OCTOPUS_WITH_A_SECRET = (
    "B=$(git branch --show-current) && "
    "git checkout -q -b side-a && echo a > a.txt && git add a.txt && git commit -qm a && "
    'git checkout -q "$B" && git checkout -q -b side-b && echo b > b.txt && git add b.txt && '
    'git commit -qm b && git checkout -q "$B" && '
    "git merge -q --no-ff --no-commit side-a side-b && "
    f"echo 'GITHUB_TOKEN={PLANTED}' >> README.md && git add README.md && "
    "git commit -qm 'Merge the side branches'"
)


def _heads(world: RunWorld) -> str:
    return world.git("ls-remote", "--heads", world.remote_url)


def _kept(world: RunWorld) -> Path:
    return world.home / "worktrees" / f"{OWNER}-{NAME}-issue-1"


def _failure_comment(world: RunWorld) -> str:
    [*_claim, failure] = world.comments()
    return str(failure["body"])


def test_an_agents_workflow_is_not_pushed_and_the_failed_run_names_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    world = start_world(tmp_path, _implement(ADD_WORKFLOW))
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1, result.stderr
    assert f"not pushing issue-1: its commits change workflow files ({WORKFLOW})" in result.stderr
    assert "issue-1" not in _heads(world)
    assert world.pulls() == []
    assert (_kept(world) / WORKFLOW).is_file()
    comment = _failure_comment(world)
    assert WORKFLOW in comment
    assert "allow_workflow_changes" in comment


def test_with_allow_workflow_changes_the_agents_workflow_is_pushed(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    world = start_world(tmp_path, _implement(ADD_WORKFLOW))
    worlds.append(world)
    world.settings["THIRDSHIFT_ALLOW_WORKFLOW_CHANGES_BY_REPOSITORY"] = (
        f'{{"{OWNER}/{NAME}": true}}'
    )

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    [pull] = world.pulls()
    assert result.stdout == pull["html_url"] + "\n"
    clone = world.clone()
    assert world.git("show", f"origin/issue-1:{WORKFLOW}", cwd=clone).startswith("on: ")


def test_a_secret_in_an_octopus_merge_is_not_pushed_and_the_file_and_line_are_named(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    world = start_world(tmp_path, _implement(OCTOPUS_WITH_A_SECRET))
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1, result.stderr
    assert "its commits add what looks like a secret at README.md:2 (" in result.stderr
    assert "issue-1" not in _heads(world)
    assert world.pulls() == []
    kept = _kept(world)
    octopus = world.git("rev-list", "--min-parents=3", "HEAD", cwd=kept).split()
    assert len(octopus) == 1  # the agent's merge of three parents stays in the Worktree
    comment = _failure_comment(world)
    assert "README.md:2" in comment
    assert PLANTED not in comment + result.stderr
