"""Session limits: what one session may take of the host, the seam that bounds it, and the
words a Failed run says when a limit stops it.

A session's CLI, and everything it starts, runs in a group of its own (a cgroup) that caps
its processes and its memory (tmpfs pages included: they are charged to the group that wrote
them) and weighs its CPU below the daemon's. ``SessionGroups`` makes one group per session;
the real adapters (``cgroups``) speak cgroup v1 and v2, ``ScriptedGroups`` stands in for them
in in-process tests, and ``Unbounded`` is what ``unsafe_unbounded_sessions`` leaves.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from thirdshift.errors import ThirdshiftError

LimitName = Literal["processes", "memory", "disk", "files", "unreadable"]

CPU_WEIGHT = 50
"""A session's cgroup v2 ``cpu.weight``: half the default (100) the daemon's group has."""
CPU_SHARES = 512
"""The same for cgroup v1's ``cpu.shares`` (default 1024)."""


@dataclass(frozen=True)
class SessionLimits:
    """What one session may use: the settings ``session_max_processes``,
    ``session_memory_mb``, ``session_tmpfs_mb``, ``session_disk_mb``, ``session_max_files``
    and ``session_disk_check_seconds``."""

    max_processes: int = 512
    memory_mb: int = 4096
    tmpfs_mb: int = 1024
    """The size of each of /tmp, /var/tmp and /run inside the sandbox."""
    disk_mb: int = 10240
    """How much the disk taken by the Worktree, the Worktree's repository (``<worktree>.git``)
    and the agent's home may grow in a session. The managed clone is read-only to a session
    and is not measured."""
    max_files: int = 200_000
    """How many files (directories and links included) a session may add to the same three:
    empty files take no disk, yet each costs the disk watch a look."""
    disk_check_seconds: float = 5.0

    def describe(self) -> str:
        """One line for the Run's first lines and ``thirdshift config``."""
        return (
            f"{self.max_processes} processes, {self.memory_mb} MB memory (tmpfs included), "
            f"{self.tmpfs_mb} MB each for /tmp, /var/tmp and /run, {self.disk_mb} MB disk, "
            f"{self.max_files} files"
        )


@dataclass(frozen=True)
class LimitHit:
    """A limit a session met: which, and what was seen (``pids.events``, an OOM kill, the
    bytes or the files the session added, the directory the disk watch could not read)."""

    limit: LimitName
    detail: str


class SessionLimitsUnavailable(ThirdshiftError):
    """No cgroup can bound a session on this machine, and ``unsafe_unbounded_sessions`` is not
    set: the daemon and ``run`` refuse to start. The message names what was tried and the fix."""


class SessionLimitsError(ThirdshiftError):
    """A session's group could not be made or entered; the message names the group and why."""


def limit_cause(kind: str, hit: LimitHit, limits: SessionLimits) -> str:
    """The Failed run's cause when ``hit`` stopped a session of ``kind``: the limit, its
    setting and value, what was seen, and the setting to raise."""
    if hit.limit == "processes":
        return (
            f"{kind} session stopped: it tried to run more than session_max_processes = "
            f"{limits.max_processes} processes at once ({hit.detail}); raise "
            "session_max_processes if the work needs more"
        )
    if hit.limit == "memory":
        return (
            f"{kind} session stopped: it used more than session_memory_mb = {limits.memory_mb} "
            f"MB of memory, its files in /tmp, /var/tmp and /run included ({hit.detail}); raise "
            "session_memory_mb if the work needs more"
        )
    if hit.limit == "unreadable":
        return (
            f"{kind} session stopped: it made a directory thirdshift cannot read ({hit.detail}), "
            "which would hide its disk use from session_disk_mb and session_max_files; a "
            "session must leave every directory of its Worktree, the Worktree's repository and "
            "its home readable: find the command that changed its mode in the session's log, "
            "and run it again"
        )
    if hit.limit == "files":
        return (
            f"{kind} session stopped: it made more than session_max_files = {limits.max_files} "
            f"files in its Worktree, the Worktree's repository and its home ({hit.detail}); "
            "raise session_max_files if the work needs more"
        )
    return (
        f"{kind} session stopped: it used more than session_disk_mb = {limits.disk_mb} MB of "
        f"disk in its Worktree, the Worktree's repository and its home ({hit.detail}); raise "
        "session_disk_mb if the work needs more"
    )


class SessionGroup(Protocol):
    """One session's group, made with its limits in place."""

    @property
    def name(self) -> str:
        """The group's name, unique to the session."""
        ...

    def enter(self, argv: Sequence[str]) -> list[str]:
        """An argv that runs ``argv`` with its first process already in the group, so that
        nothing it starts is ever outside it."""
        ...

    def hit(self) -> LimitHit | None:
        """The processes or memory limit the group met since it was made (a fork refused, an
        OOM kill), or None. Never raises: a counter that cannot be read says nothing."""
        ...

    def remove(self) -> None:
        """Kill whatever still runs in the group and remove it. Safe to call twice; never
        raises (a group that will not go is removed by a later start's sweep once empty,
        ``sweep_left_groups``)."""
        ...


class SessionGroups(Protocol):
    """Where sessions' groups are made."""

    @property
    def found(self) -> str:
        """What bounds sessions here, for ``doctor``, ``thirdshift config`` and the Run's first
        lines: ``cgroup v1``, ``cgroup v2`` (with where) or ``none``."""
        ...

    def make(self, name: str, limits: SessionLimits) -> SessionGroup:
        """A new group called ``name`` with ``limits`` set; SessionLimitsError when it cannot
        be made (the session then does not start)."""
        ...


@dataclass
class _UnboundedGroup:
    name: str

    def enter(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def hit(self) -> LimitHit | None:
        return None

    def remove(self) -> None:
        return None


@dataclass(frozen=True)
class Unbounded:
    """No group at all: sessions share the host unbounded (``unsafe_unbounded_sessions``)."""

    found: str = "none (unsafe_unbounded_sessions)"

    def make(self, name: str, limits: SessionLimits) -> SessionGroup:
        return _UnboundedGroup(name)


@dataclass
class ScriptedGroup:
    """A scripted session group: ``hits`` are what ``hit`` answers, one per call, the last
    repeated (none: no limit met). Records whether it was entered and removed."""

    name: str
    limits: SessionLimits
    hits: list[LimitHit | None] = field(default_factory=list)
    entered: list[list[str]] = field(default_factory=list)
    removed: bool = False

    def enter(self, argv: Sequence[str]) -> list[str]:
        self.entered.append(list(argv))
        return list(argv)

    def hit(self) -> LimitHit | None:
        if not self.hits:
            return None
        return self.hits.pop(0) if len(self.hits) > 1 else self.hits[0]

    def remove(self) -> None:
        self.removed = True


@dataclass
class ScriptedGroups:
    """Scripted ``SessionGroups`` for in-process tests: each ``make`` takes the next list of
    ``hits`` queued (the group's answers to ``hit``); ``made`` holds every group made."""

    hits: list[list[LimitHit | None]] = field(default_factory=list)
    fail_with: str | None = None
    """When set, ``make`` raises SessionLimitsError with it."""
    found: str = "scripted"
    made: list[ScriptedGroup] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def make(self, name: str, limits: SessionLimits) -> SessionGroup:
        if self.fail_with is not None:
            raise SessionLimitsError(self.fail_with)
        with self._lock:
            group = ScriptedGroup(name, limits, self.hits.pop(0) if self.hits else [])
            self.made.append(group)
        return group
