"""Supervising one agent CLI process: spawn it, follow its stdout, watch it, stop its whole tree.

``run_supervised`` starts the CLI in its own session, hands every stdout line to the caller in
order, keeps the last 16 KiB of stderr, and stops the process when a watchdog trips (idle, wall
clock, or too long after the final result) or the caller asks it to. When the session is over,
by a stop or by a normal exit, nothing the CLI started may keep running.

Output is bounded (adr/0029): a stdout line longer than the cap is cut, its head handed on as a
cut line with the count of what was dropped, the rest read and thrown away as it comes; lines
read and not yet taken by the caller are held up to a few caps' worth, after which the pump waits
(and the CLI with it). The CLI's stdout and stderr are Unix sockets, not pipes: the agent's own
commands run as the same user and could open a pipe again through ``/proc/<cli pid>/fd/1`` and
write stream lines of their own into it; a socket cannot be opened so.

Finding the whole tree is the hard part. The agent CLIs start their tool commands in process
groups or sessions of their own, so signalling the CLI's group misses them, and a tool command
whose parent has exited is re-parented to init, where a walk of ``/proc`` parent links from the
CLI no longer finds it. A process belongs to the tree (``_Tree``) when any of these holds:

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
import queue
import secrets
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import ThirdshiftError
from thirdshift.records import Watchdogs

STDERR_TAIL_BYTES: Final = 16 * 1024
# Not a THIRDSHIFT_* name: those are settings, and a thirdshift run inside a session (a repository
# that tests thirdshift itself) would refuse an unknown one.
MARKER_VARIABLE: Final = "TS_SESSION_TREE"
"""Added to the CLI's environment; its value is a fresh random token per run."""

_LOOK_SECONDS: Final = 1.0
"""How often the running tree is looked at, to remember its members."""
_SWEEP_SECONDS: Final = 5.0
"""How long the final SIGKILL sweep keeps killing before it gives up."""
_DRAIN_SECONDS: Final = 5.0
"""How long to wait for stdout's end once the tree is dead (a process that escaped the sweep
may still hold the pipe)."""
_POLL_SECONDS: Final = 0.02
_READ_BYTES: Final = 64 * 1024
LINE_CAP_BYTES: Final = 8 * 1024 * 1024
"""The longest stdout line handed on whole (``session_line_cap_bytes``)."""
_HELD_LINES_CAPS: Final = 2
"""How many caps' worth of read lines may wait for the caller before the pump waits."""


class ProcessStartError(ThirdshiftError):
    """The agent CLI cannot be started: its program is not found on PATH or is not executable,
    or its working directory does not exist. The message names the program and the fix."""


@dataclass(frozen=True)
class ProcessEnding:
    """How a supervised process ended."""

    exit_status: int | None
    """``Popen.returncode``: negative when the process died of that signal."""
    stopped_by: str | None
    """None when it exited by itself, else "idle", "wall", "post-result", "interrupt" or "halt"."""
    stderr_tail: str
    """The last 16 KiB of stderr, decoded with ``errors="replace"``."""
    duration_seconds: float


@dataclass(frozen=True)
class CutLine:
    """A stdout line longer than the cap: its first ``len(head)`` bytes, and how many bytes of
    it after those were dropped, unread by anyone, up to its newline (or the stream's end)."""

    head: bytes
    dropped_bytes: int


