"""A red Base branch end to end, with `base_fix` on: `thirdshift daemon --once` on the GitHub
stand-in (CI on every push), real git and the real claude CLI with scripted turns. The issue's
Run fails only from an Inherited failure and opens a Base fix issue; the next poll runs the Base
fix first, as a Merge run, into main; the poll after that runs the issue again, now green."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.run_world import (
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    stop_world,
)

pytestmark = pytest.mark.real_cli

ISSUE = "Add a changelog. BASE-FIX-E2E-ISSUE"
CHECK = {"release notes": "test -f NOTES.md"}  # red on main until the Base fix lands


def commit(path: str, line: str, subject: str) -> str:
    return f"echo '{line}' > {path} && git add -A && git commit -qm '{subject}'"


def test_with_base_fix_on_the_base_fix_runs_first_as_a_merge_run_then_the_issue(
    tmp_path: Path,
) -> None:
    changelog = [
        {"tool_calls": [bash(commit("CHANGES.md", "# Changes", "Add a changelog"), "changelog")]},
        {"tool_calls": [bash(pull_request_file("Add a changelog", "Closes #1"), "pr")]},
        {"text": "Added the changelog."},
    ]
    notes = [
        {"tool_calls": [bash(commit("NOTES.md", "# Notes", "Add release notes"), "notes")]},
        {"tool_calls": [bash(pull_request_file("Add release notes", "Closes #3"), "pr")]},
        {"text": "Made the release notes check pass."},
    ]
    world: RunWorld = start_world(
        tmp_path,
        [
            {"name": "implement", "marker": "BASE-FIX-E2E-ISSUE", "turns": changelog},
            {"name": "base fix", "marker": "Make them pass on `main`", "turns": notes},
        ],
        files={"README.md": "# calculator\n"},
        checks=CHECK,
        issue_title="Add a changelog",
        issue_body=ISSUE,
    )
    try:
        world.settings.update(
            {
                "THIRDSHIFT_REPOSITORIES": f'["{OWNER}/{NAME}"]',
                "THIRDSHIFT_SETTLE_SECONDS": "0",
                "THIRDSHIFT_BASE_FIX": "true",
            }
        )

        first = world.thirdshift("daemon", "--once", timeout=300)
        assert first.returncode == 1, first.stderr  # its one Run failed

        assert "only from Inherited failures" in first.stderr
        fix = world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/3")
        assert fix["title"] == "Fix release notes on main"
        assert {label["name"] for label in fix["labels"]} == {"ready-for-agent", "thirdshift-merge"}
        blockers = world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/1/dependencies/blocked_by")
        assert [b["number"] for b in blockers] == [3]

        second = world.thirdshift("daemon", "--once", timeout=300)
        assert second.returncode == 0, second.stderr
        assert "blocked by #3" in second.stderr  # the issue waits while the Base fix runs
        assert world.rest("GET", f"/repos/{OWNER}/{NAME}/issues/3")["state"] == "closed"
        inspect = world.clone()
        world.git("checkout", "-q", "origin/main", cwd=inspect)
        assert (inspect / "NOTES.md").read_text() == "# Notes\n"

        third = world.thirdshift("daemon", "--once", timeout=300)
        assert third.returncode == 0, third.stderr
        pulls = {p["head"]["ref"]: p for p in world.pulls()}
        assert pulls["issue-1"]["draft"] is False
        assert pulls["issue-1"]["state"] == "open"
        head = pulls["issue-1"]["head"]["sha"]
        assert {c["conclusion"] for c in world.check_runs(head)} == {"success"}
        done = world.thirdshift("runs", "--json")
        states = [json.loads(line)["state"] for line in done.stdout.splitlines()]
        assert sorted(states) == ["failed", "succeeded", "succeeded"]
    finally:
        stop_world(world)
