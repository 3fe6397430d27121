"""Freeing a full disk against what an agent leaves in its Worktree and its repository (adr/0041,
adr/0042): real git, a real managed clone and Worktree, and ``make_room`` or ``remove_worktree``
run in a child process, so a read that never ends is a bounded failure (an address-space limit
and a timeout), not a hung or starved test run. Permissions do not stop root, so where they
matter the child runs as an unprivileged user (uid 65534 when the tests run as root) on a tree
that user owns."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fake_github import bare_origin
from tests.support.scripted_sessions import git
from thirdshift.git import CommitIdentity, ManagedClone, Worktree, own_git_dir
from thirdshift.scrub import Scrubber

NOBODY = 65534
MEMORY = 1 << 30  # the child's address space: a read of /dev/zero ends in MemoryError
REPORTED = "refs/thirdshift/unadopted"

# The child rebuilds the clone from its arguments and does one thing to the Worktree; with
# ``plant``, it plants the attack after the real remover ran (git's own sweep of links in the
# repository then cannot have removed it: what is read afterwards must hold by itself).
CHILD = """
import json, os, sys
from pathlib import Path
from thirdshift.git import CommitIdentity, ManagedClone, own_git_dir
from thirdshift.runs import full_disk
from thirdshift.scrub import Scrubber

home, origin, path, action, plant = json.loads(sys.argv[1])
clone = ManagedClone(
    Path(home), "acme", "widgets", origin, None, CommitIdentity("f", "f@thirdshift.invalid"),
    scrub=Scrubber([]), environ=os.environ, timeout=60,
)
worktree = clone.kept_worktree(Path(path), "issue-1")
own = own_git_dir(worktree.path)


def remove(place):
    clone.remove_worktree(place)
    if plant == "zero":
        (own / "packed-refs").unlink(missing_ok=True)
        os.symlink("/dev/zero", own / "packed-refs")
    elif plant == "fifo":
        (own / "packed-refs").unlink(missing_ok=True)
        os.mkfifo(own / "packed-refs")
    elif plant.startswith("link:"):
        (own / "refs").rename(own / "refs.moved")
        os.symlink(plant.removeprefix("link:"), own / "refs")


lines = []
if action == "make_room":
    done = full_disk.make_room(worktree, remove, lines.append)
else:
    clone.remove_worktree(worktree.path)
    done = True
print(json.dumps({"done": done, "lines": lines}))
"""


@dataclass(frozen=True)
class World:
    base: Path
    origin: Path
    clone: ManagedClone
    worktree: Worktree

    @property
    def own(self) -> Path:
        return own_git_dir(self.worktree.path)

    def child(self, action: str, plant: str = "", *, as_nobody: bool = False) -> dict[str, object]:
        """What the child reports after ``action``; the test fails if it did not finish."""
        argv = [*(_unprivileged() if as_nobody else []), sys.executable, "-c", CHILD]
        spec = [str(self.base / "home"), str(self.origin), str(self.worktree.path), action, plant]
        done = subprocess.run(
            [*argv, json.dumps(spec)],
            cwd=self.base,
            env={**_environ(), "HOME": str(self.base), "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limit_memory,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        reported: dict[str, object] = json.loads(done.stdout)
        return reported

    def hand_over(self) -> None:
        """Give the whole tree to the unprivileged user the child runs as (when the tests run
        as root; else it is the tests' user's already)."""
        if os.geteuid() == 0:
            for folder, dirs, files in os.walk(self.base):
                for name in [folder, *(os.path.join(folder, f) for f in dirs + files)]:
                    os.chown(name, NOBODY, NOBODY, follow_symlinks=False)

    def registered(self) -> str:
        """The Worktrees the repository lists (asked as any owner: the child may own it)."""
        listed = subprocess.run(
            ["git", "-c", "safe.directory=*", "worktree", "list", "--porcelain"],
            cwd=self.own,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return listed.stdout


def _unprivileged() -> list[str]:
    """The prefix that runs a command as uid 65534 when the tests run as root."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _environ() -> dict[str, str]:
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


