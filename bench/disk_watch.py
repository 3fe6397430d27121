"""What a session's disk watch costs the daemon when the agent makes a flood of empty files.

Run from the repository root: ``.venv/bin/python bench/disk_watch.py [--files 500000]``.

It makes ``--files`` empty files (1,000 to a directory) in a fresh directory, as an agent
could in its Worktree, then measures one scan of them three ways:

- **before**: the scan as it was before adr/0039's files cap, kept here to compare: one entry
  remembered per file, every directory listed in full before its files are looked at;
- **after, whole**: ``disk_use`` with no limit (what a session's start does, for its baseline);
- **after, capped**: ``disk_use`` told to stop past ``session_max_files`` (200,000 by default),
  as the watch does while a session runs.

For each it prints the wall time and the peak memory the scan allocates (``tracemalloc``, in a
second run). Then it runs a real ``LimitWatch`` over the files with a group whose counters are
read as usual, and prints the longest gap between two reads while the scans go on: a long scan
must not delay them. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import os
import stat
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

from thirdshift.harnesses.limits import LimitHit, SessionLimits
from thirdshift.harnesses.limits.watch import DiskUse, LimitWatch, disk_use

PER_DIRECTORY = 1000


def before(roots: Sequence[Path]) -> int:
    """The scan before the files cap: every (device, inode) remembered, each directory's
    entries listed whole."""
    seen: set[tuple[int, int]] = set()
    total = 0
    pending = [str(root) for root in roots]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                found = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (found.st_dev, found.st_ino) in seen:
                continue
            seen.add((found.st_dev, found.st_ino))
            total += found.st_blocks * 512
            if stat.S_ISDIR(found.st_mode):
                pending.append(entry.path)
    return total


def make_files(root: Path, count: int) -> None:
    for number in range(count):
        if number % PER_DIRECTORY == 0:
            directory = root / f"d{number // PER_DIRECTORY}"
            directory.mkdir()
        (directory / f"f{number}").touch()


def measured(scan: Callable[[], object]) -> tuple[float, float]:
    """Seconds of one scan, and the MB it allocated at its peak (a second scan)."""
    started = time.perf_counter()
    scan()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    scan()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / 2**20


class _TimedGroup:
    """A session group with nothing to report that notes when its counters were read."""

    name = "bench"

    def __init__(self) -> None:
        self.reads: list[float] = []

    def enter(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def hit(self) -> LimitHit | None:
        self.reads.append(time.monotonic())
        return None

    def remove(self) -> None:
        return None


def counter_gaps(root: Path, seconds: float, max_files: int) -> tuple[float, int]:
    """The longest gap between two reads of the group's counters while the watch scans
    ``root`` without pause for ``seconds``, and how many scans it made."""
    group = _TimedGroup()
    limits = SessionLimits(max_files=max_files, disk_check_seconds=0.01)
    scans = 0

    def counting(
        roots: Sequence[Path], past: DiskUse | None, stop: threading.Event | None
    ) -> DiskUse:
        nonlocal scans
        scans += 1
        return disk_use(roots, past, stop)

    with LimitWatch(group, limits, [root], threading.Event(), measure=counting):
        time.sleep(seconds)
    gaps = [b - a for a, b in zip(group.reads, group.reads[1:], strict=False)]
    return max(gaps, default=0.0), scans - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=500_000)
    parser.add_argument("--max-files", type=int, default=SessionLimits().max_files)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="thirdshift-bench-") as place:
        root = Path(place)
        started = time.perf_counter()
        make_files(root, args.files)
        print(f"made {args.files:,} empty files in {time.perf_counter() - started:.1f} s")
        cap = DiskUse(SessionLimits().disk_mb * 2**20, args.max_files)
        rows = [
            ("before", lambda: before([root])),
            ("after, whole", lambda: disk_use([root])),
            (f"after, capped at {args.max_files:,}", lambda: disk_use([root], cap)),
        ]
        print(f"{'scan':<28} {'seconds':>8} {'peak MB':>8}")
        for name, scan in rows:
            seconds, peak = measured(scan)
            print(f"{name:<28} {seconds:>8.2f} {peak:>8.2f}")
        gap, scans = counter_gaps(root, 5.0, args.max_files)
        print(f"longest gap between counter reads over 5 s of {scans} scans: {gap * 1000:.0f} ms")


if __name__ == "__main__":
    main()
