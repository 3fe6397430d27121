"""The disk watch on real files (adr/0039): what ``disk_use`` counts below a session's
Worktree, the Worktree's repository and its home, and the watch that stops a session past
``session_disk_mb`` or ``session_max_files``. Permissions do not stop root, so the tests of a
directory thirdshift cannot read run the watch in a child as an unprivileged user (uid 65534
when the tests run as root) on a tree that user owns."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import thirdshift
from thirdshift.harnesses.limits import LimitWatch, ScriptedGroups, SessionLimits, limit_cause
from thirdshift.harnesses.limits.watch import DiskUse, disk_use


def _places(tmp_path: Path) -> tuple[Path, Path, Path]:
    worktree, own, home = tmp_path / "issue-1", tmp_path / "issue-1.git", tmp_path / "home"
    for place in (worktree, own, home):
        place.mkdir()
    return worktree, own, home


def test_300_empty_files_past_a_cap_of_200_stop_the_session_naming_session_max_files(
    tmp_path: Path,
) -> None:
    """Empty files take no disk, yet 300 of them written into the Worktree's repository are
    past a cap of 200: the session is halted and its cause names session_max_files."""
    roots = _places(tmp_path)
    limits = SessionLimits(disk_mb=20, max_files=200, disk_check_seconds=0.05)
    halt = threading.Event()
    group = ScriptedGroups().make("s", limits)
    with LimitWatch(group, limits, roots, halt) as watch:
        for number in range(300):
            (roots[1] / f"empty-{number}").touch()
        assert halt.wait(10)
    assert watch.hit is not None
    assert watch.hit.limit == "files"
    cause = limit_cause("implement", watch.hit, limits)
    assert cause.startswith(
        "implement session stopped: it made more than session_max_files = 200 files in its "
        "Worktree, the Worktree's repository and its home ("
    ), cause
    assert cause.endswith("raise session_max_files if the work needs more")


def test_200_empty_files_within_a_cap_of_200_leave_the_session_alone(tmp_path: Path) -> None:
    """The cap is on files added: exactly the cap is within it."""
    roots = _places(tmp_path)
    for number in range(50):
        (roots[0] / f"there-before-{number}").touch()
    limits = SessionLimits(disk_mb=20, max_files=200, disk_check_seconds=0.05)
    halt = threading.Event()
    group = ScriptedGroups().make("s", limits)
    with LimitWatch(group, limits, roots, halt) as watch:
        for number in range(200):
            (roots[2] / f"empty-{number}").touch()
        assert not halt.wait(0.5)
    assert watch.hit is None


def test_a_file_with_hard_links_in_two_roots_takes_its_disk_once_and_counts_per_name(
    tmp_path: Path,
) -> None:
    """Three names of one 64 KB file, in two roots, are its disk once but three entries: links
    cannot hide files from session_max_files."""
    worktree, own, _home = _places(tmp_path)
    original = worktree / "data.bin"
    original.write_bytes(os.urandom(64 * 1024))
    os.link(original, worktree / "again.bin")
    os.link(original, own / "borrowed.bin")
    blocks = original.stat().st_blocks * 512

    found = disk_use([worktree, own])

    assert found == DiskUse(blocks, 3)


def test_roots_inside_one_another_and_links_to_elsewhere_count_once(tmp_path: Path) -> None:
    """A root inside another root adds nothing, and a symbolic link is one entry, its target
    not followed."""
    worktree, _own, home = _places(tmp_path)
    (worktree / "sub").mkdir()
    (worktree / "sub" / "data.bin").write_bytes(os.urandom(32 * 1024))
    (home / "big.bin").write_bytes(os.urandom(256 * 1024))
    (worktree / "to-home").symlink_to(home)

    alone = disk_use([worktree])
    nested = disk_use([worktree, worktree / "sub"])

    assert alone.files == 3  # sub, sub/data.bin, to-home
    assert nested == alone
    assert alone.bytes < 256 * 1024


def test_a_scan_stops_once_past_the_figures_it_was_given(tmp_path: Path) -> None:
    """A limit met needs no exact count: 1,000 empty files scanned against 100 stop at 101,
    the result saying it was cut short; a stop asked for ends the scan too."""
    worktree, _own, _home = _places(tmp_path)
    for number in range(1000):
        (worktree / f"empty-{number}").touch()

    assert disk_use([worktree]) == DiskUse(0, 1000)
    assert disk_use([worktree], DiskUse(2**40, 100)) == DiskUse(0, 101, cut_short=True)
    stopped = threading.Event()
    stopped.set()
    assert disk_use([worktree], None, stopped) == DiskUse(0, 0, cut_short=True)


class _SetOnSecondLook(threading.Event):
    """A stop asked for between the scan's first look (before the directory) and its second."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks > 1


