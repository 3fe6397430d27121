"""The Resume rules, in-process, through a scripted Outside."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from thirdshift.errors import ThirdshiftError
from thirdshift.sessions.rules import (
    BudgetReached,
    LaterStepFailed,
    ResumeUnknown,
    SessionEnding,
    SessionFailed,
    Sessions,
)


@dataclass(frozen=True)
class Call:
    kind: str
    resume_id: str | None
    prompt: str
    log_path: Path


@dataclass
class ScriptedOutside:
    """A working in-memory Outside: each run_session takes the next queued outcome (an ending,
    or an error to raise) and records the call; progress lines are kept in order."""

    outcomes: deque[SessionEnding | SessionFailed] = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    harness: str = "scripted"

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
        self.lines.append(line)


def clean(message: str = "done", session_id: str | None = "s-1") -> SessionEnding:
    return SessionEnding(session_id=session_id, killed_work=(), final_message=message)


def killed(*work: str, session_id: str | None = "s-1", message: str = "waiting") -> SessionEnding:
    return SessionEnding(session_id=session_id, killed_work=work, final_message=message)


def sessions_over(outside: ScriptedOutside) -> Sessions:
    return Sessions(
        outside, lambda kind: Path("/logs") / f"acme-widgets-issue-7-stamp-{kind}.jsonl"
    )


def test_a_clean_session_runs_once_and_returns_its_final_message() -> None:
    """No killed work: one call, no Resume, the session's own final message."""
    outside = ScriptedOutside().then(clean("implemented"))
    sessions = sessions_over(outside)
    assert sessions.run_to_final_message("implement", "do the thing") == "implemented"
    assert [(c.kind, c.resume_id) for c in outside.calls] == [("implement", None)]
    assert outside.lines == [
        "implement: logging the session to /logs/acme-widgets-issue-7-stamp-implement.jsonl"
    ]
    assert sessions.endings == ()


def test_killed_work_with_an_id_gets_exactly_one_resume() -> None:
    """The Resume is `<kind>-resume`, resumes that id, names the work, and its final message is
    the one returned."""
    outside = ScriptedOutside().then(killed("npm test", session_id="abc"), clean("all green"))
    sessions = sessions_over(outside)
    assert sessions.run_to_final_message("implement", "do it") == "all green"
    assert [(c.kind, c.resume_id) for c in outside.calls] == [
        ("implement", None),
        ("implement-resume", "abc"),
    ]
    assert "npm test" in outside.calls[1].prompt
    assert "foreground" in outside.calls[1].prompt
    assert (
        "implement: the session ended with background work killed (npm test); resuming it once"
        in outside.lines
    )
    assert sessions.endings == ()


def test_a_resume_ending_the_same_way_gets_no_second_resume() -> None:
    """The Resume's killed work is carried on from, announced, and named by a later failure."""
    outside = ScriptedOutside().then(
        killed("npm test", session_id="abc"), killed("npm test again", session_id="abc")
    )
    sessions = sessions_over(outside)
    ending = sessions.run("implement", "do it")
    assert ending.killed_work == ("npm test again",)
    assert len(outside.calls) == 2
    assert outside.lines[-1] == (
        "implement: the Resume also ended with background work killed (npm test again); "
        "carrying on without another Resume"
    )
    with pytest.raises(LaterStepFailed) as caught, sessions.failures_name_killed_work():
        raise ThirdshiftError("the push was refused")
    assert str(caught.value) == (
        "implement-resume session ended with background work killed (npm test again) "
        "and a later step failed: the push was refused"
    )


def test_killed_work_without_a_session_id_is_carried_on_from() -> None:
    """No id to resume: no Resume, the carrying-on line, and the ending is remembered."""
    outside = ScriptedOutside().then(killed("cargo build", session_id=None))
    sessions = sessions_over(outside)
    sessions.run("repair-1", "fix CI")
    assert [c.kind for c in outside.calls] == ["repair-1"]
    assert outside.lines[-1] == (
        "repair-1: the session ended with background work killed (cargo build) and left no "
        "session id to resume; carrying on"
    )
    assert sessions.endings == ("repair-1 session ended with background work killed (cargo build)",)


