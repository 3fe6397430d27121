"""The real session groups: cgroup v2 (a delegated subtree) and cgroup v1 (the pids, memory
and cpu hierarchies), chosen by probing what this machine offers (adr/0039).

A session's group is made below thirdshift's own group in each hierarchy (read from
/proc/self/cgroup), so a parent's limits (a container's, a systemd unit's) still hold over it.
The CLI joins it before it can fork: its argv is wrapped in a small shell that writes its own
pid to the group's ``cgroup.procs`` and then execs the sandbox. Writing Popen's pid after the
start would race bubblewrap's first fork, and a ``preexec_fn`` is unsafe in a threaded daemon.
Inside the sandbox the agent cannot move itself out: /sys is mounted read-only there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from thirdshift.harnesses.limits.groups import (
    CPU_SHARES,
    CPU_WEIGHT,
    LimitHit,
    SessionGroup,
    SessionGroups,
    SessionLimits,
    SessionLimitsError,
    SessionLimitsUnavailable,
    Unbounded,
)

ENTER = (
    'while [ "$1" != -- ]; do\n'
    '  echo $$ > "$1" || { echo "thirdshift: cannot join the session\'s cgroup ($1)" >&2; '
    "exit 125; }\n"
    "  shift\n"
    "done\n"
    "shift\n"
    'exec "$@"\n'
)
"""Joins each group named (its ``cgroup.procs``), then becomes the command after ``--``."""
_KILL_ROUNDS = 200
_KILL_PAUSE = 0.01


def _enter(procs: Sequence[Path], argv: Sequence[str]) -> list[str]:
    return ["/bin/sh", "-c", ENTER, "thirdshift-cgroup", *map(str, procs), "--", *argv]


def _write(path: Path, value: str) -> None:
    path.write_text(value + "\n")


def _counter(path: Path, key: str) -> int:
    """The value of ``key`` in a flat-keyed cgroup file (``pids.events``, ``memory.events``,
    ``memory.oom_control``); 0 when the file cannot be read."""
    try:
        text = path.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _members(procs: Path) -> list[int]:
    try:
        return [int(line) for line in procs.read_text().split() if line.isdigit()]
    except OSError:
        return []


def _kill_members(procs: Path) -> None:
    """SIGKILL every process of the group until none is left (a fork between two reads is
    caught by the next round; the pids limit bounds how many there can be)."""
    for _ in range(_KILL_ROUNDS):
        members = _members(procs)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(_KILL_PAUSE)


def _rmdir(directory: Path) -> None:
    """Remove an emptied group; a killed process not yet reaped keeps it busy a moment."""
    for _ in range(_KILL_ROUNDS):
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                return
        time.sleep(_KILL_PAUSE)


def _processes_hit(pids_events: Path) -> LimitHit | None:
    refused = _counter(pids_events, "max")
    if refused:
        return LimitHit("processes", f"{refused} fork(s) refused")
    return None


def _memory_hit(killed: int) -> LimitHit | None:
    if killed:
        return LimitHit("memory", f"{killed} process(es) killed by the kernel's OOM killer")
    return None


@dataclass
class _V2Group:
    name: str
    directory: Path

    def enter(self, argv: Sequence[str]) -> list[str]:
        return _enter([self.directory / "cgroup.procs"], argv)

    def hit(self) -> LimitHit | None:
        events = self.directory / "memory.events"
        killed = _counter(events, "oom_kill") or _counter(events, "oom")
        return _processes_hit(self.directory / "pids.events") or _memory_hit(killed)

    def remove(self) -> None:
        if not self.directory.exists():
            return
        kill = self.directory / "cgroup.kill"
        if kill.exists():
            with contextlib.suppress(OSError):  # the kill loop below does it then
                _write(kill, "1")
        _kill_members(self.directory / "cgroup.procs")
        _rmdir(self.directory)


@dataclass(frozen=True)
class CgroupV2:
    """Session groups below ``parent`` in a cgroup v2 hierarchy whose ``subtree_control``
    gives its children the pids and memory controllers (and cpu, when it can)."""

    parent: Path

    @property
    def found(self) -> str:
        return f"cgroup v2 (delegated subtree {self.parent})"

    def make(self, name: str, limits: SessionLimits) -> SessionGroup:
        directory = self.parent / name
        try:
            directory.mkdir()
            _write(directory / "pids.max", str(limits.max_processes))
            _write(directory / "memory.max", str(limits.memory_mb * 1024 * 1024))
            # tmpfs pages may go to swap: the limit holds memory and swap together.
            if (directory / "memory.swap.max").exists():
                _write(directory / "memory.swap.max", "0")
            if (directory / "cpu.weight").exists():
                _write(directory / "cpu.weight", str(CPU_WEIGHT))
        except OSError as error:
            _V2Group(name, directory).remove()
            raise SessionLimitsError(
                f"the session's cgroup {directory} cannot be made ({error.strerror or error}); "
                "check that thirdshift's cgroup is delegated to its user (Delegate=yes)"
            ) from error
        return _V2Group(name, directory)


@dataclass
class _V1Group:
    name: str
    directories: dict[str, Path]
    """By controller: pids, memory and (when mounted) cpu."""

    def enter(self, argv: Sequence[str]) -> list[str]:
        return _enter([d / "cgroup.procs" for d in self.directories.values()], argv)

    def hit(self) -> LimitHit | None:
        memory = self.directories.get("memory")
        killed = 0 if memory is None else _counter(memory / "memory.oom_control", "oom_kill")
        pids = self.directories.get("pids")
        processes = None if pids is None else _processes_hit(pids / "pids.events")
        return processes or _memory_hit(killed)

    def remove(self) -> None:
        for directory in self.directories.values():
            if directory.exists():
                _kill_members(directory / "cgroup.procs")
        for directory in self.directories.values():
            _rmdir(directory)


@dataclass(frozen=True)
class CgroupV1:
    """Session groups below thirdshift's own group in each cgroup v1 hierarchy: ``parents``
    by controller (pids and memory, cpu when mounted)."""

    parents: Mapping[str, Path]

    @property
    def found(self) -> str:
        return f"cgroup v1 ({', '.join(self.parents)})"

    def make(self, name: str, limits: SessionLimits) -> SessionGroup:
        group = _V1Group(name, {})
        memory_bytes = str(limits.memory_mb * 1024 * 1024)
        try:
            for controller, parent in self.parents.items():
                directory = parent / name
                directory.mkdir()
                group.directories[controller] = directory
            _write(group.directories["pids"] / "pids.max", str(limits.max_processes))
            memory = group.directories["memory"]
            _write(memory / "memory.limit_in_bytes", memory_bytes)
            # Memory and swap together, when the kernel accounts swap: set after the memory
            # limit, which it may not be below.
            if (memory / "memory.memsw.limit_in_bytes").exists():
                _write(memory / "memory.memsw.limit_in_bytes", memory_bytes)
            if "cpu" in group.directories:
                _write(group.directories["cpu"] / "cpu.shares", str(CPU_SHARES))
        except OSError as error:
            group.remove()
            raise SessionLimitsError(
                f"the session's cgroup {name} cannot be made ({error.strerror or error}); run "
                "thirdshift as root, or on cgroup v2 with a delegated subtree"
            ) from error
        return group


@dataclass(frozen=True)
class Mount:
    """A cgroup hierarchy mounted here: ``version`` 1 or 2, and for v1 its controllers."""

    version: int
    path: Path
    controllers: frozenset[str]


def mounts(text: str) -> list[Mount]:
    """The cgroup hierarchies of /proc/self/mounts' ``text``."""
    found: list[Mount] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2":
            found.append(Mount(2, Path(fields[1]), frozenset()))
        elif fields[2] == "cgroup":
            found.append(Mount(1, Path(fields[1]), frozenset(fields[3].split(","))))
    return found


