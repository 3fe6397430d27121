"""One session while its Harness's CLI runs, as the process supervisor and the egress proxy
see it: every stdout line (or cut line) they hand on goes to the Session log, scrubbed and up to
its cap, then to the Harness's stream reader, whose progress lines are printed and whose Session
events go to the session's event writer, numbered with the proxy's refusals; and what the
session has cost so far is checked against the cost budgets, halting it once one is reached.
The Session limit the watch of its cgroup met, if any, is kept with it too.

``CliOutside`` builds one ``LiveSession`` per session and reads its outcome back when the CLI is
done.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from thirdshift.harnesses import CutLine, Harness, StreamReader
from thirdshift.harnesses.egress import Refusal
from thirdshift.harnesses.limits import LimitHit
from thirdshift.records import SessionEvent, Usage, at_least
from thirdshift.scrub import Scrubber
from thirdshift.sessions.event_writer import EventWriter
from thirdshift.sessions.ledger import Budgets, Spent, budget_reached


class Meter:
    """What one session has cost so far, and the cost budget that stops it while it runs."""

    def __init__(
        self,
        harness: Harness,
        resumed: Usage | None,
        price: Callable[[Usage], Usage],
        budgets: Budgets,
        spent: Spent | None,
    ) -> None:
        self._harness = harness
        self._resumed = resumed
        self._price = price
        self._budgets = budgets
        self._spent = spent
        self.probed: str | None = None
        """The CLI's version, when its stream names none."""
        # The most this session was measured at: the stream is the agent's to write into, so a
        # later figure never lowers one a budget was already checked against.
        self._counted = Usage()
        # Set when the session reaches a cost budget (or its files fail, ``LiveSession``): the
        # supervisor then stops it as it stops an interrupted one (the Harness's signals, its
        # grace), so nothing is cut short.
        self.halt = threading.Event()
        self.over: str | None = None
        """The budget the session reached, once it has."""

    def measured(self, usage: Usage) -> Usage:
        """``usage`` as this session's own (a Resume's, net of what it resumed), priced, and
        never below a figure already measured."""
        if self._resumed is not None:
            usage = self._harness.resume_usage(usage, self._resumed)
        if usage.cli_version is None and self.probed is not None:
            usage = replace(usage, cli_version=self.probed)
        self._counted = at_least(self._counted, self._price(usage))
        return self._counted

    @property
    def watching(self) -> bool:
        """True while a budget may still stop the session."""
        return self._spent is not None and not self.halt.is_set()

    def check(self, usage_so_far: Usage) -> None:
        """Halt the session once what it has cost so far reaches a budget."""
        if self._spent is None:
            return
        so_far = self.measured(usage_so_far)
        if cause := budget_reached(self._budgets, self._spent, so_far.cost_usd):
            self.over = cause
            self.halt.set()


class SessionLog:
    """The Session log of one session as it is written: each line scrubbed, kept up to its cap
    (``session_log_cap_bytes``), then counted; ended with thirdshift's notes on the CLI.

    A write the file refuses (a full disk, an I/O error) raises nothing: it is kept in
    ``failed``, and nothing more is written (adr/0041)."""

    def __init__(self, log: BinaryIO, cap: int, scrub: Scrubber, where: Path | None = None) -> None:
        self._log = log
        self._kept = _LogCap(cap)
        self._scrub = scrub
        self.where = where
        """The directory the log is in, for a cause naming it."""
        self.failed: OSError | None = None
        """The error of the first write the file refused, once one was."""

    @classmethod
    @contextmanager
    def opened(cls, path: Path, cap: int, scrub: Scrubber) -> Iterator[SessionLog]:
        """The Session log at ``path``, appended to, closed at the end of the block. Raises
        ``OSError`` when it cannot be opened; its closing raises nothing (what it could not
        write is in ``failed`` already)."""
        handle = path.open("ab")
        log = cls(handle, cap, scrub, path.parent)
        try:
            yield log
        finally:
            try:
                handle.close()
            except OSError as error:  # the buffer a refused write left behind
                log.failed = log.failed or error

    def keep(self, text: str) -> str | None:
        """Write one line; the warning to print when it is the first line past the cap."""
        data = self._scrub(text).encode() + b"\n"
        if self._kept.take(len(data)):
            self._write(data)
        elif self._kept.dropped_lines == 1:
            return (
                f"the Session log reached its cap ({_size(self._kept.cap)}, "
                "session_log_cap_bytes): later lines are counted, not kept"
            )
        return None

    def end(self, stderr_tail: str) -> None:
        """The notes after the stream, outside the cap: the CLI's stderr, and what was
        dropped."""
        if stderr_tail.strip():
            # The CLI's own complaints (a bad key, a crash) belong with its stream.
            note = {"type": "thirdshift.stderr", "text": stderr_tail}
            self._write(self._scrub(json.dumps(note)).encode() + b"\n")
        kept = self._kept
        if kept.dropped_lines:
            capped = {
                "type": "thirdshift.log_capped",
                "cap_bytes": kept.cap,
                "dropped_lines": kept.dropped_lines,
                "dropped_bytes": kept.dropped_bytes,
            }
            self._write(json.dumps(capped).encode() + b"\n")

    def _write(self, data: bytes) -> None:
        if self.failed is not None:
            return
        try:
            self._log.write(data)
            self._log.flush()
        except OSError as error:
            # Raised here it would reach the process supervisor, which kills the CLI at once;
            # the session's owner stops it with its stop signals instead.
            self.failed = error


