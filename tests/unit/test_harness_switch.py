"""The Harness switch rules (adr/0014), in-process, through scripted Outsides of two Harnesses."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from thirdshift.clock import ManualClock
from thirdshift.errors import Interrupted
from thirdshift.records import ProviderOutage
from thirdshift.sessions.rules import (
    GiveUp,
    ProviderUnavailable,
    SessionEnding,
    SessionFailed,
    Sessions,
    SwitchHarness,
    WaitForReset,
    after_outage,
)

START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Call:
    kind: str
    resume_id: str | None
    prompt: str
    log_path: Path


@dataclass
class ScriptedOutside:
    """Sessions of one Harness: each run_session takes the next queued outcome."""

    harness: str
    lines: list[str]
    outcomes: deque[SessionEnding | SessionFailed] = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)

    def then(self, *outcomes: SessionEnding | SessionFailed) -> ScriptedOutside:
        self.outcomes.extend(outcomes)
        return self

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        self.calls.append(Call(kind, resume_id, prompt, log_path))
        outcome = self.outcomes.popleft()
        if isinstance(outcome, SessionFailed):
            raise outcome
        return outcome

    def progress(self, line: str) -> None:
        self.lines.append(f"[{self.harness}] {line}")


def clean(message: str = "done", session_id: str = "s-1") -> SessionEnding:
    return SessionEnding(session_id=session_id, killed_work=(), final_message=message)


def refused(
    status: int = 529,
    *,
    harness: str = "claude",
    resets_at: datetime | None = None,
    steps: tuple[str, ...] = ("Bash pytest -q", "3 passed"),
) -> ProviderUnavailable:
    cause = f"{harness}'s turn failed: API error {status}"
    outage = ProviderOutage(harness, status, cause, resets_at)
    return ProviderUnavailable(
        outage.cause, outage, Path("/logs/x.jsonl"), recent_events=steps, event_count=len(steps)
    )


def log_path(kind: str) -> Path:
    return Path("/logs") / f"acme-widgets-issue-7-stamp-{kind}.jsonl"


def two_harnesses(
    *, wait: float = 300, clock: ManualClock | None = None
) -> tuple[Sessions, ScriptedOutside, ScriptedOutside]:
    lines: list[str] = []
    claude = ScriptedOutside("claude", lines)
    codex = ScriptedOutside("codex", lines)
    sessions = Sessions(
        claude,
        log_path,
        fallbacks=[codex],
        provider_wait_seconds=wait,
        clock=clock or ManualClock(START),
    )
    return sessions, claude, codex


def test_an_outage_continues_on_the_fallback_in_a_fresh_session_with_the_resume_brief() -> None:
    """claude's 529 after its retries: codex runs the same kind, with no resume id, a prompt that
    restates the request and carries claude's steps, and its own log; the line says so."""
    sessions, claude, codex = two_harnesses()
    claude.then(refused(529))
    codex.then(clean("fixed on codex", session_id="thread-9"))

    ending = sessions.run("implement", "Fix issue 7: add() subtracts")

    assert ending.final_message == "fixed on codex"
    [call] = codex.calls
    assert call.kind == "implement"
    assert call.resume_id is None
    assert call.prompt.startswith("Fix issue 7: add() subtracts")
    assert "This session continues an earlier one" in call.prompt
    assert "Bash pytest -q" in call.prompt
    assert "stopped when its model provider was overloaded (529)" in call.prompt
    assert call.log_path == log_path("implement-codex")
    assert (
        "[codex] implement: claude's provider is overloaded (529) after its retries; continuing "
        "on codex in a fresh session" in claude.lines
    )
    assert sessions.harness == "codex"


def test_later_sessions_of_the_run_stay_on_the_harness_it_switched_to() -> None:
    """A Repair after the switch runs on codex, with its own prompt, not on claude again."""
    sessions, claude, codex = two_harnesses()
    claude.then(refused(429))
    codex.then(clean(), clean("repaired"))

    sessions.run("implement", "do it")
    assert sessions.run_to_final_message("repair-1", "fix CI") == "repaired"

    assert [c.kind for c in claude.calls] == ["implement"]
    assert [(c.kind, c.prompt) for c in codex.calls][1] == ("repair-1", "fix CI")