def test_a_failing_session_is_not_resumed_and_its_error_is_unchanged() -> None:
    """A failed session's error goes up as it is; nothing is resumed and no ending recorded."""
    failure = SessionFailed("claude exited 1")
    outside = ScriptedOutside().then(failure)
    sessions = sessions_over(outside)
    with pytest.raises(SessionFailed) as caught:
        sessions.run("implement", "do it")
    assert caught.value is failure
    assert len(outside.calls) == 1
    assert sessions.endings == ()
    assert not any("carrying on" in line or "resuming" in line for line in outside.lines)


def test_a_failing_session_still_hands_on_its_log() -> None:
    """The last log is recorded before the session runs."""
    outside = ScriptedOutside().then(SessionFailed("watchdog"))
    sessions = sessions_over(outside)
    with pytest.raises(SessionFailed):
        sessions.run("implement", "do it")
    assert sessions.last_log == Path("/logs/acme-widgets-issue-7-stamp-implement.jsonl")


def test_steps_that_succeed_after_killed_work_keep_their_result() -> None:
    """Carrying on changes nothing for a step that succeeds."""
    outside = ScriptedOutside().then(killed("sleep 300", session_id=None), clean("repaired"))
    sessions = sessions_over(outside)
    with sessions.failures_name_killed_work():
        sessions.run("implement", "do it")
        result = sessions.run_to_final_message("repair-1", "fix")
    assert result == "repaired"


def test_two_sessions_leaving_killed_work_are_named_oldest_first() -> None:
    """Endings are joined by '; ' in the order they happened."""
    outside = ScriptedOutside().then(
        killed("npm test", session_id=None), killed("npm run e2e", session_id=None)
    )
    sessions = sessions_over(outside)

    def delivery() -> None:
        with sessions.failures_name_killed_work():
            sessions.run("implement", "do it")
            sessions.run("repair-1", "fix")
            raise SessionFailed("CI red on abc1234")

    with pytest.raises(LaterStepFailed) as caught:
        delivery()
    assert str(caught.value) == (
        "implement session ended with background work killed (npm test); "
        "repair-1 session ended with background work killed (npm run e2e) "
        "and a later step failed: CI red on abc1234"
    )
    assert isinstance(caught.value.original, SessionFailed)


def test_a_failure_with_no_killed_work_before_it_is_not_rewritten() -> None:
    """Without endings to name, the error passes through untouched."""
    outside = ScriptedOutside().then(clean())
    sessions = sessions_over(outside)
    failure = ThirdshiftError("no pull request found")

    def delivery() -> None:
        with sessions.failures_name_killed_work():
            sessions.run("implement", "do it")
            raise failure

    with pytest.raises(ThirdshiftError) as caught:
        delivery()
    assert caught.value is failure


def test_the_last_log_is_the_resumes() -> None:
    """After a Resume, the last log is the `<kind>-resume` log."""
    outside = ScriptedOutside().then(killed("npm test", session_id="abc"), clean())
    sessions = sessions_over(outside)
    sessions.run("implement", "do it")
    assert sessions.last_log == Path("/logs/acme-widgets-issue-7-stamp-implement-resume.jsonl")
    assert outside.calls[1].log_path == sessions.last_log


