"""Each Worktree writes only refs of its own (adr/0042), against real git and, for the seal,
real bubblewrap: a Worktree's branch lives in its own repository beside it, which borrows the
managed clone's objects; the clone is read-only to the agent; thirdshift pushes exactly the
head it recorded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.clones import plain_git, write_file
from tests.support.stand_in_scenario import Sandbox
from thirdshift.errors import GitError
from thirdshift.git import ManagedClone, own_git_dir
from thirdshift.harnesses import SealedPaths
from thirdshift.harnesses.agent_sandbox import bwrap_options


def _commit_as_the_agent(where: Path, name: str) -> str:
    """A commit made with plain git in the Worktree, as the agent's session makes one."""
    (where / f"{name}.txt").write_text(f"{name}\n")
    plain_git(where, "add", f"{name}.txt")
    plain_git(
        where,
        "-c",
        "user.name=agent",
        "-c",
        "user.email=agent@example.invalid",
        "commit",
        "-q",
        "-m",
        f"Add {name}",
    )
    return plain_git(where, "rev-parse", "HEAD")


def test_a_worktrees_branch_lives_in_its_own_repository_never_in_the_clone(
    clone: ManagedClone, worktrees: Path
) -> None:
    """The Issue branch and its commits are the Worktree's repository's; the clone gets no
    local branch, and the repository borrows the clone's objects instead of copying them."""
    worktree = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    made = _commit_as_the_agent(worktree.path, "one")

    own = own_git_dir(worktree.path)
    assert own == worktrees / "issue-1.git"
    assert plain_git(own, "rev-parse", "refs/heads/issue-1") == made
    assert plain_git(clone.path, "for-each-ref", "refs/heads") == ""
    alternates = (own / "objects" / "info" / "alternates").read_text().split()
    assert alternates == [str(clone.path / "objects")]
    assert not list((own / "objects" / "pack").glob("*.pack"))


def test_a_branch_moved_from_another_worktree_never_moves_this_worktrees_head(
    sandbox: Sandbox, clone: ManagedClone, worktrees: Path
) -> None:
    """The agent of issue 1 points refs/heads/issue-2 at its own commit from its Worktree:
    that ref is its own repository's, so issue 2's Worktree, and what it pushes, stay issue
    2's work."""
    one = clone.add_worktree(worktrees / "issue-1", "issue-1", "origin/main")
    two = clone.add_worktree(worktrees / "issue-2", "issue-2", "origin/main")
    theirs = _commit_as_the_agent(one.path, "planted")
    ours = _commit_as_the_agent(two.path, "ours")

    plain_git(one.path, "update-ref", "refs/heads/issue-2", theirs)
    two.record_head()
    two.push("issue-2")

    assert two.head() == ours
    assert clone.remote_branches()["issue-2"] == ours


def test_push_sends_the_recorded_head_by_its_sha_and_refuses_a_head_moved_since(
    clone: ManagedClone, worktrees: Path
) -> None:
    """A head nobody recorded (the branch moved after the session's end) is not pushed: the
    error names both heads and origin keeps what it had; once recorded, that exact sha is
    pushed."""
    worktree = clone.add_worktree(worktrees / "issue-3", "issue-3", "origin/main")
    write_file(worktree, "a.txt", "a\n")
    worktree.commit_all("Add a")
    recorded = worktree.head()
    moved = _commit_as_the_agent(worktree.path, "behind-the-back")

    with pytest.raises(GitError) as caught:
        worktree.push("issue-3")

    message = str(caught.value)
    assert (
        f"is at {moved[:12]}, not at the head thirdshift recorded for it ({recorded[:12]})"
    ) in message
    assert not clone.has_remote_branch("issue-3")
    worktree.record_head()
    worktree.push("issue-3")
    assert clone.remote_branches()["issue-3"] == moved


def test_an_alternate_the_agent_rewrites_is_written_back_before_thirdshifts_git(
    clone: ManagedClone, worktrees: Path, tmp_path: Path
) -> None:
    """The Worktree's repository reads objects only from itself and the managed clone: an
    alternate the agent points elsewhere is replaced before thirdshift's next command."""
    worktree = clone.add_worktree(worktrees / "issue-4", "issue-4", "origin/main")
    alternates = own_git_dir(worktree.path) / "objects" / "info" / "alternates"
    elsewhere = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(elsewhere)], check=True, timeout=60)
    alternates.write_text(f"{elsewhere / 'objects'}\n")

    assert not worktree.is_dirty()

    assert alternates.read_text().split() == [str(clone.path / "objects")]


def test_adopting_a_kept_worktree_stands_behind_only_the_head_checked(
    clone: ManagedClone, worktrees: Path
) -> None:
    """A kept Worktree is pushed only at the head its caller checked; one that moved since is
    refused."""
    made = clone.add_worktree(worktrees / "issue-5", "issue-5", "origin/main")
    checked = _commit_as_the_agent(made.path, "kept")
    kept = clone.kept_worktree(made.path, "issue-5")
    assert kept.recorded is None
    moved = _commit_as_the_agent(made.path, "moved")

    with pytest.raises(GitError, match=f"moved from {checked[:12]} to {moved[:12]}"):
        kept.adopt(checked)
    kept.adopt(moved)
    kept.push("issue-5")
    assert clone.remote_branches()["issue-5"] == moved


def test_the_sealed_agent_commits_in_its_worktree_but_cannot_write_the_clone(
    clone: ManagedClone, worktrees: Path, tmp_path: Path
) -> None:
    """Inside bubblewrap with a Run's seal, the agent's git commits in its Worktree (its
    repository writable, the clone's objects readable), and every way to write the clone (a
    ref through git, a ref file, an object) fails; the other Worktree's repository is not
    even there."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is required (apt-get install bubblewrap)"
    home = clone.path.parents[2]
    mine = clone.add_worktree(worktrees / "issue-6", "issue-6", "origin/main")
    other = clone.add_worktree(worktrees / "issue-7", "issue-7", "origin/main")
    agent_home = tmp_path / "agent-home"
    agent_home.mkdir()
    paths = SealedPaths(
        worktree=mine.path,
        clone=clone.path,
        git_dir=own_git_dir(mine.path),
        agent_home=agent_home,
        hidden=(home, worktrees),
    )
    main = plain_git(clone.path, "rev-parse", "refs/remotes/origin/main")
    script = (
        "set -u\n"
        "git -c user.name=a -c user.email=a@example.invalid commit -q --allow-empty -m Mine"
        " && echo committed\n"
        f"git --git-dir={clone.path} update-ref refs/heads/issue-7 HEAD 2>/dev/null"
        " && echo ref-written\n"
        f"echo {main} > {clone.path}/refs/heads/issue-7 2>/dev/null && echo file-written\n"
        f"touch {clone.path}/objects/planted 2>/dev/null && echo object-written\n"
        f"test -e {own_git_dir(other.path)} && echo other-seen\n"
        "true\n"
    )
    argv = [bwrap, *bwrap_options(paths), "--", "/bin/sh", "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)

    assert done.stdout.split() == ["committed"], done.stdout + done.stderr
    assert plain_git(clone.path, "for-each-ref", "refs/heads") == ""
    assert not (clone.path / "objects" / "planted").exists()
    assert other.head() == main
    mine.record_head()
    assert plain_git(mine.path, "log", "-1", "--format=%s") == "Mine"
