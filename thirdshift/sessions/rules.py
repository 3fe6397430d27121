"""The Sessions module: every Delivery, Repair and Architect session goes through here.

It keeps the Resume rules and reaches the machine only through one private seam, ``_Outside``,
with two methods: run one session, and hand on a progress line. The real adapter
(``thirdshift.sessions.cli_outside.CliOutside``) spawns the Harness's CLI; tests use a scripted one.

The rules:

- a session that ends with background work killed gets one Resume (kind ``<kind>-resume``, the
  same session id, a prompt naming the killed work), announced by a progress line;
- a Resume that ends the same way gets no second Resume: a progress line says we carry on;
- a session that left no id to resume is treated the same way;
- a failed session is not resumed: its error goes up unchanged and no ending is recorded;
- the last log is the Resume's when there was one, and is recorded before the session runs;
- a later failure names the killed work ahead of its own cause (``failures_name_killed_work``);
- a native Resume the Harness no longer knows falls back to a fresh session opened with a
  resume brief built from our database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from thirdshift.errors import ThirdshiftError
from thirdshift.sessions.preamble import RESUME_CAP_TOKENS, resume_brief


@dataclass(frozen=True)
class SessionEnding:
    """What one session ended with: a small owned value, not the stream reader.

    ``recent_events`` are one-line summaries of the session's last Session events, read back
    from the database, for a resume brief should the native Resume fail."""

    session_id: str | None
    killed_work: tuple[str, ...]
    final_message: str | None
    recent_events: tuple[str, ...] = ()
    event_count: int = 0
    """How many Session events the session recorded in all (``recent_events`` are the last)."""


class SessionFailed(ThirdshiftError):
    """A session ended in failure: an error result, a failed turn, a non-zero exit, a watchdog,
    or an interrupt. ``log_path`` is its Session log."""

    def __init__(self, cause: str, log_path: Path | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.log_path = log_path


class SessionInterrupted(SessionFailed):
    """The session was stopped because thirdshift was interrupted (Ctrl-C or SIGTERM)."""


class BudgetReached(SessionFailed):
    """A cost budget was reached before or during the session: the session is stopped (or not
    started) and the Run ends as a Failed run whose cause names the budget and the amounts."""


class ResumeUnknown(SessionFailed):
    """A native Resume failed because the Harness no longer has the session (its transcript is
    gone: another machine, a cleaned home)."""


class LaterStepFailed(ThirdshiftError):
    """A step failed after one or more sessions had ended with background work killed; the
    message names those endings, oldest first, ahead of the step's own cause. ``original`` is
    the step's own error, whose exit status this error keeps."""

    def __init__(self, message: str, original: ThirdshiftError) -> None:
        super().__init__(message)
        self.original = original
        self.exit_code = original.exit_code


class _Outside(Protocol):
    """The machine, as the Resume rules see it."""

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        """Run one session of ``kind`` to its end and say what it ended with. With
        ``resume_id``, natively resume that session. Writes the Session log to ``log_path``
        (appending if it exists). Raises SessionFailed (ResumeUnknown when the Harness no longer
        knows ``resume_id``, SessionInterrupted on an interrupt) when the session fails."""
        ...

    def progress(self, line: str) -> None:
        """Hand on one progress line, without a timestamp."""
        ...


def _describe(work: tuple[str, ...]) -> str:
    return ", ".join(work)


def resume_prompt(work: tuple[str, ...]) -> str:
    """The prompt of a Resume: what was killed, and what to do about it."""
    return (
        f"Your background work ({_describe(work)}) was killed when your turn ended, before it "
        "finished. Run it again in the foreground, wait for it to complete, act on its result, "
        "and finish the task. Do not end your turn while anything you started is still running."
    )


class Sessions:
    """Runs sessions under the Resume rules and remembers what later failures must name.

    ``log_path_for(kind)`` gives the Session log path of a session of that kind."""

    def __init__(
        self,
        outside: _Outside,
        log_path_for: Callable[[str], Path],
        *,
        resume_cap_tokens: int = RESUME_CAP_TOKENS,
    ) -> None:
        self._outside = outside
        self._log_path_for = log_path_for
        self._resume_cap_tokens = resume_cap_tokens
        self._last_log: Path | None = None
        self._endings: list[str] = []

    @property
    def last_log(self) -> Path | None:
        """The Session log of the last session started (a Resume's when there was one)."""
        return self._last_log

    @property
    def endings(self) -> tuple[str, ...]:
        """Sessions that ended with background work killed and were carried on from, oldest
        first, each as ``<kind> session ended with background work killed (<work>)``."""
        return tuple(self._endings)

    def run(self, kind: str, prompt: str) -> SessionEnding:
        """Run a session of ``kind`` and, if its background work was killed, Resume it once."""
        ending = self._run_one(kind, None, prompt)
        if not ending.killed_work:
            return ending
        work = _describe(ending.killed_work)
        if ending.session_id is None:
            self._outside.progress(
                f"{kind}: the session ended with background work killed ({work}) and left no "
                "session id to resume; carrying on"
            )
            self._record(kind, ending)
            return ending
        self._outside.progress(
            f"{kind}: the session ended with background work killed ({work}); resuming it once"
        )
        resume_kind = f"{kind}-resume"
        # Until the Resume has redone it, the killed work is what a failure must name: a
        # Resume that fails must not take it out of the Failed run's cause and record.
        self._record(kind, ending)
        resumed = self._resume(resume_kind, prompt, ending)
        self._endings.pop()
        if resumed.killed_work:
            self._outside.progress(
                f"{kind}: the Resume also ended with background work killed "
                f"({_describe(resumed.killed_work)}); carrying on without another Resume"
            )
            self._record(resume_kind, resumed)
        return resumed

    def run_to_final_message(self, kind: str, prompt: str) -> str:
        """Run a session (with its Resume) and return the agent's last message ("" if none)."""
        return self.run(kind, prompt).final_message or ""

    @contextmanager
    def failures_name_killed_work(self) -> Iterator[None]:
        """Within this block, a ThirdshiftError raised after a session ended with background
        work killed is re-raised as LaterStepFailed naming that work ahead of its cause."""
        try:
            yield
        except LaterStepFailed:
            raise
        except ThirdshiftError as error:
            if not self._endings:
                raise
            message = f"{'; '.join(self._endings)} and a later step failed: {error}"
            raise LaterStepFailed(message, error) from error

    def _run_one(self, kind: str, resume_id: str | None, prompt: str) -> SessionEnding:
        log_path = self._log_path_for(kind)
        # Recorded before the session runs, so a session that fails still hands its log on.
        self._last_log = log_path
        self._outside.progress(f"{kind}: logging the session to {log_path}")
        return self._outside.run_session(kind, resume_id, prompt, log_path)

    def _resume(
        self, resume_kind: str, original_prompt: str, ending: SessionEnding
    ) -> SessionEnding:
        prompt = resume_prompt(ending.killed_work)
        try:
            return self._run_one(resume_kind, ending.session_id, prompt)
        except ResumeUnknown:
            self._outside.progress(
                f"{resume_kind}: the harness no longer has session {ending.session_id}; opening "
                "a fresh session with a resume brief instead"
            )
            brief = resume_brief(
                original_prompt,
                ending.recent_events,
                prompt,
                total_events=ending.event_count,
                cap_tokens=self._resume_cap_tokens,
            )
            return self._run_one(resume_kind, None, brief)

    def _record(self, kind: str, ending: SessionEnding) -> None:
        self._endings.append(
            f"{kind} session ended with background work killed ({_describe(ending.killed_work)})"
        )
