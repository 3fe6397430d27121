"""Finding every process of one agent CLI's tree, and stopping them all.

Finding the whole tree is the hard part. The agent CLIs start their tool commands in process
groups or sessions of their own, so signalling the CLI's group misses them, and a tool command
whose parent has exited is re-parented to init, where a walk of ``/proc`` parent links from the
CLI no longer finds it. A process belongs to the tree (``ProcessTree``) when any of these holds:

- it is the CLI, or a descendant of a member by parent links;
- it was seen as a member in an earlier look (identified by pid *and* start time, so a reused
  pid is never taken for it); the tree is looked at every second while the CLI runs, and
  before every stop signal;
- it is in a process group or session a member was seen in (checked against the group's
  leader, so a group number reused by an unrelated process is not taken for it);
- its environment carries this run's marker, ``TS_SESSION_TREE=<random token>``, which
  ``run_supervised`` adds to the CLI's environment and every child inherits. This is what
  finds a detached orphan that was born and orphaned between two looks.

We do not make the daemon a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): it is an
attribute of the whole process, so the orphans of every subprocess the daemon runs (git, CI
checks) would become its children and stay zombies unless it reaps them, and reaping with
``waitpid(-1)`` races with ``subprocess.Popen``'s own waits, which then report exit status 0.
A process that both clears its environment and is orphaned before the next look can escape;
the agent CLIs' tool commands inherit the environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_SWEEP_SECONDS: Final = 5.0
"""How long the final SIGKILL sweep keeps killing before it gives up."""
_POLL_SECONDS: Final = 0.02


def stop_process_tree(
    pid: int, stop_signals: Sequence[signal.Signals], grace_seconds: float
) -> None:
    """Stop ``pid`` and every process of its tree: each signal in turn to every member's group
    and pid, up to ``grace_seconds`` apart until ``pid`` exits, then SIGKILL to every member
    still alive. ``pid`` itself is not reaped: if it is our child, the caller waits for it.
    Without ``run_supervised``'s marker, an orphan that left the tree's groups and sessions
    before this call is out of reach."""
    tree = ProcessTree(pid, marker=None)
    stop_tree(tree, stop_signals, grace_seconds, lambda: not _running(pid))
    sweep(tree)


def working_in(directory: Path) -> list[int]:
    """Live processes whose working directory is ``directory`` or below it (as far as /proc
    lets this user see): what could still write into a Worktree about to be made again."""
    target = os.path.realpath(directory)
    found: list[int] = []
    for pid, proc in _scan().items():
        if not proc.live or pid == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == target or cwd.startswith(target + os.sep):
            found.append(pid)
    return sorted(found)


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``, found by walking ``/proc`` parent links."""
    table = _scan()
    return sorted(_descendants_in(table, {pid}) - {pid})


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    """Start time in clock ticks since boot: with the pid, it names one process for good."""
    state: str

    @property
    def live(self) -> bool:
        return self.state not in ("Z", "X", "x")


def _read_stat(pid: int) -> _Proc | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the command name may hold spaces or ")"
    return _Proc(
        pid=pid,
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        sid=int(fields[3]),
        start=int(fields[19]),
        state=fields[0].decode(),
    )


def _scan() -> dict[int, _Proc]:
    table: dict[int, _Proc] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (proc := _read_stat(int(entry))) is not None:
            table[proc.pid] = proc
    return table


