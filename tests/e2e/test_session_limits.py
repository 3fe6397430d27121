"""Each session runs in a cgroup of its own, tried end to end with the REAL claude CLI, the
scripted model server, the GitHub stand-in and the real cgroups of this machine: a session
that forks without end, one that fills /tmp, one that fills its Worktree is stopped, and its
Run is a Failed run naming the limit and the setting to raise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from thirdshift.harnesses.limits import group_owner
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
FIX = bash(
    write_file_command("calc.py", CALC_FIXED) + " && git commit -qam 'Make add() add'", "fix"
)


def limited_world(tmp_path: Path, turns: list[dict[str, Any]], **settings: str) -> RunWorld:
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": turns}])
    world.settings.update(
        {
            "THIRDSHIFT_SESSION_MAX_PROCESSES": "64",
            "THIRDSHIFT_SESSION_MEMORY_MB": "1024",
            "THIRDSHIFT_SESSION_TMPFS_MB": "64",
            "THIRDSHIFT_SESSION_DISK_MB": "8",
            "THIRDSHIFT_SESSION_DISK_CHECK_SECONDS": "0.5",
            "THIRDSHIFT_SESSION_IDLE_SECONDS": "60",
            **settings,
        }
    )
    return world


def failed_cause(world: RunWorld, stderr: str = "") -> str:
    store = Store.open(f"sqlite:///{world.home / 'thirdshift.db'}")
    try:
        [run] = store.list_runs(limit=5)
        assert run.state == "failed", stderr
        return str(run.cause)
    finally:
        store.close()


def no_session_groups_left(world: RunWorld) -> bool:
    """No session cgroup is left (in the pids hierarchy, v1, or at the top) by the thirdshift
    this test ran, now ended. Another test's, in parallel, may have been killed with -9 on
    purpose: its groups are its own."""
    ours = {process.pid for process in world.processes}
    roots = [Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")]
    left = [
        name
        for root in roots
        if root.is_dir()
        for name in root.iterdir()
        if name.is_dir()
        and name.name.startswith("thirdshift-")
        and not name.name.startswith("thirdshift-test")
        and group_owner(name.name) in ours
    ]
    return left == []


def test_a_session_that_forks_without_end_is_stopped_as_a_failed_run_naming_the_limit(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Two hundred background processes in a session allowed 64: the fork past the limit is
    refused, the session stopped at once (its next turn would hang), and the Failed run names
    session_max_processes; the work committed before is pushed, no group is left."""
    world = limited_world(
        tmp_path,
        [
            {"tool_calls": [FIX]},
            {"tool_calls": [bash("for i in $(seq 200); do sleep 60 & done; wait", "fork")]},
            {"hang": True},
        ],
    )
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url, timeout=180)

    assert result.returncode == 1, result.stderr
    cause = failed_cause(world)
    assert cause.startswith(
        "implement session stopped: it tried to run more than session_max_processes = 64 "
        "processes at once ("
    ), cause
    assert "raise session_max_processes if the work needs more" in cause
    assert "bug in thirdshift" not in result.stderr
    assert "Make add() add" in world.git("log", "--format=%s", "origin/issue-1", cwd=world.clone())
    assert no_session_groups_left(world)


def test_a_session_that_writes_4_gb_into_tmp_meets_its_memory_limit_and_fails_naming_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """/tmp sized above the memory limit (8 GB against 512 MB): the tmpfs pages are charged
    to the session's group, the kernel kills within it, and the Failed run names
    session_memory_mb; the host's memory is never at stake."""
    world = limited_world(
        tmp_path,
        [
            {"tool_calls": [FIX]},
            {"tool_calls": [bash("dd if=/dev/zero of=/tmp/fill bs=1M count=4096", "fill")]},
            {"hang": True},
        ],
        THIRDSHIFT_SESSION_MEMORY_MB="512",
        THIRDSHIFT_SESSION_TMPFS_MB="8192",
    )
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url, timeout=180)

    assert result.returncode == 1, result.stderr
    cause = failed_cause(world)
    assert cause.startswith(
        "implement session stopped: it used more than session_memory_mb = 512 MB of memory, "
        "its files in /tmp, /var/tmp and /run included ("
    ), cause
    assert "bug in thirdshift" not in result.stderr
    assert no_session_groups_left(world)


def test_a_session_that_fills_its_worktree_past_the_disk_budget_fails_naming_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """16 MB written into the Worktree of a session allowed 8 (its salvage commits them, and the
    secret check reads every byte as text before they are pushed): the watcher measures it and
    stops the session; the Failed run names session_disk_mb."""
    world = limited_world(
        tmp_path,
        [
            {"tool_calls": [FIX]},
            {"tool_calls": [bash("head -c 16777216 /dev/urandom > big.bin; sleep 20", "fill")]},
            {"hang": True},
        ],
    )
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url, timeout=180)

    assert result.returncode == 1, result.stderr
    assert_disk_budget_named(world, result.stderr)


def test_a_session_that_fills_its_worktrees_repository_past_the_disk_budget_fails_naming_it(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The Worktree's own repository is the agent's to write (its commits), so it is watched
    too: 16 MB written into ``git rev-parse --git-common-dir`` stops a session allowed 8."""
    fill = 'head -c 16777216 /dev/urandom > "$(git rev-parse --git-common-dir)/big.bin"; sleep 20'
    world = limited_world(
        tmp_path, [{"tool_calls": [FIX]}, {"tool_calls": [bash(fill, "fill")]}, {"hang": True}]
    )
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url, timeout=180)

    assert result.returncode == 1, result.stderr
    assert_disk_budget_named(world, result.stderr)


def assert_disk_budget_named(world: RunWorld, stderr: str) -> None:
    cause = failed_cause(world, stderr)
    assert cause.startswith(
        "implement session stopped: it used more than session_disk_mb = 8 MB of disk in its "
        "Worktree, the Worktree's repository and its home ("
    ), cause
    assert "raise session_disk_mb if the work needs more" in cause
    assert "bug in thirdshift" not in stderr


def test_a_4_gb_write_into_a_sized_tmp_is_refused_and_the_run_still_opens_its_pull_request(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """/tmp sized 64 MB takes no more (no space left); the session carries on within its
    limits and the Run ends with its pull request."""
    world = limited_world(
        tmp_path,
        [
            {"tool_calls": [bash("dd if=/dev/zero of=/tmp/fill bs=1M count=4096; df -m /tmp")]},
            {"tool_calls": [FIX]},
            {"tool_calls": [bash(pull_request_file("Make add() add", "Closes #1"), "pr")]},
            {"text": "Fixed."},
        ],
    )
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url, timeout=180)

    assert result.returncode == 0, result.stderr
    seen = (world.tmp / "model.jsonl").read_text()
    assert "No space left on device" in seen
    assert world.pulls()[0]["head"]["ref"] == "issue-1"
