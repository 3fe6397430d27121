"""A full disk during a session, end to end (adr/0041): thirdshift's home is a small tmpfs
mounted for the test, the real claude CLI's agent fills it from its Worktree, and the Run must
end as a Failed run naming the disk, give up its Lease, free the disk, and leave the next Run
free to succeed. Mounting needs root: without it the test fails, saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_agent_keys import MARKER, fix_and_commit
from tests.support.run_world import NAME, OWNER, PROJECT, RunWorld, bash, start_world
from thirdshift.sandbox.model import ModelScript
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

HOME_MB = 40
FILLER = "filler.bin"  # ignored by the project's .gitignore: junk, not work


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    """thirdshift's home on a tmpfs of ``HOME_MB`` MiB, unmounted afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    if os.geteuid() != 0:
        pytest.fail(
            "this test mounts a small tmpfs as thirdshift's home and needs root; run it as "
            "root (or in a container that may mount)"
        )
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={HOME_MB}m", "tmpfs", str(home)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs at {home}: {mounted.stderr.strip()}")
    try:
        yield home
    finally:
        subprocess.run(["umount", "--lazy", str(home)], check=False)


def _fill_the_disk() -> list[dict[str, object]]:
    """Fill the home's disk from the Worktree, then print enough for the CLI to write a long
    stream line the Session log cannot keep."""
    return [
        {"tool_calls": [bash(f"head -c {2 * HOME_MB}M /dev/zero > {FILLER}; df -k .", "fill")]},
        {"tool_calls": [bash("seq 1 40000", "count")]},
        {"text": "Done."},
    ]


def test_a_full_disk_during_a_session_is_a_failed_run_and_the_next_run_succeeds(
    tmp_path: Path, worlds: list[RunWorld], small_home: Path
) -> None:
    """The agent fills the home's disk: its session is stopped, the Run is a Failed run whose
    cause names the full disk and the fix (no comment calls it a bug in thirdshift), its
    record ends and its Lease is given up, the Worktree is removed (the disk is free again),
    and the next Run on the same home reaches its pull request."""
    world = start_world(
        tmp_path,
        [{"name": "implement", "marker": MARKER, "turns": _fill_the_disk()}],
        files={**PROJECT, ".gitignore": f"{FILLER}\n"},
    )
    worlds.append(world)
    assert world.home == small_home
    world.settings["THIRDSHIFT_MIN_FREE_DISK_MB"] = "10"

    failed = world.thirdshift("run", world.issue_url)

    assert failed.returncode == 1, failed.stderr
    said = failed.stderr
    assert "is full" in said, said
    assert "No space left on device" in said
    assert "free space in" in said
    assert "bug in thirdshift" not in said
    comments = [c["body"] for c in world.comments()]
    assert any("is full" in body and "free space in" in body for body in comments), comments
    assert not any("bug in thirdshift" in body for body in comments)
    assert not any(str(small_home) in body for body in comments)  # the path is the home's name

    store = Store.open(f"sqlite:///{small_home / 'thirdshift.db'}")
    try:
        [run] = store.list_runs()
        sessions = store.run_sessions(run.id)
        lease = store.lease_of(run.repository, world.issue_number)
    finally:
        store.close()
    assert run.state == "failed"
    assert run.cause is not None
    assert "is full" in run.cause
    assert [s.state for s in sessions] == ["failed"]
    assert lease is None
    assert not (small_home / "worktrees" / f"{OWNER}-{NAME}-issue-1").exists(), said
    assert shutil.disk_usage(small_home).free > (HOME_MB // 2) * 1024 * 1024

    world.restart_model(
        ModelScript.from_dict(
            {"sessions": [{"name": "implement", "marker": MARKER, "turns": fix_and_commit()}]}
        )
    )
    done = world.thirdshift("run", world.issue_url)

    assert done.returncode == 0, done.stderr
    [pull] = world.pulls()
    assert pull["head"]["ref"].startswith("issue-")
    assert pull["base"]["ref"] == "main"
    assert f"{OWNER}/{NAME}" in pull["html_url"]