class LiveSession:
    """One session while its CLI runs, as the supervisor's and the egress proxy's callbacks
    see it: each line goes to its Session log, then to its Harness's stream reader, whose
    progress lines are printed and whose Session events are recorded, and its cost so far is
    checked against the budgets."""

    def __init__(
        self,
        kind: str,
        *,
        log: SessionLog,
        reader: StreamReader,
        writer: EventWriter,
        meter: Meter,
        worktree: Path,
        scrub: Scrubber,
        progress: Callable[[str], None],
    ) -> None:
        self._kind = kind
        self.log = log
        self.reader = reader
        self._writer = writer
        self.meter = meter
        self._prefix = f"{worktree}/"
        self._scrub = scrub
        self._progress = progress
        # The stream's events and the egress proxy's refusals share one numbering: the proxy
        # reports from its own thread.
        self._numbering = _Numbering()
        self.file_failure: FileFailure | None = None
        """What stopped the session when its Session log or its events could not be written."""
        self.proxy_failure: str | None = None
        """Why the session's egress proxy stopped, when it did (the session is halted)."""
        self.limit_hit: LimitHit | None = None
        """The Session limit the session met, once its watch has ended (it halted it)."""

    def on_line(self, line: bytes) -> None:
        self._keep(line.decode("utf-8", "replace"))
        observation = self.reader.feed(line)
        for condensed in observation.progress:
            self._progress(f"{self._kind}: {condensed.replace(self._prefix, '')}")
        if observation.events:
            self._record(observation.events)
        # Once the turn's result is out, the session has done its work: the check after it
        # decides, and the session is recorded as ended, not stopped.
        if self.meter.watching and not self.reader.result_seen:
            self.meter.check(self.reader.usage_so_far)

    def on_cut(self, cut_line: CutLine) -> None:
        self._keep(cut_line.head.decode("utf-8", "replace"))
        note = {
            "type": "thirdshift.cut",
            "kept_bytes": len(cut_line.head),
            "dropped_bytes": cut_line.dropped_bytes,
        }
        self._keep(json.dumps(note))
        said = (
            f"a stdout line over the cap ({_size(len(cut_line.head))}) was cut: "
            f"{cut_line.dropped_bytes} bytes dropped"
        )
        self._progress(f"{self._kind}: {said}")
        self._record([SessionEvent(seq=0, kind="cut", summary=said)])

    def refused(self, refusal: Refusal) -> None:
        self._progress(f"{self._kind}: {refusal.line}")
        self._record(
            [
                SessionEvent(
                    seq=0,
                    kind="network",
                    summary=refusal.line,
                    target=f"{refusal.host}:{refusal.port}",
                )
            ]
        )

    def proxy_failed(self, why: str) -> None:
        """The session's egress proxy stopped (adr/0040): without it the agent has no network,
        so the session is halted, and only this session."""
        if self.proxy_failure is not None:
            return
        self.proxy_failure = why
        self._progress(f"{self._kind}: {why}; stopping the session")
        self.meter.halt.set()

    def limits_watched(self, hit: LimitHit | None) -> None:
        """The watch of the session's limits ended, with the limit it met (None: none)."""
        self.limit_hit = hit

    def _keep(self, text: str) -> None:
        if (warning := self.log.keep(text)) is not None:
            self._progress(f"{self._kind}: {warning}")
        self._stop_on_file_error()

    def _record(self, events: Sequence[SessionEvent]) -> None:
        self._writer.put(
            [_scrubbed(replace(e, seq=self._numbering.next()), self._scrub) for e in events]
        )
        self._stop_on_file_error()

    def _stop_on_file_error(self) -> None:
        """Once the Session log or the event writer meets a file error, the session is halted
        (the supervisor stops the CLI with its stop signals): a session nobody can record is
        not worth its cost, and on a full disk the agent cannot work anyway (adr/0041)."""
        if self.file_failure is not None:
            return
        if self.log.failed is not None:
            failure = FileFailure("writing the Session log", self.log.failed, self.log.where)
        elif self._writer.failed is not None:
            failure = FileFailure("writing the Session events", self._writer.failed, None)
        else:
            return
        self.file_failure = failure
        reason = failure.error.strerror or failure.error.__class__.__name__
        self._progress(f"{self._kind}: {failure.doing} failed ({reason}); stopping the session")
        self.meter.halt.set()


@dataclass(frozen=True)
class FileFailure:
    """A file a session writes through refused a write: what was being written, and why."""

    doing: str
    error: OSError
    where: Path | None
    """The directory at fault, when known."""


def _scrubbed(event: SessionEvent, scrub: Scrubber) -> SessionEvent:
    return SessionEvent(
        seq=event.seq,
        kind=event.kind,
        summary=scrub(event.summary),
        tool=event.tool,
        target=None if event.target is None else scrub(event.target),
        # The stream is the agent's to forge: an exit status fits the store's column.
        exit_status=(
            None if event.exit_status is None else max(-(2**31), min(event.exit_status, 2**31 - 1))
        ),
        created_at=event.created_at,
    )


class _LogCap:
    """How much of a Session log is kept: lines up to ``cap`` bytes in all, then a count."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.written = 0
        self.dropped_lines = 0
        self.dropped_bytes = 0

    def take(self, size: int) -> bool:
        """True when a line of ``size`` bytes still fits (and is counted as written)."""
        if self.dropped_lines == 0 and self.written + size <= self.cap:
            self.written += size
            return True
        self.dropped_lines += 1
        self.dropped_bytes += size
        return False


def _size(count: int) -> str:
    """``8 MiB``, ``256 KiB`` or ``1000 bytes``."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= factor and count % factor == 0:
            return f"{count // factor} {unit}"
    return f"{count} bytes"


class _Numbering:
    """Session events' ``seq``, from 1, for two threads (the stream's and the proxy's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last += 1
            return self._last
