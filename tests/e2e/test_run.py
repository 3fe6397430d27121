"""`thirdshift run` end to end: the command, the GitHub stand-in, real git, the real claude CLI
with scripted model turns."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    CHECK,
    NAME,
    OWNER,
    TEST_CALC,
    RunWorld,
    bash,
    pull_request_file,
    running,
    start_world,
    write_file_command,
)
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.sandbox.model.server import codex_config_args, codex_env

pytestmark = pytest.mark.real_cli

ISSUE_MARKER = "calc.add(2, 3) returns -1"
REPAIR_MARKER = "CI is red on"
CONFLICT_MARKER = "stopped with conflicts in"


def implement(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"name": "implement", "marker": ISSUE_MARKER, "turns": list(turns)}


def fix_and_commit() -> list[dict[str, Any]]:
    return [
        {
            "tool_calls": [
                bash(
                    write_file_command("calc.py", CALC_FIXED) + " && python3 -m unittest -q", "fix"
                )
            ]
        },
        {"tool_calls": [bash("git add calc.py && git commit -qm 'Make add() add'", "commit")]},
        {
            "tool_calls": [
                bash(pull_request_file("Make add() add", "add() subtracted.\n\nCloses #1"), "pr")
            ]
        },
        {"text": "Fixed add() and wrote the pull request."},
    ]


def test_a_fresh_issue_ends_with_a_ready_green_pull_request(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Exit 0, the URL on stdout, the pull request open, ready, on main, closing the issue, with
    green checks; the Claim's label in place; the worktree gone."""
    world = start_world(tmp_path, [implement(*fix_and_commit())])
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    pulls = world.pulls()
    assert len(pulls) == 1
    pull = pulls[0]
    assert result.stdout == pull["html_url"] + "\n"
    assert pull["state"] == "open"
    assert pull["draft"] is False
    assert pull["base"]["ref"] == "main"
    assert pull["head"]["ref"] == "issue-1"
    assert pull["title"] == "Make add() add"
    assert "Closes #1" in pull["body"]
    checks = world.check_runs(pull["head"]["sha"])
    assert [(c["name"], c["conclusion"]) for c in checks] == [(CHECK, "success")]
    labels = [label["name"] for label in world.issue()["labels"]]
    assert labels == ["in-progress"]
    # No Worktree is left; its own repository stays beside it (adr/0042), without a checkout.
    left = sorted(p.name for p in (world.home / "worktrees").iterdir())
    assert left == ["acme-calculator-issue-1.git"]
    assert not (world.home / "worktrees" / "acme-calculator-issue-1.git" / "index").exists()
    assert "labelling #1 in-progress, in place of ready-for-agent" in result.stderr
    assert f"pull request {pull['html_url']} is ready" in result.stderr


GREEN_PROJECT = {"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC}
SUBTRACT_ISSUE = "Add subtract(a, b) to calc.py, with a test."
TEST_SUBTRACT = (
    "import unittest\n\nfrom calc import subtract\n\n\n"
    "class SubtractTest(unittest.TestCase):\n"
    "    def test_subtracts(self) -> None:\n"
    "        self.assertEqual(subtract(5, 3), 2)\n"
)
CALC_WITH_SUBTRACT = CALC_FIXED + "\n\ndef subtract(a: int, b: int) -> int:\n    return a - b\n"


def add_failing_test() -> dict[str, Any]:
    """The implement session writes the test but not the function: CI goes red."""
    return {
        "tool_calls": [
            bash(
                write_file_command("test_subtract.py", TEST_SUBTRACT)
                + " && git add test_subtract.py && git commit -qm 'Test subtract()'",
                "test first",
            )
        ]
    }


def implement_subtract() -> list[dict[str, Any]]:
    return [
        {
            "tool_calls": [
                bash(
                    write_file_command("calc.py", CALC_WITH_SUBTRACT)
                    + " && python3 -m unittest -q && git add calc.py"
                    + " && git commit -qm 'Add subtract()'",
                    "implement",
                )
            ]
        },
        {"text": "subtract() is in; the tests pass."},
    ]


def subtract_world(tmp_path: Path, repair_turns: list[dict[str, Any]]) -> RunWorld:
    return start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": SUBTRACT_ISSUE,
                "turns": [add_failing_test(), {"text": "Done."}],
            },
            {"name": "repair", "marker": REPAIR_MARKER, "turns": repair_turns},
        ],
        files=GREEN_PROJECT,
        issue_title="Add subtract()",
        issue_body=SUBTRACT_ISSUE,
    )


