"""The Sessions module: every Delivery, Repair and Architect session goes through here.

It keeps the Resume rules and reaches the machine only through one private seam, ``_Outside``,
with two methods: run one session, and hand on a progress line. The real adapter
(``thirdshift.sessions.cli_outside.CliOutside``) spawns the Harness's CLI; tests use a scripted one.

The rules:

- a session that ends with background work killed gets one Resume (kind ``<kind>-resume``, the
  same session id, a prompt naming the killed work), announced by a progress line;
- a Resume that ends the same way gets no second Resume: a progress line says we carry on;
- a session that left no id to resume is treated the same way;
- a failed session is not resumed: its error goes up and no ending is recorded;
- a session that ends with a cost budget reached gets no Resume: the Run stops there;
- the last log is the Resume's when there was one, and is recorded before the session runs;
- a later failure names the killed work ahead of its own cause (``failures_name_killed_work``);
- a native Resume the Harness no longer knows falls back to a fresh session opened with a
  resume brief built from our database.

And the Harness switch (adr/0014): a session whose provider refused it after the Harness's own
retries (``ProviderUnavailable``) is not a failure of the work. When the provider announced a
reset within ``provider_wait_seconds``, the session waits for it (once) and runs again;
otherwise the Run continues on the next Harness of the fallback order, in a fresh session (no
resume id crosses over) opened with a resume brief of the refused session's steps (a refused
Resume's carries its session's task and both sessions' steps); that Harness keeps the Run's
later sessions. With no Harness left the session fails, naming each outage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from thirdshift.clock import Clock
from thirdshift.errors import ThirdshiftError
from thirdshift.harness_registry import HARNESS_NAMES
from thirdshift.records import ProviderOutage
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
    over_budget: str | None = None
    """Set when the session ended with a cost budget reached: why (no further session starts,
    and the Run ends as a Failed run)."""


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


class ProviderUnavailable(SessionFailed):
    """The model provider refused the session after the Harness's own retries (429, 529, 503,
    or a rate-limit event saying rejected). ``outage`` says how; ``recent_events`` and
    ``event_count`` are the session's steps as the database holds them, for the resume brief
    of the session that continues it."""

    def __init__(
        self,
        cause: str,
        outage: ProviderOutage,
        log_path: Path | None = None,
        *,
        recent_events: tuple[str, ...] = (),
        event_count: int = 0,
    ) -> None:
        super().__init__(cause, log_path)
        self.outage = outage
        self.recent_events = recent_events
        self.event_count = event_count


class LaterStepFailed(ThirdshiftError):
    """A step failed after one or more sessions had ended with background work killed; the
    message names those endings, oldest first, ahead of the step's own cause. ``original`` is
    the step's own error, whose exit status this error keeps."""

    def __init__(self, message: str, original: ThirdshiftError) -> None:
        super().__init__(message)
        self.original = original
        self.exit_code = original.exit_code


class _Outside(Protocol):
    """The machine, as the Resume rules see it: sessions of one Harness."""

    @property
    def harness(self) -> str:
        """The name of the Harness this Outside runs sessions of."""
        ...

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        """Run one session of ``kind`` to its end and say what it ended with. With
        ``resume_id``, natively resume that session. Writes the Session log to ``log_path``
        (appending if it exists). Raises SessionFailed (ResumeUnknown when the Harness no longer
        knows ``resume_id``, SessionInterrupted on an interrupt, ProviderUnavailable when the
        model provider refused it after the Harness's own retries) when the session fails."""
        ...

    def progress(self, line: str) -> None:
        """Hand on one progress line, without a timestamp."""
        ...


@dataclass(frozen=True)
class WaitForReset:
    """Wait ``seconds`` for the reset the provider announced, then run the session again."""

    seconds: float


@dataclass(frozen=True)
class SwitchHarness:
    """Continue on the fallback Harness at ``index`` in a fresh session."""

    index: int


@dataclass(frozen=True)
class GiveUp:
    """No wait and no Harness left: the session fails, naming the outage."""


OutageDecision = WaitForReset | SwitchHarness | GiveUp


