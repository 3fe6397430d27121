"""Progress lines: timestamped, on stderr, so stdout stays free for the URLs a script reads.

On a terminal, ``LiveProgress`` also keeps one status line under them, redrawn in place: the
current step, the time since the command started, and the CI checks still running. Anywhere
else (a pipe, a log file, an Actions runner) the lines are all there is.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

# C0 controls but tab and newline, DEL, and C1: what a terminal would act on (cursor moves,
# colours, OSC 52 writes to the clipboard, a title change) rather than show.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` safe to write to a terminal: control characters an agent's output may carry are
    shown as ``�`` instead of acted on."""
    return _CONTROLS.sub("\ufffd", text)


class Progress:
    """Writes one timestamped line per call. The stream is chosen by the composition root."""

    def __init__(self, stream: TextIO | None = None, *, one_line: bool = False) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._one_line = one_line

    def __call__(self, line: str) -> None:
        if self._one_line:
            # Where each line is read for commands (an Actions runner), text from an issue or an
            # agent must not start a line of its own.
            for breaking in ("\r\n", "\r", "\n", "\u2028", "\u2029", "\x85"):
                line = line.replace(breaking, " ⏎ ")
        stamp = datetime.now().astimezone().strftime("%H:%M:%S")
        # The terminal may be gone (SIGHUP): saving the work matters more than the line.
        with suppress(OSError, ValueError):
            self._stream.write(f"[{stamp}] {printable(line)}\n")
            self._stream.flush()


def format_duration(seconds: float) -> str:
    """``42s``, ``5m 32s``, ``1h 03m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {(whole % 3600) // 60:02d}m"


# "CI on abc1234: 2 of 3 checks still running", as the CI watch says it.
_CI_RUNNING = re.compile(r"^CI on (\w+): (\d+) of (\d+) checks? still running")
_CI_DONE = ("CI passed on ", "CI failed on ", "no CI checks appeared on ")
_CLEAR_LINE = "\r\x1b[2K"


@dataclass(frozen=True)
class Status:
    """What the status line shows: the current step and, while CI runs, its pending checks."""

    step: str = "starting"
    ci: str | None = None


def next_status(status: Status, line: str) -> Status:
    """The status after one progress line: the line is the current step; a CI count is kept
    until CI has an answer."""
    running = _CI_RUNNING.match(line)
    if running:
        return Status(step=line, ci=f"CI: {running.group(2)} of {running.group(3)} pending")
    if line.startswith(_CI_DONE):
        return Status(step=line)
    return Status(step=line, ci=status.ci)


def status_line(status: Status, elapsed_seconds: float, width: int) -> str:
    """One line, at most ``width`` characters: elapsed time, CI, then as much of the step as
    fits."""
    head = f"▸ {format_duration(elapsed_seconds)}"
    if status.ci:
        head += f" · {status.ci}"
    line = f"{head} · {printable(' '.join(status.step.split()))}"
    if len(line) > width:
        line = line[: max(width - 1, 0)] + "…" if width > 1 else line[:width]
    return line


class LiveProgress:
    """``Progress`` for a terminal: each line scrolls up as usual, and under them one status
    line is redrawn in place, every ``tick_seconds`` for the elapsed time. ``close`` takes the
    status line away (the lines stay)."""

    def __init__(
        self,
        stream: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        tick_seconds: float = 1.0,
        width: Callable[[], int] | None = None,
    ) -> None:
        self._stream = stream
        self._lines = Progress(stream)
        self._clock = clock
        self._started = clock()
        self._status = Status()
        self._width = width or (lambda: _terminal_width(stream))
        # Re-entrant: a signal handler on the main thread writes a line while the main thread
        # may be inside a write already.
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._ticker = threading.Thread(
            target=self._tick, args=(tick_seconds,), name="thirdshift-status", daemon=True
        )
        self._ticker.start()

    def __call__(self, line: str) -> None:
        with self._lock:
            if self._closed.is_set():
                self._lines(line)
                return
            self._write(_CLEAR_LINE)
            self._lines(line)
            self._status = next_status(self._status, line)
            self._draw()

    def close(self) -> None:
        with self._lock:
            if not self._closed.is_set():
                self._closed.set()
                self._write(_CLEAR_LINE)
        self._ticker.join(timeout=2)

    def _tick(self, seconds: float) -> None:
        while not self._closed.wait(seconds):
            with self._lock:
                if not self._closed.is_set():
                    self._draw()

    def _draw(self) -> None:
        self._write(
            _CLEAR_LINE + status_line(self._status, self._clock() - self._started, self._width())
        )

    def _write(self, text: str) -> None:
        # The terminal may be gone (SIGHUP): saving the work matters more than the display.
        with suppress(OSError, ValueError):
            self._stream.write(text)
            self._stream.flush()


def _terminal_width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80
    return columns if columns >= 20 else 80  # a terminal that says no size (0) has one


def progress_for(stream: TextIO, environ: dict[str, str] | None = None) -> Progress | LiveProgress:
    """The live display on a terminal, plain lines anywhere else. On an Actions runner every
    line is read for workflow commands, so there no line may hold a newline."""
    environ = dict(os.environ) if environ is None else environ
    on_runner = environ.get("GITHUB_ACTIONS") == "true"
    interactive = not on_runner and environ.get("TERM") != "dumb" and _isatty(stream)
    return LiveProgress(stream) if interactive else Progress(stream, one_line=on_runner)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False