def break_nothing_commit(message: str) -> dict[str, Any]:
    """A commit that changes something harmless and fixes nothing."""
    return {
        "tool_calls": [
            bash(
                f"echo '{message}' >> NOTES.md && git add NOTES.md && git commit -qm '{message}'",
                "note",
            )
        ]
    }


def test_red_ci_gets_a_repair_whose_prompt_names_the_check_and_its_log(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The implement session misses the bug; CI goes red; repair-1 is told which check failed,
    with its log tail, fixes it, and the Run ends green."""
    world = subtract_world(tmp_path, implement_subtract())
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    opening = world.model_requests("repair")[0]["body"]
    prompt = json.dumps(opening["messages"])
    assert f"Check '{CHECK}' failed" in prompt
    assert "cannot import name 'subtract'" in prompt  # from the job's log
    assert "starting Repair 1 of 5" in result.stderr
    pull = world.pulls()[0]
    assert [c["conclusion"] for c in world.check_runs(pull["head"]["sha"])] == ["success"]


def test_a_repair_that_changes_nothing_earns_one_rerun_then_a_declined_ci_fix(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The Repair commits nothing: the failed job is re-run once, stays red, and the Run fails
    as a Declined CI fix with the pull request back to draft."""
    world = subtract_world(tmp_path, [{"text": "Nothing here to fix."}])
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1
    assert "the Repair found nothing to fix on the branch" in result.stderr
    assert "re-running the failed checks" in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1].split("] ", 1)[1].startswith("session log: ")
    assert "found nothing to fix" in lines[-2]
    pull = world.pulls()[0]
    assert pull["draft"] is True
    assert result.stdout == pull["html_url"] + "\n"
    clone = world.clone()
    assert world.git("log", "-1", "--format=%s", "origin/issue-1", cwd=clone).startswith(
        "thirdshift: failed run (CI red on "
    )
    watched = world.git("rev-parse", "origin/issue-1^", cwd=clone)  # below the failure commit
    runs = world.rest("GET", f"/repos/{OWNER}/{NAME}/actions/runs?head_sha={watched}")
    assert [run["run_attempt"] for run in runs["workflow_runs"]] == [2]