@pytest.fixture
def world() -> Iterator[World]:
    # Not under pytest's own tmp_path: that is private to the user running the tests, and the
    # unprivileged child must reach the tree.
    base = Path(tempfile.mkdtemp(prefix="thirdshift-full-disk-"))
    base.chmod(0o755)
    try:
        origin = bare_origin(base)
        clone = ManagedClone(
            base / "home",
            "acme",
            "widgets",
            str(origin),
            None,
            CommitIdentity("f", "f@thirdshift.invalid"),
            scrub=Scrubber([]),
            environ=_environ(),
            timeout=60,
        )
        clone.sync()
        worktree = clone.add_worktree(base / "worktrees" / "issue-1", "issue-1", "origin/main")
        yield World(base, origin, clone, worktree)
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(base)], check=False, capture_output=True)
        shutil.rmtree(base)


def _unreadable_directory(world: World) -> Path:
    """A directory the agent made in its Worktree, holding a file, then took every permission
    from."""
    junk = world.worktree.path / "junk"
    (junk / "deeper").mkdir(parents=True)
    (junk / "deeper" / "file.txt").write_text("x\n")
    (junk / "file.txt").write_text("x\n")
    (junk / "deeper").chmod(0)
    junk.chmod(0)
    return junk


def _proves_permissions_stop_the_child(junk: Path) -> None:
    """The child really is held by permissions: as it, the unreadable directory cannot even be
    listed (as root the test would prove nothing)."""
    listed = subprocess.run(
        [*_unprivileged(), "ls", str(junk)], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode != 0
    assert "Permission denied" in listed.stderr


def test_a_full_disk_removes_a_worktree_holding_a_directory_the_agent_made_unreadable(
    world: World,
) -> None:
    """A directory with no permissions (chmod 000) in the Worktree does not keep the disk full:
    thirdshift gives its owner the permissions back and the Worktree and its repository go."""
    junk = _unreadable_directory(world)
    world.clone.keep_aside(world.worktree.path, f"{REPORTED}/1", world.worktree.head())
    world.hand_over()
    _proves_permissions_stop_the_child(junk)

    reported = world.child("make_room", as_nobody=True)

    assert reported["done"] is True
    assert not junk.exists()
    assert not world.worktree.path.exists()
    assert not world.own.exists()
    assert reported["lines"] == [
        f"removed the worktree {world.worktree.path} to free the full disk",
        f"removed its repository {world.own} to free the full disk; what an earlier Run set "
        f"aside there ({REPORTED}/1) went with it",
    ]


def test_removing_a_worktree_removes_a_directory_the_agent_made_unreadable_and_its_registration(
    world: World,
) -> None:
    """The end of every Run removes its Worktree the same way: a directory the agent took the
    permissions from goes with it, and the Worktree's repository no longer lists it."""
    junk = _unreadable_directory(world)
    world.hand_over()
    _proves_permissions_stop_the_child(junk)

    world.child("remove", as_nobody=True)

    assert not world.worktree.path.exists()
    assert f"worktree {world.worktree.path}\n" not in world.registered()
    assert (world.own / "HEAD").is_file()


@pytest.mark.parametrize("planted", ["zero", "fifo"])
def test_packed_refs_that_are_no_file_are_not_read_when_the_repository_goes(
    world: World, planted: str
) -> None:
    """``packed-refs`` linked to /dev/zero, or a FIFO, in the Worktree's repository: freeing
    the disk neither hangs nor reads without end, and the repository still goes."""
    reported = world.child("make_room", plant=planted)

    assert reported["done"] is True
    assert not world.own.exists()
    assert reported["lines"] == [
        f"removed the worktree {world.worktree.path} to free the full disk",
        f"removed its repository {world.own} to free the full disk",
    ]


def test_a_refs_directory_linked_to_the_host_is_not_walked(world: World) -> None:
    """``refs`` of the Worktree's repository replaced by a link to a directory of the host: its
    files are not listed (their names never reach the progress line) nor removed, while the
    repository's own packed refs still are named."""
    host = world.base / "host"
    (host / "thirdshift" / "private").mkdir(parents=True)
    (host / "thirdshift" / "private" / "host-secret-name").write_text("x\n")
    world.clone.keep_aside(world.worktree.path, f"{REPORTED}/1", world.worktree.head())
    git(world.own, "pack-refs", "--all")

    reported = world.child("make_room", plant=f"link:{host}")

    assert reported["done"] is True
    assert not world.own.exists()
    assert (host / "thirdshift" / "private" / "host-secret-name").is_file()
    lines = reported["lines"]
    assert isinstance(lines, list)
    assert "host-secret-name" not in "".join(lines)
    assert lines[-1] == (
        f"removed its repository {world.own} to free the full disk; what an earlier Run set "
        f"aside there ({REPORTED}/1) went with it"
    )


def test_the_set_aside_names_on_the_progress_line_are_printable_short_and_few(
    world: World,
) -> None:
    """The names under ``refs/thirdshift/`` are the agent's: each is shown printable, on one
    line and at most 100 characters, and only the first 20 are listed, then how many more."""
    loose = world.own / "refs" / "thirdshift"
    (loose / "a-odd").mkdir(parents=True)
    sha = world.worktree.head()
    (loose / "a-odd" / "a\x1b[31mred\x07").write_text(f"{sha}\n")
    (loose / "a-odd" / ("long" * 60)).write_text(f"{sha}\n")
    for number in range(30):
        (loose / f"n{number:02}").write_text(f"{sha}\n")

    reported = world.child("make_room")

    lines = reported["lines"]
    assert isinstance(lines, list)
    [phrase] = [line for line in lines if "went with it" in line]
    assert phrase.isprintable()
    shown = [
        "refs/thirdshift/a-odd/a?[31mred?",
        ("refs/thirdshift/a-odd/" + "long" * 60)[:99] + "\u2026",
        *(f"refs/thirdshift/n{number:02}" for number in range(18)),
    ]
    assert phrase == (
        f"removed its repository {world.own} to free the full disk; what an earlier Run set "
        f"aside there ({', '.join(shown)} and 12 more) went with it"
    )


def test_removing_a_worktree_whose_git_file_the_agent_rewrote_removes_it_all_the_same(
    world: World,
) -> None:
    """git refuses to remove a Worktree whose ``.git`` file no longer points back at its
    repository: thirdshift then removes the tree itself and prunes the registration."""
    (world.worktree.path / ".git").write_text(f"gitdir: {world.base / 'elsewhere'}\n")

    world.clone.remove_worktree(world.worktree.path)

    assert not world.worktree.path.exists()
    assert f"worktree {world.worktree.path}\n" not in world.registered()


def test_packed_refs_are_read_no_further_than_a_mebibyte(world: World) -> None:
    """A ``packed-refs`` of the agent's past 1 MiB is read that far: the refs named there are
    listed (20 of them) and the line says there are at least so many more."""
    sha = world.worktree.head()
    lines = [f"{sha} refs/thirdshift/big/{number:05}\n" for number in range(30_000)]
    (world.own / "packed-refs").write_text("".join(lines))
    whole_lines = (1 << 20) // len(lines[0])

    reported = world.child("make_room")

    shown = ", ".join(f"refs/thirdshift/big/{number:05}" for number in range(20))
    assert reported["lines"] == [
        f"removed the worktree {world.worktree.path} to free the full disk",
        f"removed its repository {world.own} to free the full disk; what an earlier Run set "
        f"aside there ({shown} and at least {whole_lines - 20} more) went with it",
    ]
