"""The agent's pull request text defanged end to end: `thirdshift run --merge` on the GitHub
stand-in, real git and the real claude CLI with scripted turns. The agent's Pull request file
mentions people and a team, closes another issue of this repository and one of another, and
carries a thirdshift marker; the published title and body hold none of it, `Closes #1` is
there once, and the merge closes the Run's own issue and nothing else."""

from __future__ import annotations

from pathlib import Path

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
from thirdshift.runs.claims import CLAIM_MARKER

pytestmark = pytest.mark.real_cli

TITLE = "Make add() add, fixes #2 for @maintainer"
BODY = (
    "add() subtracted. Also fixes #2 and closes acme/priv#1, see "
    "https://github.com/acme/priv/issues/1.\n\n"
    f"cc @maintainer @acme/core\n\n{CLAIM_MARKER}\n\nCloses #1"
)
ACTIVE = ["@maintainer", "@acme/core", "fixes #2", "closes acme", "acme/priv#1", "https://github"]


def test_the_published_pull_request_mentions_no_one_and_closes_only_its_own_issue(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    turns = [
        {"tool_calls": [bash(write_file_command("calc.py", CALC_FIXED), "fix")]},
        {"tool_calls": [bash("git add calc.py && git commit -qm 'Make add() add'", "commit")]},
        {"tool_calls": [bash(pull_request_file(TITLE, BODY), "pr")]},
        {"text": "Fixed add() and wrote the pull request."},
    ]
    world = start_world(
        tmp_path, [{"name": "implement", "marker": "calc.add(2, 3) returns -1", "turns": turns}]
    )
    worlds.append(world)
    other = world.rest(
        "POST", f"/repos/{OWNER}/{NAME}/issues", {"title": "Unrelated", "body": "Leave me open."}
    )
    assert other["number"] == 2

    result = world.thirdshift("run", "--merge", world.issue_url)

    assert result.returncode == 0, result.stderr
    [listed] = world.pulls()
    pull = world.rest("GET", f"/repos/{OWNER}/{NAME}/pulls/{listed['number']}")
    assert pull["merged"] is True
    for text in (pull["title"], pull["body"]):
        assert [piece for piece in ACTIVE if piece in text] == []
        assert CLAIM_MARKER not in text
        assert "<!-- thirdshift" not in text
    assert pull["title"] == "Make add() add, f\u200bixes #2 for @\u200bmaintainer"
    assert pull["body"].count("Closes #1") == 1
    assert pull["body"].endswith("Closes #1")
    assert world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/1")["state"] == "closed"
    assert world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/2")["state"] == "open"