def test_a_short_announced_reset_is_waited_for_then_the_same_harness_runs_again() -> None:
    """A 429 whose reset is 90 s away (within provider_wait_seconds): the clock waits 90 s and
    claude runs again with the brief; codex is never started."""
    clock = ManualClock(START)
    sessions, claude, codex = two_harnesses(wait=300, clock=clock)
    claude.then(refused(429, resets_at=START + timedelta(seconds=90)), clean("after the reset"))

    assert sessions.run_to_final_message("implement", "do it") == "after the reset"

    assert clock.slept == [90.0]
    assert codex.calls == []
    assert [c.resume_id for c in claude.calls] == [None, None]
    assert "Bash pytest -q" in claude.calls[1].prompt
    assert any("waiting 90s, then running the session again" in line for line in claude.lines)


def test_a_reset_further_off_than_the_wait_limit_switches_at_once() -> None:
    """A reset an hour away with a five-minute limit: no wait, codex continues."""
    clock = ManualClock(START)
    sessions, claude, codex = two_harnesses(wait=300, clock=clock)
    claude.then(refused(429, resets_at=START + timedelta(hours=1)))
    codex.then(clean())

    sessions.run("implement", "do it")

    assert clock.slept == []
    assert len(codex.calls) == 1


def test_a_provider_that_keeps_announcing_short_resets_is_waited_for_once() -> None:
    """The second refusal in a row with a short reset switches instead of waiting again."""
    clock = ManualClock(START)
    sessions, claude, codex = two_harnesses(wait=300, clock=clock)
    claude.then(
        refused(429, resets_at=START + timedelta(seconds=10)),
        refused(429, resets_at=START + timedelta(seconds=20)),
    )
    codex.then(clean())

    sessions.run("implement", "do it")

    assert clock.slept == [10.0]
    assert len(codex.calls) == 1


def test_an_interrupt_during_the_wait_ends_the_session_as_interrupted() -> None:
    """Ctrl-C while waiting for the reset stops at once: nothing else runs."""
    clock = ManualClock(START, interrupt_after=5)
    sessions, claude, codex = two_harnesses(wait=300, clock=clock)
    claude.then(refused(429, resets_at=START + timedelta(seconds=60)))

    with pytest.raises(Interrupted):
        sessions.run("implement", "do it")
    assert len(claude.calls) == 1
    assert codex.calls == []


def test_without_a_fallback_the_outage_fails_the_session_naming_the_fix() -> None:
    """No harness_fallbacks: the session fails as ProviderUnavailable, its message naming the
    outage and the setting that would have switched."""
    lines: list[str] = []
    claude = ScriptedOutside("claude", lines).then(refused(529))
    sessions = Sessions(claude, log_path)

    with pytest.raises(ProviderUnavailable) as raised:
        sessions.run("implement", "do it")

    assert "claude's provider is overloaded (529) after the CLI's retries" in str(raised.value)
    assert 'set harness_fallbacks, e.g. ["codex"]' in str(raised.value)
    assert raised.value.log_path == Path("/logs/x.jsonl")


def test_when_every_fallback_is_down_too_the_session_fails_naming_each_outage() -> None:
    """codex's 503 after claude's 529: nothing left; the failure names both outages in order,
    with the reset claude announced, and does not advise a fallback that was just tried."""
    sessions, claude, codex = two_harnesses(wait=60)
    claude.then(refused(529, resets_at=START + timedelta(hours=2)))
    codex.then(refused(503, harness="codex"))

    with pytest.raises(ProviderUnavailable) as raised:
        sessions.run("implement", "do it")

    assert str(raised.value) == (
        "codex's turn failed: API error 503; claude's provider is overloaded (529), until "
        f"{START + timedelta(hours=2):%Y-%m-%d %H:%M} UTC and then codex's provider is "
        "unavailable (503) after the CLI's retries, and no other Harness is left to continue "
        "on (run again once a provider is back)"
    )


def test_an_ordinary_failure_is_not_a_harness_switch() -> None:
    """A session failing for any other reason goes up unchanged; codex is never started."""
    sessions, claude, codex = two_harnesses()
    claude.then(SessionFailed("claude's turn failed: API error 400"))

    with pytest.raises(SessionFailed) as raised:
        sessions.run("implement", "do it")

    assert not isinstance(raised.value, ProviderUnavailable)
    assert codex.calls == []


