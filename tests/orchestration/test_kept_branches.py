"""Kept work: a Worktree a Failed run kept, or the local Issue branch of a Worktree's own
repository, is adopted only at a head thirdshift recorded for its issue's branch (adr/0027).
Each Worktree's branch is its own repository's (adr/0042): another Run's agent moving
"refs/heads/issue-1" moves a ref of its own repository, never issue 1's."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.support.scripted_sessions import Play, commit_file, git
from thirdshift.git import own_git_dir
from thirdshift.runs.rules.branches import UNADOPTED
from thirdshift.sessions import SessionFailed

KEPT = "acme-widgets-issue-1"


def clone_dir(world: RunWorld) -> Path:
    return world.settings.home / "repos" / "acme" / "widgets"


def kept_dir(world: RunWorld) -> Path:
    return world.settings.home / "worktrees" / KEPT


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


def move_branch_named_issue_1(world: RunWorld) -> Play:
    """What the agent of issue 2's Run does from its own Worktree, with nothing but git: it
    points "refs/heads/issue-1" at its own commit; then it does its own work."""

    def play(worktree: Path, prompt: str) -> str | None:
        said = commit_file("two.txt", "two\n", "Add two", pull_request=PR_TEXT)(worktree, prompt)
        git(worktree, "update-ref", "refs/heads/issue-1", "HEAD")
        return said

    return play


def move_issue_1_unrecorded(world: RunWorld) -> str:
    """A commit on issue-1 in its own repository that thirdshift never recorded (a person's,
    or a session's that died before its end was recorded), and the branch moved to it."""
    own = own_git_dir(kept_dir(world))
    tree = git(own, "rev-parse", "refs/heads/issue-1^{tree}")
    planted = git(own, "commit-tree", tree, "-p", "refs/heads/issue-1", "-m", "Never recorded")
    git(own, "update-ref", "refs/heads/issue-1", planted)
    return planted


def unadopted(world: RunWorld) -> dict[str, str]:
    own = own_git_dir(kept_dir(world))
    listing = git(own, "for-each-ref", "--format=%(refname) %(objectname)", UNADOPTED)
    return dict(line.split(" ", 1) for line in listing.splitlines())


def test_another_runs_agent_moving_issue_1_moves_only_its_own_ref_and_the_kept_work_is_adopted(
    world: RunWorld,
) -> None:
    """Issue 1's Failed run keeps its Worktree; issue 2's agent points refs/heads/issue-1 at
    its own commit. That ref is issue 2's repository's: the next Run on issue 1 adopts its kept
    work as it was, and nothing of issue 2 reaches issue-1."""
    first = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = fail_with_origin_read_only(world)
    assert world.run(first) == 1
    assert kept_dir(world).is_dir()
    origin_writable_again(world)
    second = world.github.add_issue("Add two", "", [READY])
    world.sessions.plays["implement"] = move_branch_named_issue_1(world)
    assert world.run(second) == 0
    two = world.settings.home / "worktrees" / "acme-widgets-issue-2"
    assert git(own_git_dir(two), "log", "-1", "--format=%s", "refs/heads/issue-1") == "Add two"

    world.lines.clear()
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(first) == 0

    assert "Add two" not in world.origin_log("issue-1")
    assert world.origin_file("issue-1", "draft.txt") == "unfinished"
    assert any("pushing it to issue-1" in line for line in world.lines)
    assert unadopted(world) == {}
    assert git(clone_dir(world), "for-each-ref", "refs/heads") == ""


def test_a_kept_worktree_at_a_head_thirdshift_never_recorded_is_set_aside_not_pushed(
    world: RunWorld,
) -> None:
    """Issue 1's Failed run keeps its Worktree, whose branch then moves to a commit thirdshift
    never recorded. The next Run on issue 1 pushes nothing of it: it says why, keeps the head
    aside in the Worktree's repository under a ref that says so, and starts from origin."""
    first = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = fail_with_origin_read_only(world)
    assert world.run(first) == 1
    kept = kept_dir(world)
    origin_writable_again(world)
    planted = move_issue_1_unrecorded(world)

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
    head = git(kept_dir(world), "rev-parse", "HEAD")
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


def test_a_local_issue_branch_moved_past_origin_unrecorded_is_set_aside(world: RunWorld) -> None:
    """No Worktree is kept, but issue-1 in the Worktree's repository was moved past what origin
    holds: the Continuation says so and keeps it aside, and origin's branch is what it builds
    on."""
    first = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(first) == 0
    assert not kept_dir(world).exists()
    planted = move_issue_1_unrecorded(world)

    world.lines.clear()
    world.sessions.plays["implement"] = commit_file("more.txt", "more\n", "Add more")
    world.run(first)

    assert "Never recorded" not in world.origin_log("issue-1")
    assert unadopted(world) == {f"{UNADOPTED}/issue-1-{planted[:12]}": planted}
    own = own_git_dir(kept_dir(world))
    assert any(
        line.startswith(f"not adopting issue-1 in the repository {own}: its head ")
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
