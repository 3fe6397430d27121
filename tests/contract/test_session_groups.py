"""The real session groups on this machine (cgroup v1 here, v2 where it is delegated): the
kernel refuses the fork past the processes limit, charges a sandbox's tmpfs write to the
group's memory, and the group is gone, with all that ran in it, once removed."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from thirdshift.harnesses import SealedPaths, probe
from thirdshift.harnesses.limits import (
    CgroupV1,
    CgroupV2,
    LimitHit,
    SessionGroup,
    SessionLimits,
    SessionLimitsError,
    probe_groups,
)

MB = 1024 * 1024


def group_dirs(group: SessionGroup) -> list[Path]:
    """Where the group lives in each hierarchy (the adapter's own record of it)."""
    directories = getattr(group, "directories", None)
    if directories is not None:
        return list(directories.values())
    return [group.directory]  # type: ignore[attr-defined]


def made(limits: SessionLimits) -> SessionGroup:
    groups = probe_groups()
    assert isinstance(groups, CgroupV1 | CgroupV2)
    return groups.make(f"thirdshift-test-{os.getpid()}-{secrets.token_hex(4)}", limits)


def sealed(tmp_path: Path, scratch_mb: int) -> SealedPaths:
    for name in ("worktree", "clone", "home"):
        (tmp_path / name).mkdir(exist_ok=True)
    return SealedPaths(
        worktree=tmp_path / "worktree",
        clone=tmp_path / "clone",
        agent_home=tmp_path / "home",
        hidden=(),
        scratch_bytes=scratch_mb * MB,
    )


def test_this_machine_offers_a_cgroup_that_bounds_sessions() -> None:
    """The probe finds cgroup v1 or v2 here and says which."""
    found = probe_groups().found
    assert found.startswith(("cgroup v1 (pids, memory", "cgroup v2 (delegated subtree "))


def test_the_fork_past_the_processes_limit_is_refused_and_the_group_says_so() -> None:
    """pids.max 5: of ten background sleeps, some cannot start, and ``hit`` names the
    processes limit; a group that met nothing says nothing."""
    group = made(SessionLimits(max_processes=5, memory_mb=256))
    try:
        assert group.hit() is None
        done = subprocess.run(
            group.enter(["/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 2 & done"]),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert "fork" in done.stderr.lower()
        hit = group.hit()
        assert hit is not None
        assert hit.limit == "processes"
    finally:
        group.remove()


def test_a_tmpfs_write_in_the_sandbox_is_charged_to_the_group_s_memory(tmp_path: Path) -> None:
    """A 200 MB write into the sandbox's /tmp (sized 512 MB) in a group of 64 MB is killed
    by the kernel, and the group names the memory limit."""
    group = made(SessionLimits(max_processes=64, memory_mb=64))
    sandbox = probe(os.environ.get("PATH"), unsafe_network=True)
    argv, env = sandbox.wrap(
        ["dd", "if=/dev/zero", "of=/tmp/fill", "bs=1M", "count=200"],
        {"PATH": "/usr/bin:/bin"},
        sealed(tmp_path, 512),
    )
    try:
        done = subprocess.run(
            group.enter(argv), env=env, capture_output=True, timeout=60, check=False
        )
        assert done.returncode != 0
        assert group.hit() == LimitHit("memory", "1 process(es) killed by the kernel's OOM killer")
    finally:
        group.remove()


def test_the_sandbox_tmpfs_is_full_at_its_size_without_touching_the_memory_limit(
    tmp_path: Path,
) -> None:
    """Sized 16 MB, /tmp takes no more: the write fails with no space left, and the
    group (256 MB) met no limit."""
    group = made(SessionLimits(max_processes=64, memory_mb=256))
    sandbox = probe(os.environ.get("PATH"), unsafe_network=True)
    argv, env = sandbox.wrap(
        ["dd", "if=/dev/zero", "of=/tmp/fill", "bs=1M", "count=64"],
        {"PATH": "/usr/bin:/bin"},
        sealed(tmp_path, 16),
    )
    try:
        done = subprocess.run(
            group.enter(argv), env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode != 0
        assert "No space left on device" in done.stderr
        assert group.hit() is None
    finally:
        group.remove()


def test_removing_a_group_kills_what_still_runs_in_it_and_leaves_no_directory() -> None:
    """Processes left in the group (detached from the one that started them) are killed,
    and the group's directory is gone from every hierarchy."""
    group = made(SessionLimits(max_processes=64, memory_mb=256))
    left = group_dirs(group)
    try:
        subprocess.run(
            group.enter(["/bin/sh", "-c", "(sleep 300 &) ; (sleep 301 &)"]),
            timeout=30,
            check=True,
        )
        assert all(d.is_dir() for d in left)
        members = (left[0] / "cgroup.procs").read_text().split()
        assert len(members) == 2
    finally:
        group.remove()

    assert not any(d.exists() for d in left)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in members):
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in members)
    group.remove()  # twice is harmless


def test_a_group_that_cannot_be_made_leaves_nothing_behind(tmp_path: Path) -> None:
    """A hierarchy where the group cannot be made (its parent is gone): SessionLimitsError
    naming the group and the fix, and the part made in another hierarchy is removed."""
    parents = {"pids": tmp_path / "pids", "memory": tmp_path / "gone" / "memory"}
    parents["pids"].mkdir()
    with pytest.raises(
        SessionLimitsError, match="the session's cgroup s1 cannot be made"
    ) as raised:
        CgroupV1(parents).make("s1", SessionLimits())
    assert "run thirdshift as root" in str(raised.value)
    assert list(parents["pids"].iterdir()) == []


def test_a_start_sweeps_the_empty_groups_a_killed_thirdshift_left_and_keeps_the_young() -> None:
    """A kill -9 of thirdshift leaves its session's group behind, empty (its agent died with
    it): the next start removes it, its thirdshift (the pid in its name) being gone. A group of
    a thirdshift still alive stays, however old (a session whose first disk scan was long, about
    to be entered); so does one with no pid to read that is not yet ten minutes old."""
    groups = probe_groups()
    assert isinstance(groups, CgroupV1 | CgroupV2)
    limits = SessionLimits(max_processes=8, memory_mb=64)
    # Its thirdshift is killed only once the group is whole: a thirdshift starting in a parallel
    # test sweeps too, and once took a dead pid's group away while it was being made.
    doomed = subprocess.Popen(["sleep", "60"])
    left = groups.make(f"thirdshift-{doomed.pid}-7-{secrets.token_hex(4)}", limits)
    doomed.kill()
    doomed.wait()
    young = made(limits)
    waiting = made(limits)
    nameless = groups.make(f"thirdshift-probe-x{secrets.token_hex(4)}", limits)
    an_hour_ago = time.time() - 3600
    five_minutes_ago = time.time() - 300
    try:
        for directory in group_dirs(waiting) + group_dirs(nameless):
            os.utime(directory, (five_minutes_ago, five_minutes_ago))
        for directory in group_dirs(young):
            os.utime(directory, (an_hour_ago, an_hour_ago))

        probe_groups()

        assert [d for d in group_dirs(left) if d.exists()] == []
        assert all(d.exists() for d in group_dirs(young))
        assert all(d.exists() for d in group_dirs(waiting))
        assert all(d.exists() for d in group_dirs(nameless))
    finally:
        for group in (left, young, waiting, nameless):
            group.remove()
