"""One hostile session cannot starve the daemon, tried end to end: `thirdshift daemon` running
two Runs at once with the real claude CLI, the GitHub stand-in, real git, PostgreSQL and the
real cgroups of this machine. One session floods its egress proxy with tunnels to refused hosts
(300 here, each through the sandbox's socat bridge; the proxy alone takes 2,000 tunnels and
100,000 hosts in tests/contract) and forks without end; the other Run, beside it in the same
daemon, still ends with its pull request, and the daemon's open descriptors stay bounded all
along (adr/0039, adr/0040)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon import make_world, marker, stop, work_turns
from tests.support.run_world import bash
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

__all__ = ["make_world"]  # the fixture this file's test takes

FLOOD = (
    "/usr/bin/python3 -c '"
    "import socket\n"
    "held = []\n"
    "for i in range(300):\n"
    "    try:\n"
    '        s = socket.create_connection(("127.0.0.1", 3128), timeout=2)\n'
    '        s.sendall(b"CONNECT refused-%d.example:443 HTTP/1.1\\r\\n\\r\\n" % i)\n'
    "        held.append(s)\n"
    "    except OSError:\n"
    "        pass\n"
    'print("held", len(held))\n'
    "' ; for i in $(seq 1000); do sleep 120 & done; wait"
)
DESCRIPTOR_BOUND = 256
"""What the daemon may hold open at its busiest here: its store, its two Runs' git, logs and
proxies (each proxy at most 16 connections and their upstreams)."""


class DescriptorWatch:
    """The most descriptors a process held, sampled every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.most = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            try:
                self.most = max(self.most, len(os.listdir(f"/proc/{self.pid}/fd")))
            except OSError:
                return

    def stop(self) -> int:
        self._done.set()
        self._thread.join(5)
        return self.most


def test_a_session_flooding_its_proxy_and_forking_is_stopped_and_its_neighbour_finishes(
    make_world: Any, tmp_path: Path
) -> None:
    """The hostile Run is a Failed run naming session_max_processes; the other Run in the same
    daemon ends ready with its pull request; the daemon never held more than the stated bound
    of descriptors."""
    hostile: list[dict[str, Any]] = [
        {"tool_calls": [bash(FLOOD, "flood")]},
        {"hang": True},
    ]
    sessions = [
        {"name": "alpha-1", "marker": marker("alpha", 1), "turns": hostile},
        {"name": "beta-1", "marker": marker("beta", 1), "turns": work_turns("beta", 1)},
    ]
    world = make_world(sessions)
    world.ready_issue("alpha", "The hostile one")
    world.ready_issue("beta", "The neighbour")

    daemon = world.daemon(
        "home",
        session_max_processes="64",
        session_memory_mb="1024",
        session_tmpfs_mb="64",
        session_idle_seconds="600",
    )
    watch = DescriptorWatch(daemon.pid)

    def both_ended() -> bool:
        store = Store.open(world.database_url, migrate=False)
        try:
            runs = store.list_runs(limit=10)
        except Exception:  # the daemon has not made the tables yet
            return False
        finally:
            store.close()
        return len(runs) == 2 and all(run.state in ("succeeded", "failed") for run in runs)

    world.wait_until(both_ended, timeout=300, what="both Runs ending")
    most = watch.stop()
    status, said = stop(daemon)

    assert status == 0, said[-3000:]
    store = Store.open(world.database_url)
    try:
        runs = {run.repository.name: run for run in store.list_runs(limit=10)}
    finally:
        store.close()
    assert runs["beta"].state == "succeeded", said[-3000:]
    assert [p["head"]["ref"] for p in world.ready_pulls("beta")] == ["issue-1"]
    assert runs["alpha"].state == "failed"
    assert "session_max_processes" in str(runs["alpha"].cause)
    assert "bug in thirdshift" not in said
    assert 0 < most <= DESCRIPTOR_BOUND, f"the daemon held {most} descriptors at once"