def run_supervised(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    on_line: Callable[[bytes], None],
    result_seen: Callable[[], bool],
    watchdogs: Watchdogs,
    stop_signals: Sequence[signal.Signals],
    grace_seconds: float,
    interrupt: threading.Event,
    tick_seconds: float = 0.1,
    clock: Clock | None = None,
    halt: threading.Event | None = None,
    on_cut: Callable[[CutLine], None] = lambda _cut: None,
    line_cap_bytes: int = LINE_CAP_BYTES,
) -> ProcessEnding:
    """Run ``argv`` to its end and kill whatever it left running.

    The process gets ``env`` plus the tree marker, stdin from /dev/null, and its own session.
    ``on_line`` receives every stdout line without its newline, in order, on the calling
    thread; ``result_seen`` is polled after each line and on every tick. Raises
    ``ProcessStartError`` when the program cannot be started. The watchdogs read ``clock``
    (the system's by default). ``halt``, when set (by ``on_line``, say), stops the process the
    way an interrupt does, with ``stopped_by`` ``halt``: the caller's own reason to stop it.
    A line longer than ``line_cap_bytes`` goes to ``on_cut`` instead of ``on_line``, in its
    place in the order.
    """
    clock = clock or SystemClock()
    stops = _Stops(watchdogs, stop_signals, grace_seconds, interrupt, halt, clock, tick_seconds)
    token = secrets.token_hex(8)
    started = clock.monotonic()
    process, stdout, stderr = _spawn(argv, cwd, {**env, MARKER_VARIABLE: token})
    tree = _Tree(process.pid, f"{MARKER_VARIABLE}={token}".encode())
    output = _Output(process.pid, stdout, stderr, line_cap_bytes)
    handed = _HandOn(output.lines, on_line, on_cut)
    swept = False
    try:
        stopped_by = _watch(process.pid, tree, handed, result_seen, stops, started)
        _sweep(tree)
        swept = True
        _drain(handed)
    finally:
        if not swept:  # on_line or result_seen raised: the tree dies all the same
            _sweep(tree)
        process.wait()
        output.close()
    while handed.next(timeout=None):
        pass  # what the pump read before it was told to stop, to stdout's end
    return ProcessEnding(
        exit_status=process.returncode,
        stopped_by=stopped_by,
        stderr_tail=output.tail.text(),
        duration_seconds=clock.monotonic() - started,
    )


@dataclass(frozen=True)
class _Stops:
    """When the supervisor stops the process, and how (``run_supervised``'s arguments)."""

    watchdogs: Watchdogs
    stop_signals: Sequence[signal.Signals]
    grace_seconds: float
    interrupt: threading.Event
    halt: threading.Event | None
    clock: Clock
    tick_seconds: float

    def tripped(self, elapsed: float, quiet: float, since_result: float | None) -> str | None:
        """What stops the process now (``stopped_by``), or None."""
        return _tripped(self.watchdogs, self.interrupt, elapsed, quiet, since_result) or (
            "halt" if self.halt is not None and self.halt.is_set() else None
        )


class _Output:
    """The CLI's stdout and stderr, drained by a pump thread of their own: stdout's lines onto
    ``lines``, the end of stderr into ``tail``."""

    def __init__(self, pid: int, stdout: socket.socket, stderr: socket.socket, cap: int) -> None:
        self._stdout = stdout
        self._stderr = stderr
        self._abandon = threading.Event()
        self.lines = _Lines(_HELD_LINES_CAPS * cap, self._abandon)
        self.tail = _Tail(STDERR_TAIL_BYTES)
        self._pump = threading.Thread(
            target=_pump,
            args=(stdout.fileno(), stderr.fileno(), self.lines, self.tail, self._abandon, cap),
            name=f"thirdshift-pump-{pid}",
            daemon=True,
        )
        self._pump.start()

    def close(self) -> None:
        """Stop the pump (it no longer waits for room in ``lines``) and close our ends."""
        self._abandon.set()
        self._pump.join()
        self._stdout.close()
        self._stderr.close()


class _HandOn:
    """Hands the pump's stdout lines to the caller, in order: a cut line to ``on_cut``."""

    def __init__(
        self,
        lines: _Lines,
        on_line: Callable[[bytes], None],
        on_cut: Callable[[CutLine], None],
    ) -> None:
        self._lines = lines
        self._on_line = on_line
        self._on_cut = on_cut
        self.eof = False
        """True once stdout's end was taken: nothing more will come."""

    def next(self, timeout: float | None) -> bool:
        """Hand on the next line if one comes within ``timeout`` (None: however long it takes);
        True when one was handed on, False on a wait that ran out or at stdout's end."""
        if self.eof:
            return False
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return False
        if line is None:
            self.eof = True
        elif isinstance(line, CutLine):
            self._on_cut(line)
        else:
            self._on_line(line)
        return line is not None