def test_a_script_that_never_fixes_ci_ends_after_its_repair_budget_naming_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Every Repair moves the head but never fixes the test: the one past ``max_repairs`` is
    refused. The budget is 2 here (each Repair is a real session and a CI run), which also
    proves the setting reaches the loop; the loop at a budget of 5 is the Repair loop's unit
    tests', the default of 5 the settings reference's (tests/unit/test_docs.py)."""
    turns = []
    for i in range(1, 3):
        turns += [break_nothing_commit(f"Attempt {i}"), {"text": f"Attempt {i} done."}]
    world = subtract_world(tmp_path, turns)
    worlds.append(world)
    world.settings["THIRDSHIFT_MAX_REPAIRS"] = "2"

    result = world.thirdshift("run", world.issue_url, timeout=400)

    assert result.returncode == 1
    assert "starting Repair 2 of 2" in result.stderr
    assert "starting Repair 3" not in result.stderr
    assert "repairs exhausted" in result.stderr
    assert "after 2 Repairs" in result.stderr


def test_a_merge_run_merges_at_the_watched_head_and_closes_the_issue(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """--merge: merged with a merge commit whose second parent is the head CI watched; the
    Issue branch is deleted and the issue closed."""
    world = start_world(tmp_path, [implement(*fix_and_commit())])
    worlds.append(world)

    result = world.thirdshift("run", "--merge", world.issue_url)

    assert result.returncode == 0, result.stderr
    pull = world.pulls()[0]
    assert pull["merged_at"] is not None
    watched = pull["head"]["sha"]
    clone = world.clone()
    parents = world.git("log", "-1", "--format=%P", "origin/main", cwd=clone).split()
    assert parents[1] == watched
    assert world.issue()["state"] == "closed"
    assert "issue-1" not in world.git("branch", "-r", cwd=clone)


def test_github_refusing_the_merge_is_a_policy_refusal_and_the_pull_request_stays_ready(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The stand-in refuses every merge: exit 1, nothing left to fix, the pull request ready."""
    world = start_world(tmp_path, [implement(*fix_and_commit())])
    worlds.append(world)
    world.client.fail_next_merges(
        f"{OWNER}/{NAME}", count=50, status=405, message="Required reviews missing"
    )

    result = world.thirdshift("run", "--merge", world.issue_url)

    assert result.returncode == 1
    assert "the merge failed" in result.stderr
    assert "refused to merge" in result.stderr
    pull = world.pulls()[0]
    assert pull["state"] == "open"
    assert pull["draft"] is False
    subjects = world.git("log", "--format=%s", "origin/issue-1", cwd=world.clone())
    assert "thirdshift: failed run" not in subjects
    assert result.stdout == pull["html_url"] + "\n"
    with sqlite3.connect(world.home / "thirdshift.db") as db:
        (state,) = db.execute("SELECT state FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    assert state == "refused"


PLANTED = "ghp_" + "Pl4nted" * 6  # token-shaped, as if the agent printed a secret


def test_sigterm_mid_session_is_a_failed_run_that_saves_the_work_and_a_second_run_continues_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """SIGTERM during a Repair: the work is committed and pushed, the pull request goes back to
    draft, the issue gets one comment with the scrubbed log tail, the database records it, exit
    1. A second Run continues the branch and updates the same pull request."""
    stalls = [
        {
            "tool_calls": [
                bash(
                    f"echo {PLANTED} && echo 'half done' > WIP.md && "
                    "python3 -c 'import time; time.sleep(300)'",
                    "long check",
                )
            ]
        }
    ]
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": SUBTRACT_ISSUE,
                "turns": [add_failing_test(), {"text": "Done."}, *implement_subtract()],
            },
            {"name": "repair", "marker": REPAIR_MARKER, "turns": stalls},
        ],
        files=GREEN_PROJECT,
        issue_title="Add subtract()",
        issue_body=SUBTRACT_ISSUE,
    )
    worlds.append(world)

    process = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process("time.sleep(300)")
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "SIGTERM: stopping; the work will be saved" in stderr
    lines = [line.split("] ", 1)[1] for line in stderr.strip().splitlines()]
    assert lines[-2] == "interrupted"
    assert lines[-1].startswith("session log: ")
    assert lines[-1].endswith("-repair-1.jsonl")
    assert not running("time.sleep(300)", within=world.tmp)
    pull = world.pulls()[0]
    assert stdout == pull["html_url"] + "\n"
    assert pull["draft"] is True
    clone = world.clone()
    assert world.git("log", "-1", "--format=%s", "origin/issue-1", cwd=clone) == (
        "thirdshift: failed run (interrupted)"
    )
    assert world.git("show", "origin/issue-1:WIP.md", cwd=clone) == "half done"
    claim, *comments = world.comments()
    assert CLAIM_MARKER in claim["body"]
    assert len(comments) == 1
    assert "interrupted" in comments[0]["body"]
    assert "**What the agent did last** (Session `repair-1`)" in comments[0]["body"]
    assert "`thirdshift show 1`" in comments[0]["body"]
    assert PLANTED not in comments[0]["body"]
    assert "[REDACTED]" in comments[0]["body"]
    with sqlite3.connect(world.home / "thirdshift.db") as db:
        state, cause, log = db.execute(
            "SELECT state, cause, last_session_log FROM runs ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert (state, cause) == ("failed", "interrupted")
    assert log.endswith("-repair-1.jsonl")
    assert PLANTED not in (world.home / "logs" / Path(log).name).read_text()

    again = world.thirdshift("run", world.issue_url)

    assert again.returncode == 0, again.stderr
    assert "continuing issue-1" in again.stderr
    pulls = world.pulls()
    assert len(pulls) == 1
    assert pulls[0]["draft"] is False
    assert again.stdout == pulls[0]["html_url"] + "\n"
    subjects = world.git("log", "--format=%s", "origin/issue-1", cwd=world.clone())
    assert "thirdshift: failed run (interrupted)" in subjects
    assert "Add subtract()" in subjects
    # Neither marked comment was duplicated: the second Run edited the claim comment.
    claim, failure = world.comments()
    assert "Run 2 (thirdshift run)" in claim["body"]
    assert "continuing the work already on that branch" in claim["body"]
    assert "interrupted" in failure["body"]


def test_after_a_merged_pull_request_a_new_run_uses_the_next_branch(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """issue-1's pull request is merged; the reopened issue's next Run works on issue-1-branch-2."""
    follow_up = [
        break_nothing_commit("Follow-up note"),
        {"tool_calls": [bash(pull_request_file("Follow-up", "More.\n\nCloses #1"), "pr")]},
        {"text": "Done."},
    ]
    world = start_world(tmp_path, [implement(*fix_and_commit(), *follow_up)])
    worlds.append(world)
    first = world.thirdshift("run", "--merge", world.issue_url)
    assert first.returncode == 0, first.stderr
    world.rest("PATCH", f"/repos/{OWNER}/{NAME}/issues/1", {"state": "open"})

    second = world.thirdshift("run", world.issue_url)

    assert second.returncode == 0, second.stderr
    newest = max(world.pulls(), key=lambda pull: pull["number"])
    assert newest["head"]["ref"] == "issue-1-branch-2"
    assert newest["state"] == "open"


def test_a_conflict_with_the_base_branch_gets_a_conflict_repair(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """main changed the same line as the Issue branch: the merge conflicts, a conflict Repair
    resolves it and finishes the merge (a merge, never a rebase), and the Run ends green."""
    resolve = [
        {
            "tool_calls": [
                bash(
                    write_file_command("README.md", "# calculator, resolved\n")
                    + " && git add README.md && git commit -q --no-edit",
                    "resolve",
                )
            ]
        },
        {"text": "Resolved the conflict in README.md."},
    ]
    world = start_world(
        tmp_path,
        [
            implement({"text": "The branch already has the change."}),
            {"name": "conflict", "marker": CONFLICT_MARKER, "turns": resolve},
        ],
        files=GREEN_PROJECT,
        issue_body=f"{ISSUE_MARKER}. Rename the README heading.",
    )
    worlds.append(world)
    work = world.clone("work")
    world.git("checkout", "-q", "-b", "issue-1", cwd=work)
    (work / "README.md").write_text("# calculator, on the branch\n")
    world.git("commit", "-qam", "Rename the heading", cwd=work)
    world.git("push", "-q", "origin", "issue-1", cwd=work)
    world.git("checkout", "-q", "main", cwd=work)
    (work / "README.md").write_text("# calculator, on main\n")
    world.git("commit", "-qam", "Rename the heading differently", cwd=work)
    world.git("push", "-q", "origin", "main", cwd=work)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert "merging origin/main conflicted in README.md; starting Repair 1 of 5" in result.stderr
    clone = world.clone()
    assert world.git("show", "origin/issue-1:README.md", cwd=clone) == "# calculator, resolved"
    parents = world.git("log", "-1", "--format=%P", "origin/issue-1", cwd=clone).split()
    assert len(parents) == 2
    assert (
        world.git("merge-base", "--is-ancestor", "origin/main", "origin/issue-1", cwd=clone) == ""
    )


def test_a_run_with_the_codex_harness_reaches_a_ready_pull_request(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """--harness codex: the same Run with the real Codex CLI, pointed at the scripted model
    server through its harness_options (harness_args belong to the configured Harness, claude,
    and stay behind)."""
    fix = (
        write_file_command("calc.py", CALC_FIXED)
        + " && git commit -qam 'Make add() add' && "
        + pull_request_file("Make add() add", "Fixed.\n\nCloses #1")
    )
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": ISSUE_MARKER,
                "turns": [
                    {"tool_calls": [{"name": "exec_command", "input": {"cmd": fix}}]},
                    {"text": "Fixed add()."},
                ],
            }
        ],
    )
    worlds.append(world)
    codex_home = world.agent_home / ".codex"
    codex_home.mkdir()
    world.settings.update(codex_env(codex_home))
    world.settings["THIRDSHIFT_HARNESS_OPTIONS"] = json.dumps(
        {"codex": codex_config_args(world.model.url)}
    )
    world.settings["THIRDSHIFT_HARNESS_ARGS"] = '["--max-turns", "40"]'  # claude's: left behind

    result = world.thirdshift("run", "--harness", "codex", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert "implement: commit" in result.stderr
    pull = world.pulls()[0]
    assert pull["title"] == "Make add() add"
    assert result.stdout == pull["html_url"] + "\n"