def own_groups(text: str) -> dict[str, str]:
    """/proc/self/cgroup's ``text`` by controller; the v2 group under ``""``."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _below(mount: Path, group: str) -> Path:
    return mount / group.lstrip("/")


def _v1(found: list[Mount], own: dict[str, str]) -> CgroupV1 | str:
    """v1 groups, or why not."""
    parents: dict[str, Path] = {}
    for controller in ("pids", "memory", "cpu"):
        mount = next((m for m in found if m.version == 1 and controller in m.controllers), None)
        if mount is not None and controller in own:
            parents[controller] = _below(mount.path, own[controller])
    missing = [c for c in ("pids", "memory") if c not in parents]
    if missing:
        return f"cgroup v1 has no {' and no '.join(missing)} hierarchy"
    return CgroupV1(parents)


def _v2(found: list[Mount], own: dict[str, str]) -> CgroupV2 | str:
    """v2 groups below a delegated subtree of thirdshift's own group, or why not. Controllers
    are given to children only by a group with no process of its own: thirdshift's processes
    move to a leaf of their own first (as systemd's Delegate=yes expects)."""
    mount = next((m for m in found if m.version == 2), None)
    if mount is None or "" not in own:
        return "no cgroup v2 hierarchy is mounted"
    group = _below(mount.path, own[""])
    try:
        offered = set((group / "cgroup.controllers").read_text().split())
    except OSError as error:
        return f"thirdshift's cgroup v2 group {group} cannot be read ({error.strerror})"
    missing = [c for c in ("pids", "memory") if c not in offered]
    if missing:
        return f"cgroup v2 offers no {' and no '.join(missing)} controller to {group}"
    wanted = ["pids", "memory", *(["cpu"] if "cpu" in offered else [])]
    try:
        enabled = set((group / "cgroup.subtree_control").read_text().split())
        if not set(wanted) <= enabled:
            if _members(group / "cgroup.procs") and group != mount.path:
                leaf = group / "thirdshift"
                leaf.mkdir(exist_ok=True)
                for pid in _members(group / "cgroup.procs"):
                    _write(leaf / "cgroup.procs", str(pid))
            _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
    except OSError as error:
        return (
            f"thirdshift cannot give the pids and memory controllers to its sessions below "
            f"{group} ({error.strerror or error}): the group is not delegated to it"
        )
    return CgroupV2(group)


def _tried(groups: SessionGroups) -> str | None:
    """Why ``groups`` cannot make a group here (one made and removed), or None."""
    try:
        name = f"thirdshift-probe-{os.getpid()}-{secrets.token_hex(4)}"
        groups.make(name, SESSION_PROBE).remove()
    except SessionLimitsError as error:
        return str(error).split("; ", 1)[0]
    return None


SESSION_PROBE = SessionLimits(max_processes=8, memory_mb=64)


LEFT_AFTER_SECONDS = 600.0
"""A session group older than this and empty was left by a thirdshift that died (kill -9): its
agent died with it (bubblewrap's --die-with-parent), the group did not. Ten minutes, well past
the moment between a group's making and its entering."""


def sweep_left_groups(
    parents: Sequence[Path], *, older_than: float = LEFT_AFTER_SECONDS
) -> list[Path]:
    """Remove the empty session groups (``thirdshift-<pid>-*``) under ``parents`` whose
    thirdshift (the pid in the name) is gone, or, with no pid to read, made more than
    ``older_than`` seconds ago; the removed ones. A group in use is not empty and stays; one
    whose thirdshift lives may be about to be entered, and stays too."""
    removed: list[Path] = []
    now = time.time()
    for parent in parents:
        try:
            children = [p for p in parent.iterdir() if p.name.startswith("thirdshift-")]
        except OSError:
            continue
        for child in children:
            try:
                owner = group_owner(child.name)
                if not child.is_dir() or (owner is not None and _alive(owner)):
                    continue
                if owner is None and now - child.stat().st_mtime < older_than:
                    continue
                if (child / "cgroup.procs").read_text().strip():
                    continue
                child.rmdir()
            except OSError:
                continue  # busy, gone meanwhile, or not ours to remove
            removed.append(child)
    return removed


def group_name(run_id: int, nonce: str) -> str:
    """A session group's name: its thirdshift's pid first, so a later start can tell a group
    whose thirdshift died (``sweep_left_groups``)."""
    return f"thirdshift-{os.getpid()}-{run_id}-{nonce}"


def group_owner(name: str) -> int | None:
    """The pid of the thirdshift that made the group ``name`` (its first number), or None."""
    for part in name.split("-")[1:]:
        if part.isascii() and part.isdigit():
            return int(part)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def probe_groups(
    *,
    unsafe_unbounded: bool = False,
    read: Callable[[str], str] = lambda path: Path(path).read_text(),
) -> SessionGroups:
    """What bounds sessions here: nothing when ``unsafe_unbounded`` (the user opted out); else
    cgroup v2 where thirdshift's group can be delegated to, else cgroup v1's hierarchies, each
    once a trial group was made and removed; else SessionLimitsUnavailable naming what was
    tried and the fixes. ``read`` reads /proc/self/mounts and /proc/self/cgroup."""
    if unsafe_unbounded:
        return Unbounded()
    found = mounts(read("/proc/self/mounts"))
    own = own_groups(read("/proc/self/cgroup"))
    problems: list[str] = []
    for made in (_v2(found, own), _v1(found, own)):
        if isinstance(made, str):
            problems.append(made)
            continue
        problem = _tried(made)
        if problem is None:
            parents = [made.parent] if isinstance(made, CgroupV2) else list(made.parents.values())
            sweep_left_groups(parents)
            return made
        problems.append(problem)
    raise SessionLimitsUnavailable(
        f"no cgroup can bound a session's processes and memory here ({'; '.join(problems)}); "
        "run thirdshift as root (cgroup v1), or give it a cgroup v2 subtree of its own "
        "(Delegate=yes in its systemd unit), or, knowing one session may then take this whole "
        "host, set unsafe_unbounded_sessions = true"
    )