def _watch(
    pid: int,
    tree: _Tree,
    handed: _HandOn,
    result_seen: Callable[[], bool],
    stops: _Stops,
    started: float,
) -> str | None:
    """Hand on lines until the process exits (None) or something stops it, its tree signalled
    (what stopped it: ``ProcessEnding.stopped_by``). Looks at the tree every ``_LOOK_SECONDS``
    to remember its members."""
    clock = stops.clock
    last_line = started
    result_at: float | None = None
    next_check = started
    next_look = started + _LOOK_SECONDS
    while True:
        if handed.next(timeout=max(0.0, next_check - clock.monotonic())):
            last_line = clock.monotonic()
            if result_at is None and result_seen():
                result_at = clock.monotonic()
        now = clock.monotonic()
        if now < next_check:
            continue
        next_check = now + stops.tick_seconds
        if result_at is None and result_seen():
            result_at = now
        if _has_exited(pid):
            return None
        since_result = None if result_at is None else now - result_at
        stopped_by = stops.tripped(now - started, now - last_line, since_result)
        if stopped_by is not None:
            _stop(tree, stops.stop_signals, stops.grace_seconds, lambda: _has_exited(pid))
            return stopped_by
        if now >= next_look:
            next_look = now + _LOOK_SECONDS
            tree.members(use_marker=False)


def _drain(handed: _HandOn) -> None:
    """Once the tree is dead, take what the pump still reads as it comes (a pump with lines
    held up to the bound waits for this), until stdout ends or a process that escaped the
    sweep holds it open past ``_DRAIN_SECONDS``."""
    deadline = time.monotonic() + _DRAIN_SECONDS
    while not handed.eof and (left := deadline - time.monotonic()) > 0:
        if not handed.next(timeout=left):
            break


def stop_process_tree(
    pid: int, stop_signals: Sequence[signal.Signals], grace_seconds: float
) -> None:
    """Stop ``pid`` and every process of its tree: each signal in turn to every member's group
    and pid, up to ``grace_seconds`` apart until ``pid`` exits, then SIGKILL to every member
    still alive. ``pid`` itself is not reaped: if it is our child, the caller waits for it.
    Without ``run_supervised``'s marker, an orphan that left the tree's groups and sessions
    before this call is out of reach."""
    tree = _Tree(pid, marker=None)
    _stop(tree, stop_signals, grace_seconds, lambda: not _running(pid))
    _sweep(tree)


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


class _Tree:
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