def test_a_native_resume_refused_by_the_provider_continues_fresh_on_the_fallback() -> None:
    """The Resume's claude session id never reaches codex: codex starts fresh."""
    sessions, claude, codex = two_harnesses()
    claude.then(
        SessionEnding(session_id="claude-abc", killed_work=("npm test",), final_message="wait"),
        refused(529),
    )
    codex.then(clean())

    sessions.run("implement", "do it")

    assert [c.resume_id for c in claude.calls] == [None, "claude-abc"]
    assert [(c.kind, c.resume_id) for c in codex.calls] == [("implement-resume", None)]
    assert "claude-abc" not in codex.calls[0].prompt


def test_a_resume_switched_to_another_harness_restates_the_task_the_steps_and_the_rerun() -> None:
    """The Resume's own prompt only says what was killed: codex, opening fresh in its place,
    gets the session's task, the first session's steps and the Resume's, and the instruction to
    rerun the killed work."""
    sessions, claude, codex = two_harnesses()
    first = SessionEnding(
        session_id="claude-abc",
        killed_work=("npm test",),
        final_message="waiting",
        recent_events=("$ npm install", "$ npm test (in the background)"),
        event_count=2,
    )
    claude.then(first, refused(529, steps=("resumed: looking",)))
    codex.then(clean())

    sessions.run("implement", "Fix issue 7: the parser drops blank lines")

    prompt = codex.calls[0].prompt
    assert prompt.startswith("Fix issue 7: the parser drops blank lines")
    steps = prompt.split("Fix issue 7", 2)[-1]
    assert steps.index("$ npm install") < steps.index("resumed: looking")
    assert "Your background work (npm test) was killed" in prompt
    assert "stopped when its model provider was overloaded (529)" in prompt


def test_after_waiting_out_a_reset_a_native_resume_is_resumed_natively_again() -> None:
    """The same Harness still has the session: after the wait the Resume resumes it again,
    with the same short prompt, not a fresh session without the task."""
    clock = ManualClock(START)
    sessions, claude, codex = two_harnesses(clock=clock)
    claude.then(
        SessionEnding(session_id="claude-abc", killed_work=("npm test",), final_message="wait"),
        refused(429, resets_at=START + timedelta(seconds=30)),
        clean(),
    )

    sessions.run("implement", "do it")

    assert [(c.kind, c.resume_id) for c in claude.calls] == [
        ("implement", None),
        ("implement-resume", "claude-abc"),
        ("implement-resume", "claude-abc"),
    ]
    assert claude.calls[2].prompt == claude.calls[1].prompt
    assert codex.calls == []


def test_a_reset_already_gone_by_is_not_waited_for() -> None:
    """A reset in the past (a skewed clock, a bogus stamp) says nothing: the Run switches
    instead of running claude again at once into the same outage."""
    sessions, claude, codex = two_harnesses()
    claude.then(refused(429, resets_at=START - timedelta(minutes=5)))
    codex.then(clean())

    sessions.run("implement", "do it")

    assert len(claude.calls) == 1
    assert len(codex.calls) == 1


@pytest.mark.parametrize(
    ("seconds", "waited", "fallback", "decision"),
    [
        (60.0, False, 0, WaitForReset(60.0)),
        (-5.0, False, None, WaitForReset(0.0)),
        (60.0, True, 0, SwitchHarness(0)),
        (600.0, False, 0, SwitchHarness(0)),
        (None, False, 0, SwitchHarness(0)),
        (None, False, None, GiveUp()),
        (600.0, False, None, GiveUp()),
    ],
)
def test_after_outage_decides_wait_switch_or_give_up(
    seconds: float | None,
    waited: bool,
    fallback: int | None,
    decision: WaitForReset | SwitchHarness | GiveUp,
) -> None:
    """Wait only for a reset within the limit and only once; else switch; else give up."""
    assert (
        after_outage(seconds, wait_limit_seconds=300, waited=waited, next_fallback=fallback)
        == decision
    )
