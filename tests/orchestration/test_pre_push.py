"""The pre-push check's workflow rule in a Run: an agent's workflow change is not pushed (a
Failed run naming the file, the Worktree kept) unless the repository allows it."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.support.scripted_sessions import git

WORKFLOW = ".github/workflows/exfiltrate.yml"


def _adds_a_workflow(worktree: Path, prompt: str) -> str:
    (worktree / ".github" / "workflows").mkdir(parents=True)
    (worktree / WORKFLOW).write_text("on: pull_request\njobs: {}\n")
    (worktree / "widget.txt").write_text("widget\n")
    git(worktree, "add", ".")
    git(worktree, "commit", "-q", "-m", "Add the widget and a workflow")
    (worktree / ".thirdshift-pull-request.md").write_text(PR_TEXT)
    return "done"


def test_a_workflow_the_agent_adds_is_not_pushed_and_the_run_fails_naming_it(
    world: RunWorld,
) -> None:
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = _adds_a_workflow

    assert world.run(number) == 1

    assert world.github.branch_head("issue-1") is None
    assert world.github.pull_requests() == []
    [run] = world.store.list_runs()
    assert run.state == "failed"
    assert f"its commits change workflow files ({WORKFLOW})" in (run.cause or "")
    kept = world.settings.home / "worktrees" / "acme-widgets-issue-1"
    assert any(line.startswith(f"keeping the worktree {kept}") for line in world.lines)
    assert (kept / WORKFLOW).is_file()
    [comment] = world.failure_comments(number)
    assert WORKFLOW in comment
    assert "allow_workflow_changes" in comment


def test_a_repository_allowing_workflow_changes_gets_the_agents_workflow_pushed(
    world: RunWorld,
) -> None:
    world.settings = world.settings.model_copy(
        update={"allow_workflow_changes_by_repository": {"Acme/Widgets": True}}
    )
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = _adds_a_workflow

    assert world.run(number) == 0

    assert world.origin_file("issue-1", WORKFLOW).startswith("on: pull_request")