def test_a_scan_is_cut_short_inside_one_big_directory_of_hard_links(tmp_path: Path) -> None:
    """5,000 names of one file in one directory are 5,000 files: a cap of 1,000 stops the scan
    at 1,001 within that directory, and a stop asked for meanwhile ends it there too."""
    worktree, _own, _home = _places(tmp_path)
    original = tmp_path / "one.bin"
    original.write_bytes(os.urandom(4096))
    for number in range(5000):
        os.link(original, worktree / f"link-{number}")
    blocks = original.stat().st_blocks * 512

    assert disk_use([worktree]) == DiskUse(blocks, 5000)
    assert disk_use([worktree], DiskUse(2**40, 1000)) == DiskUse(blocks, 1001, cut_short=True)
    stop = _SetOnSecondLook()
    stopped = disk_use([worktree], None, stop)
    assert stopped.cut_short
    assert 0 < stopped.files < 5000
    assert stop.looks == 2


NOBODY = 65534

# The child makes a Worktree and a home with 640 KB in ten files under issue-1/hide, enters the
# watch, takes the directory's read or search permission away, and reports what it saw.
UNREADABLE_CHILD = """
import json, os, sys, threading
from dataclasses import asdict
from pathlib import Path
from thirdshift.harnesses.limits import LimitWatch, ScriptedGroups, SessionLimits, limit_cause
from thirdshift.harnesses.limits.watch import disk_use

base, mode = Path(sys.argv[1]), int(sys.argv[2], 8)
worktree, home = base / "issue-1", base / "home"
(worktree / "hide").mkdir(parents=True)
home.mkdir()
for number in range(10):
    (worktree / "hide" / f"data-{number}.bin").write_bytes(os.urandom(64 * 1024))
readable = disk_use([worktree, home])
limits = SessionLimits(disk_mb=1, max_files=5, disk_check_seconds=0.05)
halt = threading.Event()
with LimitWatch(ScriptedGroups().make("s", limits), limits, [worktree, home], halt) as watch:
    os.chmod(worktree / "hide", mode)
    halt.wait(10)
hidden = disk_use([worktree, home])
hit = watch.hit
print(json.dumps({
    "readable": asdict(readable),
    "hidden": asdict(hidden),
    "hit": None if hit is None else [hit.limit, hit.detail],
    "cause": None if hit is None else limit_cause("implement", hit, limits),
}))
"""


@pytest.mark.parametrize("mode", ["300", "600", "000"])
def test_a_directory_made_unreadable_stops_the_session_naming_it(mode: str) -> None:
    """An agent running as the daemon's user can take the read (0300) or search (0600)
    permission off a directory it made, which would hide all below it from the disk watch:
    that directory is the limit met, its cause naming it, never a directory skipped."""
    # Not under pytest's tmp_path: that is private to the tests' user, and the child's user
    # must reach the tree.
    base = Path(tempfile.mkdtemp(prefix="thirdshift-disk-watch-"))
    base.chmod(0o755)
    try:
        if os.geteuid() == 0:
            os.chown(base, NOBODY, NOBODY)
            unprivileged = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        else:
            unprivileged = []
        done = subprocess.run(
            [*unprivileged, sys.executable, "-c", UNREADABLE_CHILD, str(base), mode],
            cwd=base,
            env={
                "PATH": os.environ["PATH"],
                "HOME": str(base),
                "PYTHONPATH": str(Path(thirdshift.__file__).parents[1]),  # the code under test
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout)
    finally:
        with contextlib.suppress(FileNotFoundError):
            (base / "issue-1" / "hide").chmod(0o700)  # the test's own tree, no agent's
        shutil.rmtree(base)

    assert seen["hit"] == ["unreadable", "issue-1/hide"]
    assert seen["readable"]["files"] == 11
    # At least the ten files' 640 KB: a tmpfs gives its directories no blocks of their own.
    assert seen["readable"]["bytes"] >= 640 * 1024
    assert seen["hidden"]["unreadable"] == "issue-1/hide"
    assert seen["cause"].startswith(
        "implement session stopped: it made a directory thirdshift cannot read (issue-1/hide), "
        "which would hide its disk use"
    ), seen["cause"]
