"""A disk error in a Run is the disk's problem, not a bug in thirdshift (adr/0041): the real
``Delivery`` and salvage, and the real daemon, against the GitHub fake, real git and a real
SQLite store, with a scripted session that meets a full disk."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import cast

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.orchestration.test_daemon import DaemonWorld, _ListedPoll
from tests.support.scripted_sessions import commit_file, git
from thirdshift.daemon import RepositoryPoll
from thirdshift.git import own_git_dir
from thirdshift.run_states import RunEnd
from thirdshift.runs import RunOutcome, RunRequest


def _fills_the_disk(worktree: Path, _prompt: str) -> str:
    """Commits one file, then meets a full disk writing the next (as an agent's tool, or
    thirdshift's own file, would)."""
    (worktree / "half.txt").write_text("half\n")
    git(worktree, "add", "half.txt")
    git(worktree, "commit", "-q", "-m", "Half of it")
    raise OSError(errno.ENOSPC, "No space left on device", str(worktree / "big.bin"))


def test_a_run_that_meets_a_full_disk_is_a_failed_run_naming_the_disk_not_a_bug(
    world: RunWorld,
) -> None:
    """An ENOSPC nobody caught on purpose ends the Run as a Failed run whose cause names the
    disk and the fix; the comment never calls it a bug; the commits are pushed, the Worktree
    is removed to free the disk, and the Lease is given up."""
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = _fills_the_disk

    assert world.run(number) == 1

    worktree = world.settings.home / "worktrees" / "acme-widgets-issue-1"
    [run] = world.store.list_runs()
    assert run.state == "failed"
    assert run.cause == (
        f"the disk of {worktree} is full: a file operation of the Run failed (No space left "
        f"on device); free space in {worktree} and run again"
    )
    [comment] = world.failure_comments(number)
    assert "is full" in comment
    assert "bug in thirdshift" not in comment
    assert "bug in thirdshift" not in "\n".join(world.lines)
    assert "Half of it" in world.origin_log("issue-1")
    assert not worktree.exists()
    assert world.store.lease_of(run.repository, number) is None
    assert [s.state for s in world.store.run_sessions(run.id)] == ["failed"]


def test_a_full_disk_failed_run_removes_the_agent_home_the_agent_may_have_filled(
    world: RunWorld,
) -> None:
    """An agent that filled its home rather than its Worktree would keep the disk full for
    every later Run: on a full disk the Run's agent home goes with the Worktree."""
    number = world.github.add_issue("Add a widget", "", [READY])
    agent_home = world.settings.home / "agent-homes" / "acme-widgets-run-1"

    def fills_its_home(worktree: Path, prompt: str) -> str:
        agent_home.mkdir(parents=True, exist_ok=True)
        (agent_home / "filler.bin").write_bytes(b"x" * 1024)
        return _fills_the_disk(worktree, prompt)

    world.sessions.plays["implement"] = fills_its_home

    assert world.run(number) == 1

    assert not agent_home.exists()
    assert f"removed the agent home {agent_home} to free the full disk" in world.lines


def test_a_full_disk_failed_run_removes_the_worktrees_repository_and_a_continuation_makes_it_again(
    world: RunWorld,
) -> None:
    """The agent writes the Worktree's own repository too (its commits, or junk in
    ``git rev-parse --git-common-dir``): on a full disk it goes with the Worktree, once the
    commits are pushed, and the next Run on the branch (a Continuation) makes it again from
    the managed clone and builds on what was pushed."""
    number = world.github.add_issue("Add a widget", "", [READY])
    worktree = world.settings.home / "worktrees" / "acme-widgets-issue-1"
    own = own_git_dir(worktree)

    def fills_its_repository(place: Path, prompt: str) -> str:
        common = Path(git(place, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        assert common == own
        (common / "filler.bin").write_bytes(b"x" * 1024)
        return _fills_the_disk(place, prompt)

    world.sessions.plays["implement"] = fills_its_repository

    assert world.run(number) == 1

    assert not worktree.exists()
    assert not own.exists()
    assert f"removed its repository {own} to free the full disk" in world.lines
    assert "Half of it" in world.origin_log("issue-1")

    world.lines.clear()
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(number) == 0

    assert (own / "HEAD").is_file()
    assert world.origin_log("issue-1")[0] == "Add the widget"
    assert "Half of it" in world.origin_log("issue-1")
    assert world.origin_file("issue-1", "half.txt") == "half"


def test_a_full_disk_failed_run_keeps_the_worktree_and_its_repository_when_the_push_fails(
    world: RunWorld,
) -> None:
    """Commits that did not reach origin exist only in the Worktree's repository: on a full
    disk, a push that fails keeps both, whatever the disk."""
    number = world.github.add_issue("Add a widget", "", [READY])
    worktree = world.settings.home / "worktrees" / "acme-widgets-issue-1"
    hook = world.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'origin is read-only today' >&2\nexit 1\n")
    hook.chmod(0o755)
    world.sessions.plays["implement"] = _fills_the_disk

    assert world.run(number) == 1

    assert worktree.is_dir()
    assert (own_git_dir(worktree) / "HEAD").is_file()
    assert not any("removed its repository" in line for line in world.lines)


def test_a_daemon_run_stopped_by_a_disk_error_names_the_disk_and_the_next_run_goes_on(
    world: RunWorld,
) -> None:
    """A Run that escapes with a disk error is the disk's problem in the Activity log, not a
    bug in thirdshift, and the daemon goes on to run the next issue."""
    started: list[int] = []

    def start_run(request: RunRequest, *_: object) -> RunOutcome:
        started.append(request.issue.number)
        if request.issue.number == 1:
            raise OSError(errno.ENOSPC, "No space left on device", "/srv/home/logs/x.jsonl")
        return RunOutcome(RunEnd.READY, 0)

    dw = DaemonWorld(world, max_runs=1, start_run=start_run)
    dw.daemon.watch(cast(RepositoryPoll, _ListedPoll(world.store, "acme", "widgets", [1, 2])))

    dw.daemon.once()

    assert sorted(started) == [1, 2]
    ends = dw.lines("end")
    assert len(ends) == 2
    [disk] = [line for line in ends if "is full" in line]
    assert "the disk of /srv/home/logs is full" in disk
    assert "free space in /srv/home/logs and run again" in disk
    assert not any("bug in thirdshift" in line for line in ends + world.lines)
