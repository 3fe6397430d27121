"""A Session log read back: condensed by its Harness's stream reader into exactly the progress
lines the Run printed, or raw, and followed while its session is still running (``tail -f``).

The file is read for real; the session's row is read through ``_Rows`` (the ``Store`` is the
real one, a small in-memory object the scripted one), and every wait goes through the Clock,
so Ctrl-C ends a follow at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from thirdshift.clock import Clock
from thirdshift.errors import NotRecorded
from thirdshift.harnesses import StreamReader
from thirdshift.records import Run, SessionRecord
from thirdshift.run_states import RunState

POLL_SECONDS = 0.5
"""How often a follow looks at the file and the session's row."""


class _Rows(Protocol):
    """Where a follow learns whether the session is still running."""

    def get_run(self, run_id: int) -> Run | None:
        """The Run, or None if the database has none by that id."""
        ...

    def run_sessions(self, run_id: int) -> list[SessionRecord]:
        """The Run's sessions, oldest first, as they are now."""
        ...

    def holds_lease(self, run: Run) -> bool:
        """Whether ``run`` still holds its issue's Lease (a live Run renews it)."""
        ...


def pick_session(run: Run, sessions: Sequence[SessionRecord], kind: str | None) -> SessionRecord:
    """The Run's last session, or its last of Session kind ``kind``; NotRecorded naming what
    there is when there is none."""
    chosen = [s for s in sessions if kind is None or s.kind == kind]
    if chosen:
        return chosen[-1]
    if not sessions:
        raise NotRecorded(
            f"Run {run.id} has no sessions (yet); `thirdshift show {run.id}` shows what it did"
        )
    kinds = ", ".join(dict.fromkeys(s.kind for s in sessions))
    raise NotRecorded(
        f"Run {run.id} has no session of kind '{kind}'; its sessions are: {kinds} "
        "(pass one of them to --session)"
    )


class Condenser:
    """Turns Session log lines into what people read. ``reader`` is a fresh stream reader of
    the session's Harness (None: raw lines); ``worktree`` is the prefix the Run cut from paths
    in its progress lines."""

    def __init__(
        self,
        kind: str,
        reader: StreamReader | None,
        *,
        worktree: str | None = None,
        scrub: Callable[[str], str] = str,
    ) -> None:
        self._kind = kind
        self._reader = reader
        self._worktree = worktree.rstrip("/") + "/" if worktree else None
        self._scrub = scrub

    def lines(self, line: bytes) -> list[str]:
        # The log was scrubbed as it was written; scrubbing again costs little and keeps the
        # one-scrubber rule true for this outbound text as well.
        if self._reader is None:
            return [self._scrub(line.decode("utf-8", "replace"))]
        shown = [f"{self._kind}: {p}" for p in self._reader.feed(line).progress]
        shown += self._notes(line)
        if self._worktree is not None:
            shown = [text.replace(self._worktree, "") for text in shown]
        return [self._scrub(text) for text in shown]

    def _notes(self, line: bytes) -> list[str]:
        """What thirdshift itself wrote into the log (the CLI's stderr, a budget refusal): no
        Harness reader knows these lines."""
        if not line.startswith(b'{"type": "thirdshift.'):
            return []
        try:
            note = json.loads(line)
        except ValueError:
            return []
        text = str(note.get("text", ""))
        if note.get("type") == "thirdshift.stderr":
            return [f"{self._kind}: stderr: {part}" for part in text.splitlines() if part.strip()]
        return [f"{self._kind}: {part}" for part in text.splitlines() if part.strip()]


def show_log(
    session: SessionRecord,
    condenser: Condenser,
    write: Callable[[str], None],
    *,
    rows: _Rows | None = None,
    clock: Clock | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> None:
    """Write the session's log through ``condenser``. With ``rows`` and ``clock`` (``--follow``),
    keep reading as the file grows until the session (or its Run) is no longer running; an
    interrupt raises ``Interrupted`` from the clock's wait. A log that is not on this machine
    raises NotRecorded naming it."""
    path = Path(session.log_path)
    following = rows is not None and clock is not None
    while following and not path.exists() and _running(rows, session):
        assert clock is not None
        clock.sleep(poll_seconds)  # the session is starting: its log is about to be made
    try:
        log = path.open("rb")
    except OSError as error:
        raise NotRecorded(
            f"the Session log of Run {session.run_id}'s {session.kind} session, {path}, cannot "
            f"be read here ({error.strerror}); a Session log lives in the THIRDSHIFT_HOME of the "
            "machine that ran the Run: read it there, or `thirdshift show "
            f"{session.run_id}` for what the database kept"
        ) from error
    pending = b""
    with log:
        while True:
            # Looked at before the last read: a line written before the session ended is read.
            ended = not following or not _running(rows, session)
            pending += log.read()
            *complete, pending = pending.split(b"\n")
            for line in complete:
                for text in condenser.lines(line):
                    write(text)
            if ended:
                break
            assert clock is not None
            clock.sleep(poll_seconds)
    if pending.strip():
        for text in condenser.lines(pending):
            write(text)


def _running(rows: _Rows | None, session: SessionRecord) -> bool:
    """The session's row says running, and so does its Run's, which still holds its Lease: a
    crashed Run's last session row stays running for ever, and a dead Run's row says running
    until a daemon's reaper records the crash."""
    if rows is None:
        return False
    run = rows.get_run(session.run_id)
    if run is None or run.state != RunState.RUNNING:
        return False
    if not rows.holds_lease(run):
        # Its process died and no daemon has recorded the crash yet: nothing more will come.
        return False
    now = next((s for s in rows.run_sessions(session.run_id) if s.id == session.id), None)
    return now is not None and now.state == "running"
