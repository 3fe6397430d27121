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

Finding the whole tree of the CLI, and stopping it, is ``process_tree``'s: ``run_supervised``
gives the CLI's environment the tree marker that module looks for.
"""

from __future__ import annotations

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
from thirdshift.harnesses.process_tree import ProcessTree, has_exited, stop_tree, sweep
from thirdshift.records import Watchdogs

STDERR_TAIL_BYTES: Final = 16 * 1024
# Not a THIRDSHIFT_* name: those are settings, and a thirdshift run inside a session (a repository
# that tests thirdshift itself) would refuse an unknown one.
MARKER_VARIABLE: Final = "TS_SESSION_TREE"
"""Added to the CLI's environment; its value is a fresh random token per run."""

_LOOK_SECONDS: Final = 1.0
"""How often the running tree is looked at, to remember its members."""
_DRAIN_SECONDS: Final = 5.0
"""How long to wait for stdout's end once the tree is dead (a process that escaped the sweep
may still hold the pipe)."""
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
    tree = ProcessTree(process.pid, f"{MARKER_VARIABLE}={token}".encode())
    output = _Output(process.pid, stdout, stderr, line_cap_bytes)
    handed = _HandOn(output.lines, on_line, on_cut, stops.clock.monotonic)
    swept = False
    try:
        stopped_by = _watch(process.pid, tree, handed, result_seen, stops, started)
        sweep(tree)
        swept = True
        _drain(handed)
    finally:
        if not swept:  # on_line or result_seen raised: the tree dies all the same
            sweep(tree)
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
        monotonic: Callable[[], float],
    ) -> None:
        self._lines = lines
        self._on_line = on_line
        self._on_cut = on_cut
        self._monotonic = monotonic
        self.eof = False
        """True once stdout's end was taken: nothing more will come."""
        self.arrived = 0.0
        """When the last line handed on arrived (before it was handed on)."""

    def next(self, timeout: float | None) -> bool:
        """Hand on the next line if one comes within ``timeout`` (None: however long it takes);
        True when one was handed on, False on a wait that ran out or at stdout's end. After
        stdout's end nothing comes: a wait with a timeout still takes its time, so a watcher
        of a CLI that closed its stdout but runs on does not spin."""
        if self.eof:
            if timeout:
                time.sleep(timeout)
            return False
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return False
        self.arrived = self._monotonic()
        if line is None:
            self.eof = True
        elif isinstance(line, CutLine):
            self._on_cut(line)
        else:
            self._on_line(line)
        return line is not None


def _watch(
    pid: int,
    tree: ProcessTree,
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
            last_line = handed.arrived
            if result_at is None and result_seen():
                result_at = clock.monotonic()
        now = clock.monotonic()
        if now < next_check:
            continue
        next_check = now + stops.tick_seconds
        if result_at is None and result_seen():
            result_at = now
        if has_exited(pid):
            return None
        since_result = None if result_at is None else now - result_at
        stopped_by = stops.tripped(now - started, now - last_line, since_result)
        if stopped_by is not None:
            stop_tree(tree, stops.stop_signals, stops.grace_seconds, lambda: has_exited(pid))
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
