"""Bounded output, tried as an attacker would: the real claude CLI with scripted turns, the
GitHub stand-in, real git and bubblewrap. The agent floods its own CLI's stdout with one line
of ``THIRDSHIFT_TEST_FLOOD_BYTES`` bytes (2 GiB unless told otherwise)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from tests.e2e.test_agent_keys import MARKER, fix_and_commit
from tests.support.run_world import RunWorld, bash, start_world

pytestmark = pytest.mark.real_cli

FLOOD_BYTES = int(os.environ.get("THIRDSHIFT_TEST_FLOOD_BYTES", str(2 * 1024**3)))
LOG_CAP = 4 * 1024 * 1024
PEAK_RSS_LIMIT = 300 * 1024 * 1024

# Run by the agent's Bash tool inside the sandbox: find its CLI among its ancestors, try to
# reopen the CLI's stdout through /proc (refused: it is a socket), then take the descriptor
# itself with pidfd_getfd (allowed where ptrace of a parent is: no Yama, or ptrace_scope 0)
# and write one line of the given size into it.
FLOOD = """
import ctypes, os, select, sys
size = int(sys.argv[1])
pid = os.getppid()
while pid > 1:
    argv0 = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0]
    if b"claude" in argv0:
        break
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
print("cli", pid, argv0.decode(errors="replace"))
try:
    os.open(f"/proc/{pid}/fd/1", os.O_WRONLY)
    print("reopened the CLI's stdout")
except OSError as error:
    print("reopen refused", error.errno)
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(438, os.pidfd_open(pid), 1, 0)
if fd < 0:
    print("pidfd_getfd refused", ctypes.get_errno())
    sys.exit(0)
def write(data):
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:  # the CLI keeps its stdout non-blocking
            select.select([], [fd], [])
block = memoryview(b"x" * (1 << 20))
left = size
while left > 0:
    write(block[: min(left, len(block))])
    left -= min(left, len(block))
write(b"\\n")
print("flooded", size)
"""


def _peak_rss_while(world: RunWorld, *args: str) -> tuple[int, int, str]:
    """Run ``thirdshift args``; its exit status, the highest VmHWM (bytes) its own process
    reported, and its stderr."""
    process = world.start_thirdshift(*args)
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        status = Path(f"/proc/{process.pid}/status")
        while not done.wait(0.2):
            try:
                text = status.read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]) * 1024)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        _, stderr = process.communicate(timeout=300)
    finally:
        done.set()
        watcher.join()
    return process.returncode, peak[0], stderr


def test_a_huge_line_written_into_the_clis_stdout_is_cut_and_the_run_goes_on(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The agent cannot reopen its CLI's stdout through /proc; taking the descriptor itself,
    it writes one huge line there: thirdshift cuts it (a progress line and a cut Session event
    say how many bytes were dropped), its peak RSS stays under 300 MB, the Run reaches its
    pull request, and the Session log stops at its cap with a last line counting the rest."""
    flood = f"python3 - {FLOOD_BYTES} <<'EOF'\n{FLOOD}\nEOF"
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [{"tool_calls": [bash(flood, "flood")]}, *fix_and_commit()],
            }
        ],
    )
    worlds.append(world)
    world.settings["THIRDSHIFT_SESSION_LOG_CAP_BYTES"] = str(LOG_CAP)

    status, peak, stderr = _peak_rss_while(world, "run", world.issue_url)

    seen = (world.tmp / "model.jsonl").read_text()
    assert "reopen refused 6" in seen, seen[-3000:]  # ENXIO: a socket cannot be opened
    assert f"flooded {FLOOD_BYTES}" in seen, seen[-3000:]
    assert status == 0, stderr
    assert world.pulls()[0]["head"]["ref"] == "issue-1"
    assert "a stdout line over the cap (8 MiB) was cut" in stderr
    print(f"thirdshift peak RSS {peak} bytes")
    assert 0 < peak < PEAK_RSS_LIMIT, f"thirdshift's peak RSS was {peak} bytes"
    [log] = (world.home / "logs").glob("*-implement.jsonl")
    assert log.stat().st_size <= LOG_CAP + 64 * 1024
    last = json.loads(log.read_bytes().splitlines()[-1])
    assert last["type"] == "thirdshift.log_capped"
    assert last["dropped_lines"] >= 2  # the cut line's head and its marker, at least