def test_a_resume_the_harness_no_longer_knows_falls_back_to_a_fresh_session_with_a_brief() -> None:
    """Native Resume fails as unknown: a fresh session opens with the original prompt verbatim,
    what the session did, and the instruction to re-run the killed work."""
    first = SessionEnding(
        session_id="gone",
        killed_work=("npm test",),
        final_message="waiting",
        recent_events=("$ npm install", "Edit src/app.ts", "$ npm test"),
    )
    outside = ScriptedOutside().then(
        first, ResumeUnknown("No conversation found with session ID: gone"), clean("finished")
    )
    sessions = sessions_over(outside)
    assert sessions.run_to_final_message("implement", "Implement issue #7.") == "finished"
    assert [(c.kind, c.resume_id) for c in outside.calls] == [
        ("implement", None),
        ("implement-resume", "gone"),
        ("implement-resume", None),
    ]
    brief = outside.calls[2].prompt
    assert brief.startswith("Implement issue #7.")
    assert brief.index("$ npm install") < brief.index("Edit src/app.ts") < brief.index("npm test")
    assert "foreground" in brief
    assert (
        "implement-resume: the harness no longer has session gone; opening a fresh session "
        "with a resume brief instead"
    ) in outside.lines


def test_a_fallback_session_that_fails_is_not_resumed_again() -> None:
    """The fresh session standing in for the Resume fails like any session: error unchanged."""
    failure = SessionFailed("codex's turn failed: exceeded retry limit")
    outside = ScriptedOutside().then(
        killed("sleep 600", session_id="t-1"), ResumeUnknown("no rollout found"), failure
    )
    sessions = sessions_over(outside)
    with pytest.raises(SessionFailed) as caught:
        sessions.run("implement", "do it")
    assert caught.value is failure
    assert len(outside.calls) == 3


def test_a_resume_that_fails_keeps_the_first_session_s_killed_work_in_the_cause() -> None:
    """The Resume was to redo the killed work; when it fails itself, the Failed run must still
    say what was killed (its cause names it, its record keeps it)."""
    outside = ScriptedOutside().then(
        killed("npm test", session_id="abc"), SessionFailed("the provider answered 500")
    )
    sessions = sessions_over(outside)
    with pytest.raises(LaterStepFailed) as caught, sessions.failures_name_killed_work():
        sessions.run("implement", "do it")
    assert str(caught.value) == (
        "implement session ended with background work killed (npm test) and a later step "
        "failed: the provider answered 500"
    )
    assert sessions.endings == ("implement session ended with background work killed (npm test)",)


def test_a_session_that_ends_over_its_budget_gets_no_resume_and_its_killed_work_is_named() -> None:
    """The session reached a cost budget and left background work killed: no Resume is paid
    for; the Run stops with the budget as its cause and the killed work in the record."""
    over = SessionEnding(
        session_id="s-1",
        killed_work=("npm test",),
        final_message="waiting",
        over_budget="the cost budget per Run is reached: $0.61 spent of $0.50",
    )
    outside = ScriptedOutside().then(over)
    sessions = sessions_over(outside)

    with pytest.raises(LaterStepFailed) as raised, sessions.failures_name_killed_work():
        sessions.run("implement", "do it")

    assert [(c.kind, c.resume_id) for c in outside.calls] == [("implement", None)]
    assert isinstance(raised.value.original, BudgetReached)
    assert str(raised.value) == (
        "implement session ended with background work killed (npm test) and a later step "
        "failed: after the implement session, the cost budget per Run is reached: $0.61 spent "
        "of $0.50"
    )
    assert sessions.endings == ("implement session ended with background work killed (npm test)",)
    assert sessions.last_log == Path("/logs/acme-widgets-issue-7-stamp-implement.jsonl")


def test_a_resume_that_ends_over_its_budget_stops_the_run_naming_the_work_still_undone() -> None:
    outside = ScriptedOutside().then(
        killed("npm test"),
        SessionEnding(
            session_id="s-1",
            killed_work=(),
            final_message="ran it",
            over_budget="the daily cost budget of acme/widgets is reached",
        ),
    )
    sessions = sessions_over(outside)

    with pytest.raises(BudgetReached, match="after the implement-resume session, the daily"):
        sessions.run("implement", "do it")

    assert [c.kind for c in outside.calls] == ["implement", "implement-resume"]
    assert sessions.endings == ("implement session ended with background work killed (npm test)",)
