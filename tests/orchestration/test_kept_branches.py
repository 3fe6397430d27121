"""Kept work in the shared managed clone: a Worktree a Failed run kept, or a local Issue branch,
is adopted only at a head thirdshift recorded for its issue's branch (adr/0027). The agents of
other Runs can write the clone's refs; what they moved is kept aside, never pushed."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.support.scripted_sessions import Play, commit_file, git
from thirdshift.runs.branches import UNADOPTED
from thirdshift.sessions import SessionFailed

KEPT = "acme-widgets-issue-1"


def clone_dir(world: RunWorld) -> Path:
    return world.settings.home / "repos" / "acme" / "widgets"


def fail_with_origin_read_only(world: RunWorld) -> Play:
    """A session that leaves work and breaks origin: the salvage cannot push, so the Failed
    run keeps its Worktree."""
    hook = world.origin / "hooks" / "pre-receive"

    def play(worktree: Path, prompt: str) -> str:
        (worktree / "draft.txt").write_text("unfinished\n")
        hook.write_text("#!/bin/sh\necho 'origin is read-only today' >&2\nexit 1\n")
        hook.chmod(0o755)
        raise SessionFailed("the model gave up")

    return play


def origin_writable_again(world: RunWorld) -> None:
    (world.origin / "hooks" / "pre-receive").unlink()


def move_branch_of_issue_1(world: RunWorld) -> Play:
    """What the agent of issue 2's Run can do from its own Worktree: the clone's refs are
    shared, so it commits on top of issue-1 without touching issue-1's Worktree and moves that
    branch; then it does its own work."""

    def play(worktree: Path, prompt: str) -> str | None:
        tree = git(worktree, "rev-parse", "refs/heads/issue-1^{tree}")
        evil = git(
            worktree, "commit-tree", tree, "-p", "refs/heads/issue-1", "-m", "Planted by issue 2"
        )
        git(worktree, "update-ref", "refs/heads/issue-1", evil)
        return commit_file("two.txt", "two\n", "Add two", pull_request=PR_TEXT)(worktree, prompt)

    return play


def unadopted(world: RunWorld) -> dict[str, str]:
    listing = git(clone_dir(world), "for-each-ref", "--format=%(refname) %(objectname)", UNADOPTED)
    return dict(line.split(" ", 1) for line in listing.splitlines())


def test_a_kept_worktree_whose_branch_another_runs_agent_moved_is_set_aside_not_pushed(
    world: RunWorld,
) -> None:
    """Issue 1's Failed run keeps its Worktree; issue 2's agent moves issue-1 in the shared
    clone. The next Run on issue 1 pushes nothing of it: it says why, keeps the head aside
    under a ref that says so, and starts from origin."""
    first = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = fail_with_origin_read_only(world)
    assert world.run(first) == 1
    kept = world.settings.home / "worktrees" / KEPT
    assert kept.is_dir()
    origin_writable_again(world)

    second = world.github.add_issue("Add two", "", [READY])
    world.sessions.plays["implement"] = move_branch_of_issue_1(world)
    assert world.run(second) == 0
    planted = git(clone_dir(world), "rev-parse", "refs/heads/issue-1")
    assert git(clone_dir(world), "log", "-1", "--format=%s", planted) == "Planted by issue 2"

    world.lines.clear()
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(first) == 0

    assert world.origin_log("issue-1") == ["Add the widget", "Initial commit"]
    aside = f"{UNADOPTED}/issue-1-{planted[:12]}"
    assert unadopted(world) == {aside: planted}
    [said] = [line for line in world.lines if line.startswith("not adopting issue-1")]
    assert f"the worktree {kept}" in said
    assert f"its head {planted[:7]} is not one thirdshift recorded for #{first}" in said
    assert f"kept it aside as {aside}, and starting from origin" in said
    assert not any("pushing it to issue-1" in line for line in world.lines)


def test_a_kept_worktree_at_the_head_its_failed_run_recorded_is_adopted(
    world: RunWorld,
) -> None:
    """The same kept Worktree, left alone: its head is the one the Failed run recorded, so the
    next Run pushes it first and builds on it."""
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = fail_with_origin_read_only(world)
    assert world.run(number) == 1
    head = git(world.settings.home / "worktrees" / KEPT, "rev-parse", "HEAD")
    run = world.store.latest_run(world.store.ensure_repository("acme", "widgets"), number)
    assert run is not None
    assert head in world.store.recorded_heads(run.repository, number, "issue-1")
    origin_writable_again(world)

    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(number) == 0

    assert "thirdshift: failed run (the model gave up)" in world.origin_log("issue-1")
    assert world.origin_file("issue-1", "draft.txt") == "unfinished"
    assert unadopted(world) == {}


def test_a_local_issue_branch_moved_by_another_runs_agent_is_set_aside(world: RunWorld) -> None:
    """No Worktree is kept, but the clone's local issue-1 was moved past what origin holds:
    the Continuation says so and keeps it aside, and origin's branch is what it builds on."""
    first = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(first) == 0
    second = world.github.add_issue("Add two", "", [READY])
    world.sessions.plays["implement"] = move_branch_of_issue_1(world)
    assert world.run(second) == 0
    planted = git(clone_dir(world), "rev-parse", "refs/heads/issue-1")

    world.lines.clear()
    world.sessions.plays["implement"] = commit_file("more.txt", "more\n", "Add more")
    world.run(first)

    assert "Planted by issue 2" not in world.origin_log("issue-1")
    assert unadopted(world) == {f"{UNADOPTED}/issue-1-{planted[:12]}": planted}
    assert any(
        line.startswith("not adopting issue-1 in the managed clone: its head ")
        for line in world.lines
    )


def test_the_head_a_session_ended_at_is_recorded_before_anything_else_happens(
    world: RunWorld,
) -> None:
    """The session commits, then the Run loses its Lease before thirdshift commits or pushes
    anything: the head the session ended at is still recorded, so its kept Worktree can be
    adopted once the issue is free again."""
    number = world.github.add_issue("Add a widget", "", [READY])
    commit = commit_file("widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT)

    def commit_then_lose_the_lease(worktree: Path, prompt: str) -> str | None:
        said = commit(worktree, prompt)
        world.take_lease_over(number)
        return said

    world.sessions.plays["implement"] = commit_then_lose_the_lease

    assert world.run(number) == 1

    head = git(world.settings.home / "worktrees" / KEPT, "rev-parse", "HEAD")
    assert git(world.settings.home / "worktrees" / KEPT, "log", "-1", "--format=%s") == (
        "Add the widget"
    )
    repository = world.store.ensure_repository("acme", "widgets")
    assert world.store.recorded_heads(repository, number, "issue-1") == {head}
