"""Progress lines: timestamped, on stderr, so stdout stays free for the URLs a script reads."""

from __future__ import annotations

import sys
from contextlib import suppress
from datetime import datetime
from typing import TextIO


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
            self._stream.write(f"[{stamp}] {line}\n")
            self._stream.flush()


def format_duration(seconds: float) -> str:
    """``42s``, ``5m 32s``, ``1h 03m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {(whole % 3600) // 60:02d}m"