def after_outage(
    seconds_to_reset: float | None,
    *,
    wait_limit_seconds: float,
    waited: bool,
    next_fallback: int | None,
) -> OutageDecision:
    """What to do when a session met a provider outage whose reset is ``seconds_to_reset``
    away (None: not announced). A reset within ``wait_limit_seconds`` is waited for, once per
    session (a provider that keeps announcing short resets is down); otherwise the next
    fallback Harness, if any; otherwise give up."""
    if seconds_to_reset is not None and not waited and seconds_to_reset <= wait_limit_seconds:
        return WaitForReset(max(0.0, seconds_to_reset))
    if next_fallback is not None:
        return SwitchHarness(next_fallback)
    return GiveUp()


def switch_instruction(harness: str, condition: str) -> str:
    """What the session continuing on another Harness is told to do."""
    return (
        f"The earlier session ran on {harness} and stopped when its model provider was "
        f"{condition}; nothing is wrong with the work. Check the worktree's state (git status, "
        "git log), carry on from where it stopped, and finish the task."
    )


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

    ``log_path_for(kind)`` gives the Session log path of a session of that kind.
    ``fallbacks`` are the Outsides of the Harnesses to switch to, in order, on a provider
    outage; ``provider_wait_seconds`` is the longest announced reset worth waiting for, on
    ``clock`` (without a clock, no reset is waited for)."""

    def __init__(
        self,
        outside: _Outside,
        log_path_for: Callable[[str], Path],
        *,
        resume_cap_tokens: int = RESUME_CAP_TOKENS,
        fallbacks: Sequence[_Outside] = (),
        provider_wait_seconds: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        self._outside = outside
        self._log_path_for = log_path_for
        self._resume_cap_tokens = resume_cap_tokens
        self._fallbacks = tuple(fallbacks)
        self._next_fallback = 0
        self._provider_wait_seconds = provider_wait_seconds
        self._clock = clock
        self._last_log: Path | None = None
        self._endings: list[str] = []

    @property
    def last_log(self) -> Path | None:
        """The Session log of the last session started (a Resume's when there was one)."""
        return self._last_log

    @property
    def harness(self) -> str:
        """The Harness the Run's sessions run on now (another after a Harness switch)."""
        return self._outside.harness

    @property
    def endings(self) -> tuple[str, ...]:
        """Sessions that ended with background work killed and were carried on from, oldest
        first, each as ``<kind> session ended with background work killed (<work>)``."""
        return tuple(self._endings)

    def run(self, kind: str, prompt: str) -> SessionEnding:
        """Run a session of ``kind`` and, if its background work was killed, Resume it once."""
        ending = self._run_one(kind, None, prompt)
        self._stop_if_over_budget(kind, ending)
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
        self._stop_if_over_budget(resume_kind, resumed)
        self._endings.pop()
        if resumed.killed_work:
            self._outside.progress(
                f"{kind}: the Resume also ended with background work killed "
                f"({_describe(resumed.killed_work)}); carrying on without another Resume"
            )
            self._record(resume_kind, resumed)
        return resumed

    def _stop_if_over_budget(self, kind: str, ending: SessionEnding) -> None:
        """A session that ended with a cost budget reached gets no Resume and no successor:
        the Run ends here, its killed work named with the budget."""
        if ending.over_budget is None:
            return
        if ending.killed_work:
            self._record(kind, ending)
        raise BudgetReached(f"after the {kind} session, {ending.over_budget}", self._last_log)

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

    def _run_one(
        self,
        kind: str,
        resume_id: str | None,
        prompt: str,
        *,
        task: str | None = None,
        earlier: SessionEnding | None = None,
    ) -> SessionEnding:
        """One session, through provider outages: a short announced reset is waited for, else
        the next fallback Harness continues in a fresh session. ``task`` is the session's own
        prompt when ``prompt`` is a Resume's (what was killed), and ``earlier`` the ending the
        Resume continues: a session opened in their place restates the task and carries the
        steps of both."""
        waited = False
        log_name = kind
        task = prompt if task is None else task
        # A Resume's instruction (rerun the killed work) still applies after a switch.
        then = prompt if resume_id is not None else None
        native = (self._outside, resume_id)
        steps: list[str] = list(earlier.recent_events) if earlier else []
        total = earlier.event_count if earlier else 0
        outages: list[str] = []
        while True:
            log_path = self._log_path_for(log_name)
            # Recorded before the session runs, so a session that fails still hands its log on.
            self._last_log = log_path
            self._outside.progress(f"{kind}: logging the session to {log_path}")
            try:
                return self._outside.run_session(kind, resume_id, prompt, log_path)
            except ProviderUnavailable as refused:
                outage = refused.outage
                seconds = None
                if outage.resets_at is not None and self._clock is not None:
                    seconds = (outage.resets_at - self._clock.now()).total_seconds()
                    seconds = seconds if seconds > 0 else None  # a reset gone by says nothing
                decision = after_outage(
                    seconds,
                    wait_limit_seconds=self._provider_wait_seconds,
                    waited=waited,
                    next_fallback=(
                        self._next_fallback if self._next_fallback < len(self._fallbacks) else None
                    ),
                )
                harness = self._outside.harness
                condition = outage.condition
                reset = f", until {outage.resets_at:%Y-%m-%d %H:%M} UTC" if outage.resets_at else ""
                outages.append(f"{harness}'s provider is {condition}{reset}")
                steps += refused.recent_events
                total += refused.event_count
                if isinstance(decision, GiveUp):
                    given_up = _given_up(refused, outages, harness, fallbacks=bool(self._fallbacks))
                    raise given_up from refused
                # A fresh session unless the same Harness can resume natively: no resume id
                # crosses over (the other Harness cannot read this one's transcript); the
                # database's steps do, in a resume brief.
                instruction = switch_instruction(harness, condition)
                if then is not None:
                    instruction += "\n\n" + then
                brief = resume_brief(
                    task,
                    steps,
                    instruction,
                    total_events=total,
                    cap_tokens=self._resume_cap_tokens,
                )
                if isinstance(decision, WaitForReset):
                    assert self._clock is not None  # no clock, no reset to wait for
                    waited = True
                    self._outside.progress(
                        f"{kind}: {harness}'s provider is {condition} until its reset; "
                        f"waiting {decision.seconds:.0f}s, then running the session again"
                    )
                    self._clock.sleep(decision.seconds)
                    if native[1] is not None and native[0] is self._outside:
                        resume_id, prompt = native[1], then or prompt  # resume natively again
                    else:
                        resume_id, prompt = None, brief if total else task
                    continue
                self._next_fallback = decision.index + 1
                self._outside = self._fallbacks[decision.index]
                self._outside.progress(
                    f"{kind}: {harness}'s provider is {condition} after its retries; "
                    f"continuing on {self._outside.harness} in a fresh session"
                )
                resume_id = None
                prompt = brief
                waited = False
                log_name = f"{kind}-{self._outside.harness}"

    def _resume(
        self, resume_kind: str, original_prompt: str, ending: SessionEnding
    ) -> SessionEnding:
        prompt = resume_prompt(ending.killed_work)
        try:
            return self._run_one(
                resume_kind, ending.session_id, prompt, task=original_prompt, earlier=ending
            )
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


def _given_up(
    refused: ProviderUnavailable, outages: Sequence[str], harness: str, *, fallbacks: bool
) -> ProviderUnavailable:
    """The end of a session no provider is left for: every outage met, and the fix."""
    other = next((name for name in HARNESS_NAMES if name != harness), None)
    example = f', e.g. ["{other}"]' if other else ""
    fix = (
        "run again once a provider is back"
        if fallbacks
        else f"set harness_fallbacks{example}, or run again later"
    )
    return ProviderUnavailable(
        f"{refused.cause}; {' and then '.join(outages)} after the CLI's "
        f"retries, and no other Harness is left to continue on ({fix})",
        refused.outage,
        refused.log_path,
        recent_events=refused.recent_events,
        event_count=refused.event_count,
    )
