"""Watching a running session against its limits: its group's counters (a fork refused, an
OOM kill) four times a second, and the disk and the files its Worktree, the Worktree's
repository and its home take, every few seconds, each on a thread of its own so that a long
scan never delays the counters. A limit met sets ``halt``, which stops the session the way a
cost budget does (``run_supervised``)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from thirdshift.harnesses.limits.groups import LimitHit, SessionGroup, SessionLimits

_GROUP_TICK_SECONDS = 0.25
_MB = 1024 * 1024


@dataclass(frozen=True)
class DiskUse:
    """What the files below some roots take: bytes of disk (a file with hard links once), and
    how many entries they hold (directories, links and each name of a hard-linked file
    included)."""

    bytes: int
    files: int
    cut_short: bool = False
    """The scan stopped once past the figures it was given: the true figures are at least
    these."""
    unreadable: str | None = None
    """A directory below the roots that thirdshift cannot read (``<root's name>/<path>``): what
    is below it is hidden from the count, so the scan stopped there."""


Measure = Callable[[Sequence[Path], DiskUse | None, threading.Event | None], DiskUse]
"""``disk_use``'s shape: the use below the roots, stopped once past the second argument (when
given) or when the event is set."""

_STOP_EVERY = 1024
"""How many entries of one directory are counted between two looks at ``stop``: a directory
of a million names is cut short too."""
_SHOWN_CHARS = 120


def disk_use(
    roots: Sequence[Path],
    past: DiskUse | None = None,
    stop: threading.Event | None = None,
) -> DiskUse:
    """The disk the files below ``roots`` take and how many entries they hold, links not
    followed. A file with hard links (one shared between a clone and its Worktree, say) takes
    its disk once but counts once per name, so links cannot hide files from
    ``session_max_files``; only such files are remembered, so an agent's million empty files
    cost the scan no memory. The scan stops early once it is over either figure of ``past`` (a
    limit met needs no exact count), when ``stop`` is set, or at the first directory it cannot
    read (``unreadable``; its mode is never changed back: the agent could swap the directory
    for a link first). A file that goes while it is counted counts nothing."""
    outermost = _outermost(roots)
    linked: set[tuple[int, int]] = set()
    total = files = 0
    pending = [str(root) for root in outermost]
    while pending:
        if stop is not None and stop.is_set():
            return DiskUse(total, files, cut_short=True)
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        found = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    files += 1
                    is_dir = stat.S_ISDIR(found.st_mode)
                    if is_dir or found.st_nlink == 1:
                        total += found.st_blocks * 512
                    elif (found.st_dev, found.st_ino) not in linked:
                        linked.add((found.st_dev, found.st_ino))
                        total += found.st_blocks * 512
                    if is_dir:
                        pending.append(entry.path)
                    if past is not None and (total > past.bytes or files > past.files):
                        return DiskUse(total, files, cut_short=True)
                    if files % _STOP_EVERY == 0 and stop is not None and stop.is_set():
                        return DiskUse(total, files, cut_short=True)
        except (FileNotFoundError, NotADirectoryError):
            continue  # a directory that went (or became a file) counts what was seen
        except OSError:
            # Listed but not searchable (its entries cannot be looked at) or not listable at
            # all: either way what is below it would go uncounted.
            shown = _shown(directory, outermost)
            return DiskUse(total, files, cut_short=True, unreadable=shown)
    return DiskUse(total, files)


def _shown(directory: str, roots: Sequence[Path]) -> str:
    """``directory`` as ``<root's name>/<path below it>``, safe to print: the agent chose the
    names, so a character that is not printable is a ``?`` and a long path is cut."""
    path = Path(directory)
    for root in roots:
        if path.is_relative_to(root):
            path = Path(root.name) / path.relative_to(root)
            break
    text = "".join(c if c.isprintable() else "?" for c in str(path))
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _outermost(roots: Sequence[Path]) -> list[Path]:
    """``roots`` without those inside another: directories are not remembered while counting,
    so a root inside another would be counted twice."""
    resolved = sorted({Path(os.path.realpath(root)) for root in roots}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for root in resolved:
        if not any(root.is_relative_to(outer) for outer in kept):
            kept.append(root)
    return kept


class LimitWatch:
    """While entered, one thread looks at ``group`` every quarter second and another measures
    the disk below ``roots`` every ``limits.disk_check_seconds``; the first limit met is kept
    in ``hit`` and sets ``halt``. Disk and files are counted as growth over what they were on
    entering (or as ``baseline``, measured before the group was made); a directory already
    unreadable then is met at once. On exit ``hit`` also holds what the group's counters say at
    the end (an OOM kill that ended the CLI before the thread looked)."""

    def __init__(
        self,
        group: SessionGroup,
        limits: SessionLimits,
        roots: Sequence[Path],
        halt: threading.Event,
        *,
        measure: Measure = disk_use,
        baseline: DiskUse | None = None,
    ) -> None:
        self._group = group
        self._limits = limits
        self._roots = tuple(roots)
        self._halt = halt
        self._measure = measure
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = (
            threading.Thread(target=self._watch_group, name="thirdshift-limits", daemon=True),
            threading.Thread(target=self._watch_disk, name="thirdshift-disk", daemon=True),
        )
        self._given = baseline
        self._baseline = DiskUse(0, 0)
        self.hit: LimitHit | None = None

    def __enter__(self) -> LimitWatch:
        self._baseline = (
            self._given if self._given is not None else self._measure(self._roots, None, None)
        )
        if self._baseline.unreadable is not None:
            self._met(LimitHit("unreadable", self._baseline.unreadable))
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()  # a scan under way stops too
        for thread in self._threads:
            thread.join()
        if self.hit is None:
            self.hit = self._group.hit()

    def _watch_group(self) -> None:
        while not self._stop.wait(_GROUP_TICK_SECONDS):
            found = self._group.hit()
            if found is not None:
                self._met(found)

    def _watch_disk(self) -> None:
        while not self._stop.wait(self._limits.disk_check_seconds):
            found = self._disk_hit()
            if found is not None:
                self._met(found)

    def _met(self, found: LimitHit) -> None:
        with self._lock:
            if self.hit is None and not self._stop.is_set():
                self.hit = found
                self._halt.set()
            self._stop.set()

    def _disk_hit(self) -> LimitHit | None:
        allowed = DiskUse(
            self._baseline.bytes + self._limits.disk_mb * _MB,
            self._baseline.files + self._limits.max_files,
        )
        use = self._measure(self._roots, allowed, self._stop)
        return disk_rule(self._baseline, use, self._limits)


def disk_rule(baseline: DiskUse, use: DiskUse, limits: SessionLimits) -> LimitHit | None:
    """The limit ``use`` meets, grown from ``baseline``: a directory it could not read first
    (what is below it went uncounted), then ``session_disk_mb``, then ``session_max_files``;
    None within both."""
    if use.unreadable is not None:
        return LimitHit("unreadable", use.unreadable)
    at_least = "at least " if use.cut_short else ""
    grown = use.bytes - baseline.bytes
    if grown > limits.disk_mb * _MB:
        return LimitHit("disk", f"{at_least}{grown // _MB} MB more than when it started")
    made = use.files - baseline.files
    if made > limits.max_files:
        return LimitHit("files", f"{at_least}{made} files more than when it started")
    return None