def _descendants_in(table: Mapping[int, _Proc], roots: set[int]) -> set[int]:
    """``roots`` and every live process below them in ``table``."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found = set(roots)
    pending = list(roots)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found and table[child].live:
                found.add(child)
                pending.append(child)
    return found


class ProcessTree:
    """The processes of one CLI's tree, remembered across looks (see the module docstring)."""

    def __init__(self, root: int, marker: bytes | None) -> None:
        self.root = root
        self._marker = marker
        root_proc = _read_stat(root)
        self._root_start = root_proc.start if root_proc else 0
        self._known: set[tuple[int, int]] = set()
        self._leaders: dict[int, int | None] = {}
        """Group and session ids seen, each with its leader's start time when first seen
        (None when the leader was already gone)."""
        if root_proc is not None:
            self._remember(root_proc, {root: root_proc})
        self._outsiders = {0, 1, os.getpid(), os.getpgrp(), os.getsid(0)}

    def members(self, *, use_marker: bool = True) -> list[_Proc]:
        """Look at /proc: every live member of the tree, all remembered from now on."""
        table = _scan()
        seeds = {
            p.pid
            for p in table.values()
            if p.live and self._candidate(p) and self._belongs(p, table, use_marker)
        }
        found = [table[pid] for pid in _descendants_in(table, seeds) if pid in table]
        for proc in found:
            self._remember(proc, table)
        return [p for p in found if p.live and p.pid not in self._outsiders]

    def _candidate(self, proc: _Proc) -> bool:
        return proc.pid not in self._outsiders and proc.start >= self._root_start

    def _belongs(self, proc: _Proc, table: Mapping[int, _Proc], use_marker: bool) -> bool:
        if proc.pid == self.root or (proc.pid, proc.start) in self._known:
            return True
        if self._same_group(proc.pgid, table) or self._same_group(proc.sid, table):
            return True
        return use_marker and self._marked(proc.pid)

    def _same_group(self, group: int, table: Mapping[int, _Proc]) -> bool:
        """True when ``group`` (a pgid or sid) is one we saw, not a reuse of its number: a new
        group with that number has a live leader we did not see lead it."""
        if group not in self._leaders or group in self._outsiders:
            return False
        leader = table.get(group)
        return leader is None or leader.start == self._leaders[group]

    def _marked(self, pid: int) -> bool:
        if self._marker is None:
            return False
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False
        return b"\0" + self._marker + b"\0" in b"\0" + environ

    def _remember(self, proc: _Proc, table: Mapping[int, _Proc]) -> None:
        self._known.add((proc.pid, proc.start))
        for group in (proc.pgid, proc.sid):
            if group not in self._leaders:
                leader = table.get(group)
                self._leaders[group] = leader.start if leader else None


def _signal_all(members: Sequence[_Proc], sig: signal.Signals, root_group: int) -> None:
    """Send ``sig`` to the root's group and every member's group, and to each member whose
    group could not be signalled. No process gets it twice: a CLI may take a second SIGINT
    as "quit at once"."""
    reached: set[int] = set()
    for group in dict.fromkeys([root_group, *(p.pgid for p in members)]):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
            reached.add(group)
    for proc in members:
        if proc.pgid not in reached:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)


def stop_tree(
    tree: ProcessTree,
    stop_signals: Sequence[signal.Signals],
    grace_seconds: float,
    exited: Callable[[], bool],
) -> None:
    """Send each stop signal to the tree, waiting up to the grace after each for the root to
    exit; then kill every member still alive. Real time, whatever clock drove the watchdogs:
    these are waits on real processes, and a stop must never be cut short by an interrupt."""
    for sig in stop_signals:
        if exited():
            break
        _signal_all(tree.members(), sig, tree.root)
        deadline = time.monotonic() + grace_seconds
        while not exited() and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
    sweep(tree)


def sweep(tree: ProcessTree) -> None:
    """SIGKILL every live member of the tree until none is left (or the sweep times out)."""
    deadline = time.monotonic() + _SWEEP_SECONDS
    while (members := tree.members()) and time.monotonic() < deadline:
        _signal_all(members, signal.SIGKILL, tree.root)
        time.sleep(_POLL_SECONDS)


def has_exited(pid: int) -> bool:
    """True once our child ``pid`` has exited, without reaping it: while it is a zombie its
    pid, group and session numbers cannot be reused, so the sweep cannot hit a stranger."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _running(pid: int) -> bool:
    proc = _read_stat(pid)
    return proc is not None and proc.live