def _stop(
    tree: _Tree,
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
    _sweep(tree)


def _sweep(tree: _Tree) -> None:
    """SIGKILL every live member of the tree until none is left (or the sweep times out)."""
    deadline = time.monotonic() + _SWEEP_SECONDS
    while (members := tree.members()) and time.monotonic() < deadline:
        _signal_all(members, signal.SIGKILL, tree.root)
        time.sleep(_POLL_SECONDS)


def _has_exited(pid: int) -> bool:
    """True once our child ``pid`` has exited, without reaping it: while it is a zombie its
    pid, group and session numbers cannot be reused, so the sweep cannot hit a stranger."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _running(pid: int) -> bool:
    proc = _read_stat(pid)
    return proc is not None and proc.live


def _tripped(
    watchdogs: Watchdogs,
    interrupt: threading.Event,
    elapsed: float,
    quiet: float,
    since_result: float | None,
) -> str | None:
    if interrupt.is_set():
        return "interrupt"
    if quiet >= watchdogs.idle_seconds:
        return "idle"
    if elapsed >= watchdogs.wall_seconds:
        return "wall"
    if since_result is not None and since_result >= watchdogs.post_result_seconds:
        return "post-result"
    return None


def _spawn(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str]
) -> tuple[subprocess.Popen[bytes], socket.socket, socket.socket]:
    """The started process, and our ends of its stdout and stderr."""
    program = argv[0] if argv else ""
    if not cwd.is_dir():
        raise ProcessStartError(
            f"cannot start {program}: its working directory {cwd} does not exist"
        )
    # Socket pairs, not pipes: open() of /proc/<pid>/fd/<n> gives ENXIO for a socket, so a
    # process of the agent's cannot reopen the CLI's stdout to write lines of its own there.
    stdout, child_stdout = socket.socketpair()
    stderr, child_stderr = socket.socketpair()
    try:
        child_stdout.shutdown(socket.SHUT_RD)
        child_stderr.shutdown(socket.SHUT_RD)
        stdout.shutdown(socket.SHUT_WR)
        stderr.shutdown(socket.SHUT_WR)
        return (
            _popen(argv, cwd, env, child_stdout.fileno(), child_stderr.fileno()),
            stdout,
            stderr,
        )
    except BaseException:
        stdout.close()
        stderr.close()
        raise
    finally:
        # Only the child holds its ends: stdout's end is seen when the child's tree closes them.
        child_stdout.close()
        child_stderr.close()


def _popen(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdout: int, stderr: int
) -> subprocess.Popen[bytes]:
    program = argv[0] if argv else ""
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise ProcessStartError(
            f"cannot start {program}: no such program (PATH={env.get('PATH', '')}); "
            f"install it or put it on PATH"
        ) from exc
    except PermissionError as exc:
        raise ProcessStartError(
            f"cannot start {program}: it is not executable; check its install (chmod +x)"
        ) from exc
    except OSError as exc:  # E2BIG for an over-long prompt, ENOMEM, ...
        raise ProcessStartError(
            f"cannot start {program}: {exc.strerror or exc}; if the prompt is very long, "
            "shorten the issue's text"
        ) from exc


class _Tail:
    """The last ``limit`` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._buffer = bytearray()

    def add(self, chunk: bytes) -> None:
        self._buffer += chunk
        if len(self._buffer) > 2 * self._limit:
            del self._buffer[: -self._limit]

    def text(self) -> str:
        return bytes(self._buffer[-self._limit :]).decode(errors="replace")


class _Lines:
    """The stdout lines the pump has read and the caller not yet taken, in order, then None.
    Up to ``limit`` bytes are held (one line more may go over it); past that ``put`` waits for
    the caller to take some, unless ``abandon`` is set."""

    def __init__(self, limit: int, abandon: threading.Event) -> None:
        self._limit = limit
        self._abandon = abandon
        self._items: queue.Queue[bytes | CutLine | None] = queue.Queue()
        self._held = 0
        self._room = threading.Condition()

    def put(self, item: bytes | CutLine | None) -> None:
        size = _size(item)
        with self._room:
            while self._held and self._held + size > self._limit and not self._abandon.is_set():
                self._room.wait(0.05)
            self._held += size
        self._items.put(item)

    def get(self, timeout: float | None = None) -> bytes | CutLine | None:
        """The next item; raises ``queue.Empty`` when none came within ``timeout``."""
        item = self._items.get(timeout=timeout)
        with self._room:
            self._held -= _size(item)
            self._room.notify_all()
        return item


def _size(item: bytes | CutLine | None) -> int:
    if item is None:
        return 0
    return len(item.head) if isinstance(item, CutLine) else len(item)


def _pump(
    stdout: int,
    stderr: int,
    lines: _Lines,
    tail: _Tail,
    abandon: threading.Event,
    cap: int,
) -> None:
    """Drain both pipes until stdout and stderr end (or ``abandon`` is set): stdout as lines
    onto ``lines`` and then None, each line of up to ``cap`` bytes whole and a longer one as a
    ``CutLine`` (never more than ``cap`` bytes of a line held); stderr into ``tail``."""
    selector = selectors.DefaultSelector()
    selector.register(stdout, selectors.EVENT_READ)
    selector.register(stderr, selectors.EVENT_READ)
    partial = bytearray()
    dropped = 0  # bytes of the line in hand dropped past the cap; >0: the line is being cut
    try:
        while selector.get_map() and not abandon.is_set():
            for key, _ in selector.select(timeout=0.05):
                chunk = os.read(key.fd, _READ_BYTES)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                if key.fd == stderr:
                    tail.add(chunk)
                    continue
                start = 0
                while start < len(chunk):
                    newline = chunk.find(b"\n", start)
                    end = len(chunk) if newline == -1 else newline
                    room = cap - len(partial)
                    if dropped or end - start > room:
                        partial += chunk[start : start + max(room, 0)]
                        dropped += end - start - max(room, 0)
                    else:
                        partial += chunk[start:end]
                    if newline == -1:
                        break
                    lines.put(CutLine(bytes(partial), dropped) if dropped else bytes(partial))
                    partial.clear()
                    dropped = 0
                    start = newline + 1
    finally:
        selector.close()
        if dropped:
            lines.put(CutLine(bytes(partial), dropped))
        elif partial:
            lines.put(bytes(partial))
        lines.put(None)
